"""Optional cross-encoder reranking of fused candidates (``[rerank]``).

Policy: ``enabled = true`` means the model loads when the brain opens, or the brain refuses to
open with an error that names the setting; a search then reorders its top
``rerank.candidates`` fused candidates by the cross-encoder's score of (query, note text).
``enabled = false`` (the shipped default: no cross-encoder ships in a PyPI package, and the
machine may be offline) keeps the fusion order and loads nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from brain.errors import ModelUnavailable

log = logging.getLogger(__name__)


class Reranker:
    """A sentence-transformers CrossEncoder loaded from a local folder."""

    def __init__(self, model_path: str, max_chars: int = 2000) -> None:
        self.model_path = model_path
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._model = self._load(model_path)

    @staticmethod
    def _load(model_path: str) -> Any:
        if not model_path:
            raise ModelUnavailable(
                "rerank.enabled is true but rerank.model is empty: set BRAIN__RERANK__MODEL to "
                "the folder of a local cross-encoder, or BRAIN__RERANK__ENABLED=false"
            )
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise ModelUnavailable(
                f"rerank.model {model_path!r} is not a folder: point BRAIN__RERANK__MODEL at a "
                "local cross-encoder (a sentence-transformers CrossEncoder saved with "
                "save_pretrained), or set BRAIN__RERANK__ENABLED=false"
            )
        try:
            from sentence_transformers import CrossEncoder

            return CrossEncoder(str(path), device="cpu", local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any load failure is a refusal to start
            raise ModelUnavailable(
                f"rerank.model {model_path!r} could not be loaded as a cross-encoder "
                f"({type(exc).__name__}: {exc}); fix the folder or set "
                "BRAIN__RERANK__ENABLED=false"
            ) from exc

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        pairs = [(query, t[: self.max_chars]) for t in texts]
        with self._lock:
            out = self._model.predict(pairs, show_progress_bar=False, convert_to_numpy=True)
        return [float(x) for x in out]

    def status(self) -> dict[str, Any]:
        return {"enabled": True, "model": self.model_path}


_loaded: dict[str, Reranker] = {}
_loaded_lock = threading.Lock()


def load(enabled: bool, model_path: str) -> Reranker | None:
    """The configured reranker, or None when disabled. Raises ModelUnavailable when enabled
    and the model cannot be loaded (the server then refuses to start). One instance per model
    folder and process: the server's pre-flight check and the brain share it."""
    if not enabled:
        return None
    with _loaded_lock:
        reranker = _loaded.get(model_path)
        if reranker is None:
            reranker = _loaded[model_path] = Reranker(model_path)
            log.info("cross-encoder reranker loaded from %s", model_path)
    return reranker
