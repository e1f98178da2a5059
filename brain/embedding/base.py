"""What every embedding backend shares: the model record, the prompted document/query
encoder and unit normalisation. registry.py (the registry and the factory) and each backend
(onnx.py) import it, so no backend imports the factory that builds it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class ModelRecord:
    id: str
    provider: str
    dimension: int
    supported_dimensions: tuple[int, ...]
    max_seq_length: int
    query_prompt: str = ""
    document_prompt: str = ""
    credential_id: str | None = None
    local_path: str | None = field(default=None, compare=False)


def normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32)


class PromptedEncoder:
    """embed_documents / embed_query over an ``_encode(texts, prompt)``, with the record's
    document and query prompts (shared by the torch and onnx backends)."""

    record: ModelRecord

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._encode(texts, self.record.document_prompt)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text], self.record.query_prompt)[0]
