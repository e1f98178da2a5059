"""The ``onnx``, ``onnx-fp32`` and ``onnx-int8`` embedding backends: the same
sentence-transformers model, exported once to ONNX and run by onnxruntime.

On first use the model's transformer is exported, in a child process: a BERT encoder is
written from its weights without torch (:mod:`brain.embedding.bert_graph`), any other model
with ``torch.onnx.export`` (the ``torch`` extra), kept out of the server (``onnx-fp32``: fp32,
the same vectors as torch to cosine 0.9999999, with each layer's attention fused into
one operator where the model is a BERT encoder, ``onnx_export.fuse``). ``onnx``, the
default, runs that graph with its MatMul weights in 8 bits per block
(``onnx_quant.weights8``, also in a child: seconds, no torch), within cosine 0.999 of it. For ``onnx-int8`` the plain graph's MatMul
weights are quantised to int8 per channel (``onnxruntime.quantization.quantize_dynamic``;
from a cached plain fp32 export when there is one, without torch: ~3 s instead of ~12 s
here). Each file is cached under ``$XDG_CACHE_HOME/opencode-brain/onnx`` (``BRAIN_ONNX_CACHE``
overrides), written atomically so concurrent first starts do not collide. Pooling (mean or
CLS, from the model's ``1_Pooling/config.json``) and L2 normalisation run in numpy.

Measured on this machine against the torch vectors of all-MiniLM-L6-v2 (200-300 CoSQA texts):
fp32 cosine min 0.9999999; int8 min 0.989, mean 0.995 (quantising every op type, or without
per-channel scales, lost more: min 0.93). A single short query: torch ~12 ms, fp32 ~4-5 ms,
int8 ~1.5-2 ms. Batches of long texts are faster on torch (256 CoSQA codes: 6.3 s torch,
10.7 s fp32 ONNX).

Resident memory (bench/rss_owner.py): the fp32 weights are ~86 MB, but a loaded session held
97-127 MB (which one varied from start to start: free heap glibc kept from the load) and
~190 MB once it had embedded a few 64-note batches (the CPU arena keeps the largest batch's
activations for the life of the process). So the heap is trimmed after the load, and a
batch of at least ``SHRINK_FROM_TOKENS`` tokens runs with onnxruntime's arena shrinkage, the
heap trimmed once batches stop: 97 MB loaded and ~113 MB after batches, at no measured cost
to a batch (a query, one text, keeps its arena).

This module is the runtime: the cached files, the session, encoding. Beside it:
``onnx_export`` (the export and the attention fusion), ``onnx_quant`` (int8 and 8-bit
weights), ``onnx_compare`` (the checks a derived graph passes), ``onnx_child`` (both run in
a child process) and ``placement`` (the session's threads: spin and CPU placement).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brain import heap
from brain.embedding.base import PromptedEncoder, normalise
from brain.embedding.lanes import RunLocks, current_batch
from brain.embedding.onnx_child import export_in_child, weights8_in_child
from brain.embedding.onnx_quant import refusal_of
from brain.embedding.placement import Placement, intra_op_threads, placement, spin_options
from brain.errors import ModelUnavailable

log = logging.getLogger(__name__)

# Each backend's cached file: ``onnx`` (the default) the fused graph with 8-bit MatMul
# weights (``W8_BLOCK``), ``onnx-fp32`` the fused fp32 graph (torch's vectors), ``onnx-int8``
# the plain graph quantised dynamically to int8 per channel.
BACKENDS = {"onnx": "fp32-fused-w8", "onnx-fp32": "fp32-fused", "onnx-int8": "int8"}
# A run of this many tokens (texts x padded length) or more gives back the arena memory it
# grew (see the module docstring); below it, a run grows the arena by a few MB at most.
_SHRINK_ARENA = ("memory.enable_memory_arena_shrinkage", "cpu:0")
SHRINK_FROM_TOKENS = 1024
# The heap is trimmed once batches have stopped this long: a trim walks the whole heap (~0.2 s
# with a fragmented GB, holding each malloc arena's lock meanwhile), so an import's
# back-to-back batches share one trim, after the last.
TRIM_AFTER_IDLE_S = 2.0


def cache_dir() -> Path:
    explicit = os.environ.get("BRAIN_ONNX_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opencode-brain" / "onnx"


def _fingerprint(source: Path) -> str:
    """Changes when the model's weights or config change (name, size and mtime of each)."""
    h = hashlib.sha256()
    for f in sorted(source.glob("*")):
        if f.is_file() and f.suffix in (".json", ".safetensors", ".bin", ".txt"):
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


def _pooling(source: Path) -> str:
    cfg = source / "1_Pooling" / "config.json"
    if not cfg.is_file():
        return "mean"
    modes = json.loads(cfg.read_text(encoding="utf-8"))
    if modes.get("pooling_mode_mean_tokens"):
        return "mean"
    if modes.get("pooling_mode_cls_token"):
        return "cls"
    raise ModelUnavailable(
        f"the onnx backend supports mean or CLS pooling; {source} uses another. "
        "Set BRAIN__EMBEDDING__BACKEND=torch."
    )


class OnnxEmbedder(PromptedEncoder):
    """Same interface as SentenceTransformerEmbedder; loads (and exports) lazily."""

    def __init__(
        self, record: Any, source: Path, batch_size: int = 64, backend: str = "onnx"
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"onnx backend {backend!r}: one of {', '.join(BACKENDS)}")
        self.record = record
        self.backend = backend
        self.quantize = backend == "onnx-int8"
        self.source = Path(source)
        self._batch_size = batch_size
        self._session: Any = None
        self._shrink: Any = None  # RunOptions of a batch run
        self._tokenizer: Any = None
        self._counter: Any = None
        self._names: list[str] = []
        self._pool = "mean"
        self._lock = threading.Lock()
        self._encode_lock = RunLocks()  # a tool call's run never waits behind a batch's
        self._trim_lock = threading.Lock()
        self._place: Placement | None = None  # set with the session
        self._trim: threading.Timer | None = None  # the trim after the last batch, pending

    @property
    def model_file(self) -> Path:
        """The file this backend runs (see ``BACKENDS``); ``onnx`` runs :attr:`fused_file`
        instead where its 8-bit weights were not kept."""
        return self._cached(BACKENDS[self.backend])

    @property
    def fused_file(self) -> Path:
        """The fp32 graph with fused attention (``onnx-fp32``; what ``onnx`` quantises)."""
        return self._cached(BACKENDS["onnx-fp32"])

    @property
    def plain_file(self) -> Path:
        """Where a plain fp32 export (unfused) is cached: what int8 is quantised from without
        torch when it is there (an earlier version's default, or ``export_in_child(...,
        fused=False)``)."""
        return self._cached("fp32")

    def _cached(self, kind: str) -> Path:
        slug = self.record.id.replace("/", "--")
        return cache_dir() / f"{slug}-{_fingerprint(self.source)}-{kind}.onnx"

    def _load(self) -> Any:
        if self._session is not None:
            return self._session
        with self._lock:
            if self._session is not None:
                return self._session
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                self._pool = _pooling(self.source)
                path = self._model_path()
                self._counter = Tokenizer.from_file(str(self.source / "tokenizer.json"))
                self._counter.no_truncation()
                self._counter.no_padding()
                tok = Tokenizer.from_file(str(self.source / "tokenizer.json"))
                tok.enable_truncation(max_length=self.record.max_seq_length)
                pad = tok.token_to_id("[PAD]")
                tok.enable_padding(pad_id=pad if pad is not None else 0)
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = intra_op_threads()
                opts.log_severity_level = 3
                for key, value in spin_options(ort.__version__):
                    opts.add_session_config_entry(key, value)
                place = placement(opts.intra_op_num_threads)
                if place is not None:
                    opts.add_session_config_entry(*place.option())
                session = ort.InferenceSession(str(path), opts,
                                               providers=["CPUExecutionProvider"])
                shrink = ort.RunOptions()
                shrink.add_run_config_entry(*_SHRINK_ARENA)
            except ModelUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure means the same fix
                raise ModelUnavailable(
                    f"cannot run {self.record.id} on the onnx backend ({type(exc).__name__}: "
                    f"{exc}). Install onnx and onnxruntime (pip install onnx onnxruntime) or set "
                    "BRAIN__EMBEDDING__BACKEND=torch."
                ) from exc
            self._names = [i.name for i in session.get_inputs()]
            self._place = place
            self._tokenizer = tok
            self._shrink = shrink
            self._session = session
            heap.release()  # the model file's bytes and the weights prepacking replaced
            log.info("embedding model %s runs on onnxruntime (%s)", self.record.id, self.backend)
            return session

    def _model_path(self) -> Path:
        """The file to run, exported (and quantised) first where it is not cached."""
        path = self.model_file
        if path.is_file():
            return path
        fp32 = self.fused_file if self.backend == "onnx" else path
        if not fp32.is_file():
            log.info("exporting %s to ONNX at %s (once)", self.record.id, fp32)
            export_in_child(self.source, fp32, self.quantize, self.plain_file)
        if fp32 == path:
            return path
        if refusal_of(path).is_file():  # this model's 8-bit weights moved its vectors
            return fp32
        log.info("quantising %s's weights to 8 bits at %s (once)", self.record.id, path)
        return path if weights8_in_child(fp32, path, self.source) else fp32

    @property
    def dimension(self) -> int:
        if self.record.dimension:
            return int(self.record.dimension)
        return int(self.embed_query("dimension probe").shape[0])

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        session = self._load()
        if prompt:
            texts = [prompt + t for t in texts]
        out = []
        shrunk = False
        with self._encode_lock():
            for start in range(0, len(texts), self._batch_size):
                encs = self._tokenizer.encode_batch(list(texts[start : start + self._batch_size]))
                feed = {
                    "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
                }
                big = feed["input_ids"].size >= SHRINK_FROM_TOKENS
                shrunk = shrunk or big
                run = self._shrink if big else None
                batch = current_batch()  # a background batch: a tool call may stop the run
                if batch is not None:
                    run = self._run_options(big)
                    batch.register(run)
                with self._place.running() if self._place else contextlib.nullcontext():
                    hidden = session.run(None, {n: feed[n] for n in self._names}, run)[0]
                if self._pool == "cls":
                    vecs = hidden[:, 0]
                else:
                    mask = feed["attention_mask"][..., None].astype(np.float32)
                    vecs = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
                out.append(vecs)
            if shrunk:
                self._trim_when_idle()
        return normalise(np.concatenate(out).astype(np.float32))

    @staticmethod
    def _run_options(big: bool) -> Any:
        """Run options of one background run, which brain/embedding/lanes.py may stop
        (``terminate``) when a tool call comes in."""
        import onnxruntime as ort

        opts = ort.RunOptions()
        if big:
            opts.add_run_config_entry(*_SHRINK_ARENA)
        return opts

    def _trim_when_idle(self) -> None:
        """(Re)start the timer of the trim after a batch."""
        with self._trim_lock:
            if self._trim is not None:
                self._trim.cancel()
            self._trim = threading.Timer(TRIM_AFTER_IDLE_S, heap.release)
            self._trim.daemon = True
            self._trim.start()

    def count_tokens(self, text: str) -> int:
        self._load()
        return len(self._counter.encode(text, add_special_tokens=False).ids)
