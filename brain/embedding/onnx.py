"""The ``onnx``, ``onnx-fp32`` and ``onnx-int8`` embedding backends: the same
sentence-transformers model, exported once to ONNX and run by onnxruntime.

On first use the model's transformer is exported, in a child process: a BERT encoder is
written from its weights without torch (:mod:`brain.embedding.bert_graph`), any other model
with ``torch.onnx.export`` (the ``torch`` extra), kept out of the server (``onnx-fp32``: fp32,
the same vectors as torch to cosine 0.9999999, with each layer's attention fused into one
operator where the model is a BERT encoder, :func:`fuse`). ``onnx``, the default, runs that
graph with its MatMul weights in 8 bits per block (:func:`weights8`, also in a child:
seconds, no torch), within cosine 0.999 of it. For ``onnx-int8`` the plain graph's MatMul
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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brain import heap
from brain.embedding import bert_graph
from brain.embedding.base import PromptedEncoder, normalise
from brain.errors import ModelUnavailable

log = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Each backend's cached file: ``onnx`` (the default) the fused graph with 8-bit MatMul
# weights (``W8_BLOCK``), ``onnx-fp32`` the fused fp32 graph (torch's vectors), ``onnx-int8``
# the plain graph quantised dynamically to int8 per channel.
BACKENDS = {"onnx": "fp32-fused-w8", "onnx-fp32": "fp32-fused", "onnx-int8": "int8"}
# Model types whose export :func:`fuse` runs the BERT fusions on (MiniLM, BGE, E5 and the
# other BERT encoders); any other model runs its plain export.
FUSABLE = frozenset({"bert"})
# A run of this many tokens (texts x padded length) or more gives back the arena memory it
# grew (see the module docstring); below it, a run grows the arena by a few MB at most.
_SHRINK_ARENA = ("memory.enable_memory_arena_shrinkage", "cpu:0")
SHRINK_FROM_TOKENS = 1024
# The heap is trimmed once batches have stopped this long: a trim walks the whole heap (~0.2 s
# with a fragmented GB, holding each malloc arena's lock meanwhile), so an import's
# back-to-back batches share one trim, after the last.
TRIM_AFTER_IDLE_S = 2.0
# onnxruntime's intra-op threads spin (busy-wait) for work by default, and keep spinning ~40
# ms after each run. A memory server shares the machine with the agent and its client: on 2
# CPUs, three stdio servers on one 1,000-note store queried in turn under a load of 3-5
# answered search_memory at p50 40.4 ms spinning that way, 26.6 ms not (footprint round
# four), so the threads used not to spin at all. Each of a query's ~50 operators then wakes
# the pool's sleeping thread (a futex wake, and a wait for the scheduler when the CPUs are
# busy). A spin bounded to ``SPIN_US`` between operators, and stopped when the run ends
# (``force_spinning_stop``), keeps the pool awake inside a run only: a query embeds in 2.6
# instead of 3.3 ms with less CPU (5.0 vs 5.7 ms a query), beside two CPU-bound processes in
# 3.2-3.7 instead of 8.0 ms, and a run leaves no thread spinning (BENCHMARKS.md, "Round
# seven"). onnxruntime before 1.32 may not read the bound (an unknown key is ignored,
# and the threads would spin unbounded), so there the pool does not spin.
SPIN_US = 20
SPIN_FROM = (1, 32)
# The ``onnx`` backend's file: the fused fp32 graph with each MatMul's weights in 8 bits per
# block of ``W8_BLOCK`` inputs (onnxruntime's MatMulNBits, weight-only: a scale per block, so
# one outlying weight costs its block, not its column), multiplied as int8 where the CPU has
# the instructions (``W8_ACCURACY`` 4; 0 multiplies in fp32 but ran 4x slower here). A
# dozen-token query reads every layer's weights once: 42 MB of fp32 streamed through a 32 MB
# L3 took 2.7 ms, 19 MB (the fused attention's own QKV weights stay fp32) 2.05 ms, and 640
# notes in batches of 64 took 0.82 of the time (``python -m bench.embed_graphs``). Its vectors
# are the fp32 graph's to cosine 0.9992 (min over 300 queries and 640 notes; mean 0.9997) and
# recall on the bench's test halves moved by at most 0.004 (BENCHMARKS.md, "Round eight"). A
# file whose vectors move more than ``W8_MIN_COSINE`` is not kept: that model runs its fp32
# graph (``onnx-fp32`` always does).
W8_BLOCK = 128
W8_ACCURACY = 4
W8_MIN_COSINE = 0.999


def spin_options(version: str) -> list[tuple[str, str]]:
    """The session's spin settings under onnxruntime ``version`` (see above)."""
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        major, minor = 0, 0
    if (major, minor) < SPIN_FROM:
        return [("session.intra_op.allow_spinning", "0")]
    return [("session.intra_op.allow_spinning", "1"),
            ("session.intra_op.spin_duration_us", str(SPIN_US)),
            ("session.force_spinning_stop", "1")]


# The most intra-op threads a session runs (the calling thread and its pool).
MAX_THREADS = 4


class Placement:
    """Where a session's threads run when its pool covers every CPU the process may use
    (2-4 CPUs). After a pause of even 50 ms, Linux placed the pool's thread on the calling
    thread's CPU for the next ~5 runs (a 2-CPU VM: the two on one CPU in 17-21 of 25 such runs,
    a query embedding in 5.0-5.7 instead of 2.9 ms, about one thread's time;
    ``/work/notes/runs/qemb_gap3.py``). So the pool's threads are pinned to all CPUs but the
    first, and the calling thread runs on the first for the length of a run, then gets its
    CPUs back: 2.8-3.1 ms after the pause. A stdio search at 1k answered in 0.93-0.97 of the
    time quiet, 0.86-0.99 beside one CPU-bound process, 0.89-1.04 beside two (BENCHMARKS.md,
    "Round seven"). With more CPUs than threads nothing is pinned: the pool can go where the
    CPUs are idle."""

    def __init__(self, caller: frozenset[int], pool: tuple[int, ...]) -> None:
        self.caller = caller
        self.pool = pool

    @classmethod
    def plan(cls, allowed: set[int] | frozenset[int], threads: int) -> Placement | None:
        """The placement for ``threads`` threads over the CPUs ``allowed``; None when the
        pool does not cover them (one thread, or more CPUs than threads)."""
        cpus = sorted(allowed)
        if threads < 2 or len(cpus) != threads:
            return None
        return cls(frozenset(cpus[:1]), tuple(cpus[1:]))

    def option(self) -> tuple[str, str]:
        """onnxruntime's session entry: one CPU per pool thread, numbered from 1."""
        return ("session.intra_op_thread_affinities", ";".join(str(c + 1) for c in self.pool))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The calling thread on the caller's CPUs for the length of a run, then back."""
        try:
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.caller)
        except OSError:  # a CPU set changed under the process: run where it is
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, before)


def _allowed_cpus() -> set[int]:
    """The CPUs this process may run on (empty where the OS does not say)."""
    try:
        return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    except OSError:
        return set()


def placement(threads: int) -> Placement | None:
    """This process's :class:`Placement` (None where the OS has no CPU affinity, or with
    ``BRAIN_ONNX_PIN=0``)."""
    allowed = _allowed_cpus()
    if not allowed or os.environ.get("BRAIN_ONNX_PIN") == "0":
        return None
    return Placement.plan(allowed, threads)


def intra_op_threads() -> int:
    """The intra-op threads of a session: the CPUs this process may use, at most
    ``MAX_THREADS``."""
    return max(1, min(MAX_THREADS, len(_allowed_cpus()) or os.cpu_count() or 1))


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


def _quantize(fp32: Path, out: Path) -> None:
    """Write ``out`` (atomically): ``fp32``'s MatMul weights quantised to int8 per channel."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    level = root.level
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        int8 = Path(tmp) / "model-int8.onnx"
        root.setLevel(logging.ERROR)  # quantize_dynamic logs advice on the root logger
        try:
            quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8,
                             per_channel=True, op_types_to_quantize=["MatMul"])
        finally:
            root.setLevel(level)
        os.replace(int8, out)


def fuse(plain: Path, out: Path, source: Path) -> bool:
    """Write ``plain`` (an fp32 export of ``source``) to ``out`` with each layer's attention
    fused into one operator (``onnxruntime.transformers.optimizer``, BERT fusions: Attention,
    SkipLayerNormalization, BiasGelu, EmbedLayerNormalization). True when it did and the fused
    graph gives the plain one's outputs; False (``out`` not written) for a model the fusions
    do not match or change, which then runs unfused.

    A query is a dozen tokens: the plain graph runs ~670 operators a query, each a handful
    of microseconds plus a wake of the thread pool; fused, one all-MiniLM-L6-v2 query embeds
    in 3.2 instead of 3.8 ms on two threads (BENCHMARKS.md, "the fused graph"), to the same
    vector (cosine 1.000000 over 300 queries)."""
    cfg = json.loads((source / "config.json").read_text(encoding="utf-8"))
    heads, hidden = cfg.get("num_attention_heads"), cfg.get("hidden_size")
    if cfg.get("model_type") not in FUSABLE or not heads or not hidden:
        return False
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the optimizer logs its progress on the root logger
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            model = optimize_model(_basic_pass(plain, Path(tmp) / "basic.onnx"),
                                   model_type="bert", num_heads=int(heads),
                                   hidden_size=int(hidden), opt_level=0)
            if not model.get_fused_operator_statistics().get("Attention"):
                return False  # no attention pattern matched: nothing over the runtime's own
            fused = Path(tmp) / "fused.onnx"
            model.save_model_to_file(str(fused))
            if not same_outputs(plain, fused, vocab=int(cfg.get("vocab_size") or 20000)):
                return False
            os.replace(fused, out)
    except Exception as exc:  # noqa: BLE001 - the fusion is optional: the plain graph serves
        log.warning("fusing %s failed (%s: %s): it runs unfused", plain.name,
                    type(exc).__name__, str(exc)[:200])
        return False
    finally:
        root.setLevel(level)
    return True


def _basic_pass(plain: Path, out: Path) -> str:
    """``plain`` with onnxruntime's basic graph optimisations (constant folding, redundant
    nodes) at ``out``: what ``optimize_model(opt_level=1)`` runs before its fusions, but that
    imports torch (onnxruntime 1.32's optimizer.py, for a GPU check), which the default install
    has not."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(out)
    opts.log_severity_level = 3
    ort.InferenceSession(str(plain), opts, providers=["CPUExecutionProvider"])
    return str(out)


def _probe(vocab: int) -> dict[str, np.ndarray]:
    """A padded batch of three token-id rows below ``vocab``, the graphs' comparison input."""
    rng = np.random.default_rng(0)
    ids = rng.integers(min(1000, vocab // 2), min(20000, vocab), size=(3, 17), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    return {"input_ids": ids * mask, "attention_mask": mask,
            "token_type_ids": np.zeros_like(ids)}


def _hidden(path: Path, feed: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: feed[i.name] for i in session.get_inputs()})[0]


def same_outputs(a: Path, b: Path, tolerance: float = 1e-3, vocab: int = 20000) -> bool:
    """Whether two encoder graphs give the same hidden states for a padded batch of token
    ids below ``vocab`` (the padded positions, which pooling masks out, are not compared)."""
    feed = _probe(vocab)
    keep = feed["attention_mask"].astype(bool)
    return bool(np.abs(_hidden(a, feed)[keep] - _hidden(b, feed)[keep]).max() <= tolerance)


def vectors_cosine(a: Path, b: Path, vocab: int = 20000) -> float:
    """The lowest cosine between two encoder graphs' mean-pooled vectors of :func:`_probe`'s
    rows (the check a quantised graph passes before it is kept)."""
    feed = _probe(vocab)
    mask = feed["attention_mask"][..., None].astype(np.float32)
    a_vec, b_vec = ((_hidden(p, feed) * mask).sum(axis=1) for p in (a, b))
    a_vec /= np.linalg.norm(a_vec, axis=1, keepdims=True)
    b_vec /= np.linalg.norm(b_vec, axis=1, keepdims=True)
    return float((a_vec * b_vec).sum(axis=1).min())


def weights8(fp32: Path, out: Path, source: Path | None = None,
             block: int = W8_BLOCK) -> bool:
    """Write ``fp32``'s graph to ``out`` (atomically) with each MatMul's constant weights
    quantised to 8 bits per block (see ``W8_BLOCK``); True when written. False, ``out``
    untouched, when the quantiser cannot run (``onnxruntime.quantization``'s MatMulNBits
    quantiser needs ``onnx-ir``) or the vectors move below ``W8_MIN_COSINE``; the latter is
    remembered beside ``out`` (:func:`refusal_of`), so later starts do not quantise again."""
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            MatMulNBitsQuantizer,
        )
    except ImportError as exc:
        log.warning("8-bit weights unavailable (%s): %s runs in fp32", exc, fp32.name)
        return False
    import onnx

    cfg = {}
    if source is not None and (source / "config.json").is_file():
        cfg = json.loads((source / "config.json").read_text(encoding="utf-8"))
    vocab = int(cfg.get("vocab_size") or 20000)
    # The quantiser logs each node it skips at INFO, on its own handler.
    quiet = logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")
    quiet.setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        staged = Path(tmp) / "w8.onnx"
        quantizer = MatMulNBitsQuantizer(onnx.load(str(fp32)), algo_config=(
            DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True,
                                         accuracy_level=W8_ACCURACY, bits=8)))
        quantizer.process()
        quantizer.model.save_model_to_file(str(staged), use_external_data_format=False)
        cosine = vectors_cosine(fp32, staged, vocab)
        if cosine < W8_MIN_COSINE:
            reason = (f"8-bit weights moved {fp32.name}'s vectors to cosine {cosine:.4f} "
                      f"(< {W8_MIN_COSINE})")
            refusal_of(out).write_text(reason + "\n", encoding="utf-8")
            log.warning("%s: it runs in fp32", reason)
            return False
        os.replace(staged, out)
    return True


def export(source: Path, out: Path, quantize: bool, fp32: Path | None = None,
           fused: bool = True) -> list[str]:
    """Export ``source`` (a sentence-transformers folder) to an ONNX file at ``out``, with
    int8 weights when ``quantize``, else with its attention fused where :func:`fuse` can
    (``fused``). Returns the ONNX input names (empty when quantising an already exported
    plain ``fp32`` file: then the model folder is not read, seconds less, and the result is
    what the export would have quantised). A BERT encoder is built without torch; any other
    model needs torch (:func:`torch_export`)."""
    if quantize and fp32 is not None and fp32.is_file():
        _quantize(fp32, out)
        return []
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        model_file = Path(tmp) / "model.onnx"
        try:  # a BERT encoder is written from its weights: no torch (bert_graph.py)
            names = bert_graph.build(source, model_file)
        except ModelUnavailable as refused:
            names = torch_export(source, model_file, refused)
        if quantize:
            _quantize(model_file, out)
        elif not (fused and fuse(model_file, out, source)):
            os.replace(model_file, out)
    return names


def torch_export(source: Path, model_file: Path, refused: ModelUnavailable) -> list[str]:
    """``source`` exported with ``torch.onnx.export`` (a model :mod:`bert_graph` refused);
    its input names. torch is an extra: without it, ``refused`` says why and what to install."""
    if not (source / "config.json").is_file():  # before the seconds torch takes to import
        raise refused
    import inspect

    try:
        import torch
        from transformers import AutoModel
    except ImportError:
        raise refused from None

    try:  # attention as plain operators, the pattern fuse() matches (SDPA's does not)
        model = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()
    except (TypeError, ValueError):  # a model class without the choice
        model = AutoModel.from_pretrained(str(source)).eval()
    accepted = inspect.signature(model.forward).parameters
    names = [n for n in _INPUTS if n in accepted]

    class _Encoder(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

    example = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Encoder(model), example, str(model_file), input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]},
            opset_version=17, dynamo=False,
        )
    return names


def _child(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m brain.embedding.onnx ARGS`` in a child process, output captured."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
    return subprocess.run([sys.executable, "-m", "brain.embedding.onnx", *args], env=env,
                          cwd=root, capture_output=True, text=True, timeout=3600, check=False)


def export_in_child(source: Path, out: Path, quantize: bool, fp32: Path | None = None,
                    fused: bool = True) -> None:
    """:func:`export` in a child process (``python -m brain.embedding.onnx``). The export's
    heap (and torch, for a model other than a BERT encoder) would otherwise stay in the server
    for the rest of its life (bench/rss_owner.py); the default path runs on onnxruntime alone. An
    int8 file is quantised from ``fp32`` when that export is cached."""
    cmd = [str(source), str(out)]
    if quantize:
        cmd.append("--int8")
        if fp32 is not None and fp32.is_file():
            cmd += ["--from-fp32", str(fp32)]
    elif not fused:
        cmd.append("--plain")
    proc = _child(cmd)
    if proc.returncode != 0 or not out.is_file():
        tail = " / ".join(proc.stderr.strip().splitlines()[-3:])
        raise ModelUnavailable(f"exporting {source} to ONNX failed (exit {proc.returncode}: "
                               f"{tail}). A model other than a BERT encoder needs torch for the "
                               "export (pip install 'opencode-brain[torch]'), or set "
                               "BRAIN__EMBEDDING__BACKEND=torch.")


def refusal_of(out: Path) -> Path:
    """Where :func:`weights8` records that ``out``'s vectors moved too far (delete it to try
    again)."""
    return out.with_name(out.name + ".refused")


def weights8_in_child(fp32: Path, out: Path, source: Path) -> bool:
    """:func:`weights8` in a child process (the quantiser holds the whole graph in memory,
    which the server would keep as heap); False when it kept nothing (logged)."""
    proc = _child([str(source), str(out), "--w8-from", str(fp32)])
    if proc.returncode == 0 and out.is_file():
        return True
    tail = " / ".join(proc.stderr.strip().splitlines()[-2:])
    log.warning("8-bit weights of %s were not kept (%s): it runs in fp32", fp32.name,
                tail or f"exit {proc.returncode}")
    return False


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
        self._encode_lock = threading.Lock()
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
        with self._encode_lock:
            for start in range(0, len(texts), self._batch_size):
                encs = self._tokenizer.encode_batch(list(texts[start : start + self._batch_size]))
                feed = {
                    "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
                }
                big = feed["input_ids"].size >= SHRINK_FROM_TOKENS
                shrunk = shrunk or big
                with self._place.running() if self._place else contextlib.nullcontext():
                    hidden = session.run(None, {n: feed[n] for n in self._names},
                                         self._shrink if big else None)[0]
                if self._pool == "cls":
                    vecs = hidden[:, 0]
                else:
                    mask = feed["attention_mask"][..., None].astype(np.float32)
                    vecs = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
                out.append(vecs)
            if shrunk:
                self._trim_when_idle()
        return normalise(np.concatenate(out).astype(np.float32))

    def _trim_when_idle(self) -> None:
        """(Re)start the timer of the trim after a batch (called with the encode lock)."""
        if self._trim is not None:
            self._trim.cancel()
        self._trim = threading.Timer(TRIM_AFTER_IDLE_S, heap.release)
        self._trim.daemon = True
        self._trim.start()

    def count_tokens(self, text: str) -> int:
        self._load()
        return len(self._counter.encode(text, add_special_tokens=False).ids)


if __name__ == "__main__":  # the export's child process (export_in_child)
    import argparse

    parser = argparse.ArgumentParser(prog="python -m brain.embedding.onnx")
    parser.add_argument("source", type=Path, help="a sentence-transformers model folder")
    parser.add_argument("out", type=Path, help="the ONNX file to write")
    parser.add_argument("--int8", action="store_true", help="quantise the MatMul weights")
    parser.add_argument("--from-fp32", type=Path, default=None,
                        help="with --int8: quantise this (plain) fp32 export instead of exporting")
    parser.add_argument("--plain", action="store_true", help="fp32 without fused attention")
    parser.add_argument("--w8-from", type=Path, default=None,
                        help="write this fp32 graph with 8-bit MatMul weights (weights8)")
    args = parser.parse_args()
    if args.w8_from is not None:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        sys.exit(0 if weights8(args.w8_from, args.out, args.source) else 3)
    export(args.source, args.out, args.int8, args.from_fp32, fused=not args.plain)
