"""The onnx backends (the default): the bundled all-MiniLM-L6-v2 exported to ONNX (once,
cached) and run by onnxruntime: 8-bit weights per block (the default, within cosine 0.999 of
torch), fp32 (the torch vectors) or int8 (close to them)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from brain.app import Brain
from brain.embedding.onnx import BACKENDS, OnnxEmbedder
from brain.embedding.onnx_quant import W8_BLOCK, W8_MIN_COSINE
from brain.embedding.placement import Placement, intra_op_threads, placement, spin_options
from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder, embed_passages
from brain.errors import ModelUnavailable
from brain.memory import RecallFilter
from tests.conftest import _seed_store

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "Pin torch before installing the package",
    "def is_empty(lst):\n    return len(lst) == 0",
    "The deploy pipeline runs integration tests against a staging database.",
    "Caroline said she went to a support group yesterday",
    "python check if a file exists",
    "Redis cache TTL for sessions is 30 minutes.",
] * 3


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("onnx-cache")
    old = os.environ.get("BRAIN_ONNX_CACHE")
    os.environ["BRAIN_ONNX_CACHE"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("BRAIN_ONNX_CACHE", None)
        else:
            os.environ["BRAIN_ONNX_CACHE"] = old


@pytest.fixture(scope="module", params=["onnx", "onnx-fp32", "onnx-int8"])
def onnx_embedder(request: pytest.FixtureRequest, onnx_cache: Path) -> OnnxEmbedder:
    emb = build_embedder(REGISTRY[DEFAULT_MODEL], backend=request.param)
    assert isinstance(emb, OnnxEmbedder) and emb.backend == request.param
    emb.embed_query("warm up")  # exports into the cache
    return emb


def test_vectors_agree_with_torch(onnx_embedder: OnnxEmbedder, st_embedder) -> None:  # noqa: ANN001
    a = st_embedder.embed_documents(TEXTS)
    b = onnx_embedder.embed_documents(TEXTS)
    assert b.shape == a.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    floor = {"onnx-fp32": 0.99999, "onnx": 0.999}.get(onnx_embedder.backend, 0.985)
    assert float((a * b).sum(axis=1).min()) >= floor
    q = "how do I check that a list is empty"
    assert float(st_embedder.embed_query(q) @ onnx_embedder.embed_query(q)) >= 0.985
    # Same ranking of the documents for a query: the vectors are usable side by side.
    assert int(np.argmax(a @ st_embedder.embed_query(q))) == int(
        np.argmax(b @ onnx_embedder.embed_query(q)))


def test_token_counts_and_pooling_match_torch(onnx_embedder: OnnxEmbedder, st_embedder) -> None:  # noqa: ANN001
    long = "The cache key includes the tenant id and the request path. " * 80
    assert onnx_embedder.count_tokens(long) == st_embedder.count_tokens(long) > 256
    a = embed_passages(st_embedder, [long])[0]
    b = embed_passages(onnx_embedder, [long])[0]
    assert float(a @ b) >= 0.985
    assert onnx_embedder.embed_documents([]).shape == (0, 384)


def test_export_is_cached_and_reused(onnx_embedder: OnnxEmbedder, onnx_cache: Path) -> None:
    kind = BACKENDS[onnx_embedder.backend]
    files = list(onnx_cache.glob(f"*-{kind}.onnx"))
    assert [f.name for f in files] == [onnx_embedder.model_file.name]
    before = files[0].stat().st_mtime_ns
    again = build_embedder(REGISTRY[DEFAULT_MODEL], backend=onnx_embedder.backend)
    again.embed_query("no second export")
    assert files[0].stat().st_mtime_ns == before
    assert not [p for p in onnx_cache.iterdir() if p.is_dir()]  # no temp dirs left behind


def test_int8_is_quantised_from_the_cached_fp32_export(onnx_cache: Path, tmp_path: Path) -> None:
    """With a plain fp32 export cached, an int8 file is its weights quantised: no torch
    export (the model folder given here holds no model at all, which the export would
    refuse), and its vectors are the fp32 ones within int8's tolerance."""
    import onnxruntime as ort

    from brain.embedding.onnx_child import export_in_child
    from brain.embedding.onnx_export import export

    fp32 = build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx-fp32")
    assert isinstance(fp32, OnnxEmbedder)
    fp32.embed_query("exports the fp32 file into the cache")
    if not fp32.plain_file.is_file():
        export_in_child(fp32.source, fp32.plain_file, quantize=False, fused=False)
    empty = tmp_path / "no-model"
    empty.mkdir()
    with pytest.raises(ModelUnavailable, match="no config.json"):
        export(empty, tmp_path / "never.onnx", quantize=True)  # no fp32 to start from
    out = tmp_path / "int8.onnx"
    assert export(empty, out, quantize=True, fp32=fp32.plain_file) == []
    # The MatMul weights in int8 (the token embeddings stay float32): 59 of 90 MB.
    assert 0 < out.stat().st_size < fp32.plain_file.stat().st_size * 0.75
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    enc = fp32._tokenizer.encode(TEXTS[2])
    feeds = {"input_ids": [enc.ids], "attention_mask": [enc.attention_mask],
             "token_type_ids": [enc.type_ids]}
    hidden = session.run(None, {i.name: np.array(feeds[i.name], dtype=np.int64)
                                for i in session.get_inputs()})[0][0]
    vec = hidden.mean(axis=0)
    vec /= np.linalg.norm(vec)
    assert float(vec @ fp32.embed_documents([TEXTS[2]])[0]) >= 0.985


def test_the_fp32_file_runs_fused_attention_to_the_plain_graphs_vectors(
    onnx_embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    """The default file has each layer's attention as one operator (a dozen-token query runs
    ~50 operators instead of ~670) and embeds, one text or a padded batch, what the plain
    export embeds."""
    import onnx

    from brain.embedding.onnx_child import export_in_child
    from brain.embedding.onnx_compare import same_outputs
    from brain.embedding.onnx_export import fuse

    if onnx_embedder.backend != "onnx-fp32":
        pytest.skip("the fp32 graph (what the default's 8-bit weights come from)")
    ops = [n.op_type for n in onnx.load(str(onnx_embedder.model_file)).graph.node]
    assert ops.count("Attention") == 6 and len(ops) < 100
    plain = onnx_embedder.plain_file
    if not plain.is_file():
        export_in_child(onnx_embedder.source, plain, quantize=False, fused=False)
    assert "Attention" not in {n.op_type for n in onnx.load(str(plain)).graph.node}
    assert same_outputs(plain, onnx_embedder.model_file)
    one_by_one = np.stack([onnx_embedder.embed_documents([t])[0] for t in TEXTS[:6]])
    batch = onnx_embedder.embed_documents(TEXTS[:6])  # padded to the longest
    assert float((one_by_one * batch).sum(axis=1).min()) >= 0.99999
    # A model the BERT fusions do not cover keeps its plain graph: nothing is written.
    other = tmp_path / "not-bert"
    other.mkdir()
    (other / "config.json").write_text('{"model_type": "mpnet", "num_attention_heads": 12, '
                                       '"hidden_size": 768}')
    assert not fuse(plain, tmp_path / "out.onnx", other)
    assert not (tmp_path / "out.onnx").exists()
    # Nor does a graph the optimizer cannot read: the fusion is optional, the export goes on.
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx graph")
    assert not fuse(broken, tmp_path / "out.onnx", onnx_embedder.source)
    assert not (tmp_path / "out.onnx").exists()


def test_the_session_threads_do_not_spin_between_runs(onnx_embedder: OnnxEmbedder) -> None:
    """A server beside an agent leaves the CPUs to it between runs: the pool spins only
    inside a run, for at most SPIN_US between operators (brain/embedding/placement.py). Spinning as
    onnxruntime does by default burns ~40 ms of CPU after every run."""
    import onnxruntime as ort

    opts = onnx_embedder._load().get_session_options()
    for key, value in spin_options(ort.__version__):
        assert opts.get_session_config_entry(key) == value
    for text in TEXTS[:5]:
        onnx_embedder.embed_query(text)
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.01


def test_placement_pins_the_pool_only_when_it_covers_every_cpu() -> None:
    two = Placement.plan({0, 1}, 2)
    assert two is not None and two.caller == {0} and two.pool == (1,)
    assert two.option() == ("session.intra_op_thread_affinities", "2")  # onnxruntime counts from 1
    four = Placement.plan({4, 5, 6, 7}, 4)
    assert four is not None and four.caller == {4} and four.option()[1] == "6;7;8"
    assert Placement.plan(set(range(8)), 4) is None  # idle CPUs to spare: nothing pinned
    assert Placement.plan({3}, 1) is None


def test_placement_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN_ONNX_PIN", "0")
    assert placement(2) is None


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two CPUs")
def test_a_run_holds_the_caller_on_its_cpu_and_gives_its_cpus_back(
        onnx_embedder: OnnxEmbedder) -> None:
    before = os.sched_getaffinity(0)
    place = Placement(frozenset(sorted(before)[:1]), tuple(sorted(before)[1:]))
    with place.running():
        assert os.sched_getaffinity(0) == place.caller
    assert os.sched_getaffinity(0) == before
    # The embedder's own session: pinned as placement() says, and a query changes nothing.
    opts = onnx_embedder._load().get_session_options()
    planned = placement(intra_op_threads())
    entry = opts.get_session_config_entry("session.intra_op_thread_affinities") \
        if planned is not None else None
    assert entry == (planned.option()[1] if planned is not None else None)
    onnx_embedder.embed_query(TEXTS[0])
    assert os.sched_getaffinity(0) == before


def test_the_spin_is_bounded_or_off() -> None:
    """Where onnxruntime may not read the spin bound, its threads do not spin at all."""
    assert spin_options("1.18.1") == [("session.intra_op.allow_spinning", "0")]
    assert spin_options("garbage") == [("session.intra_op.allow_spinning", "0")]
    on = dict(spin_options("1.32.0"))
    assert on["session.intra_op.allow_spinning"] == "1"
    assert on["session.force_spinning_stop"] == "1"
    assert int(on["session.intra_op.spin_duration_us"]) <= 100


def test_a_model_without_a_local_folder_is_refused() -> None:
    record = REGISTRY["sentence-transformers/all-mpnet-base-v2"]
    with pytest.raises(ModelUnavailable, match="BRAIN__EMBEDDING__BACKEND=torch"):
        build_embedder(record, backend="onnx")


def test_a_brain_on_the_default_backend_stores_and_finds(
    settings, clock, _empty_shard, onnx_cache  # noqa: ANN001
) -> None:
    assert settings.embedding.backend == "onnx"  # the shipped default
    _seed_store(settings, _empty_shard)
    b = Brain(settings, clock=clock).open()
    try:
        assert isinstance(b.embedder.inner, OnnxEmbedder)  # under the model-switch wrapper
        for text in TEXTS[:6]:
            b.memory.add(text, project="p")
        hits = b.memory.search("what is the session cache TTL", 3, RecallFilter(project="p"))
        assert hits[0]["content"] == "Redis cache TTL for sessions is 30 minutes."
    finally:
        b.close()


def _anon_mb() -> float:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_a_batch_gives_back_the_memory_it_ran_in(onnx_cache: Path) -> None:
    """A batch of 32 texts of ~110 tokens grew onnxruntime's arena by ~100 MB that it kept for
    the life of the process (7 MB with the shrinkage; bench/rss_owner.py); the vectors are
    the same either way."""
    import brain.embedding.onnx as oe

    emb = build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx")
    emb.embed_query("warm up")
    texts = [f"{t} " * 6 for t in [*TEXTS, *TEXTS[:14]]]  # one run of 32 x 110 tokens
    before = _anon_mb()
    shrunk = emb.embed_documents(texts)
    assert emb._trim is not None
    emb._trim.join()  # the heap is trimmed once batches stop (TRIM_AFTER_IDLE_S)
    grown = _anon_mb() - before
    assert grown < 30, f"the batch kept {grown:.0f} MB"
    saved = oe.SHRINK_FROM_TOKENS
    oe.SHRINK_FROM_TOKENS = 10**9  # what a run does without the shrinkage
    try:
        kept = emb.embed_documents(texts)
    finally:
        oe.SHRINK_FROM_TOKENS = saved
    assert np.allclose(shrunk, kept, atol=1e-6)


_SERVER_PROCESS = """
import json, sys
import mcp_server  # what `python mcp_server.py` imports
from brain.app import Brain
from brain.memory import RecallFilter
from config import load_settings
b = Brain(load_settings()).open()
try:
    b.memory.add("Redis cache TTL for sessions is 30 minutes.", project="p")
    hits = b.memory.search("session cache TTL", 3, RecallFilter(project="p"))
finally:
    b.close()
heavy = ("torch", "sentence_transformers", "transformers", "onnxruntime")
print(json.dumps({"hits": len(hits), "backend": b.embedder.backend,
                  "loaded": [m for m in heavy if m in sys.modules]}))
"""


def test_the_default_server_process_never_imports_torch(tmp_path: Path, onnx_cache: Path) -> None:
    """torch + transformers would stay loaded for the server's life: a server on the default
    backend runs on onnxruntime alone (the export, done here if no other test did it, runs
    in a child). Seen only in a fresh process (this one imported torch for other tests): a
    few seconds of start-up."""
    import json
    import subprocess
    import sys

    build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx").embed_query("exported once")
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    env.update(BRAIN__HOME=str(tmp_path / "home"), BRAIN_ONNX_CACHE=str(onnx_cache),
               PYTHONPATH=str(root), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-c", _SERVER_PROCESS], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["backend"] == "onnx" and out["hits"] >= 1
    assert out["loaded"] == ["onnxruntime"]


def test_a_failed_export_is_a_typed_error(tmp_path: Path) -> None:
    """The export's child process fails (no model in the folder): ModelUnavailable saying
    why, and no file is left where the model would be."""
    from brain.embedding.onnx_child import export_in_child

    out = tmp_path / "cache" / "model.onnx"
    with pytest.raises(ModelUnavailable, match="no config.json") as err:
        export_in_child(tmp_path / "not-a-model", out, quantize=False)
    assert "BRAIN__EMBEDDING__BACKEND=torch" in str(err.value)
    assert not out.exists()


def test_the_graph_bench_times_both_graphs_to_the_same_vectors(
    onnx_embedder: OnnxEmbedder,
) -> None:
    """``python -m bench.embed_graphs`` (BENCHMARKS.md, "The fused graph") on a few texts."""
    from bench.embed_graphs import compare

    if onnx_embedder.backend != "onnx":
        pytest.skip("compares the default's graphs")
    out = compare(queries=4, notes=8)
    assert out["queries"] == 4 and out["files"]["fused"] == str(onnx_embedder.fused_file)
    assert out["files"]["w8"] == str(onnx_embedder.model_file)
    assert out["min_cosine"]["queries"] >= 0.99999 and out["min_cosine"]["notes"] >= 0.99999
    assert min(out["w8_min_cosine"].values()) >= W8_MIN_COSINE
    assert out["plain"]["query_p50_ms"] > 0 and out["w8"]["notes_per_s"] > 0


def test_the_default_file_is_the_fused_graph_with_8_bit_weights(
    onnx_embedder: OnnxEmbedder,
) -> None:
    """``onnx`` runs the fused fp32 graph with every MatMul's weights in 8 bits per block of
    W8_BLOCK (MatMulNBits; the fused attention keeps its own), a third smaller, embedding
    within W8_MIN_COSINE of the fp32 graph, one text or a padded batch."""
    import onnx

    if onnx_embedder.backend != "onnx":
        pytest.skip("the default backend's file")
    graph = onnx.load(str(onnx_embedder.model_file)).graph
    ops = [n.op_type for n in graph.node]
    assert "MatMul" not in ops and ops.count("Attention") == 6
    packed = [n for n in graph.node if n.op_type == "MatMulNBits"]
    assert len(packed) == 18  # per layer: attention output, FFN in, FFN out
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in packed[0].attribute}
    assert attrs["bits"] == 8 and attrs["block_size"] == W8_BLOCK
    size = onnx_embedder.model_file.stat().st_size
    assert size < onnx_embedder.fused_file.stat().st_size * 0.8
    fp32 = OnnxEmbedder(onnx_embedder.record, onnx_embedder.source, backend="onnx-fp32")
    a, b = fp32.embed_documents(TEXTS[:6]), onnx_embedder.embed_documents(TEXTS[:6])
    assert float((a * b).sum(axis=1).min()) >= W8_MIN_COSINE
    one = np.stack([onnx_embedder.embed_documents([t])[0] for t in TEXTS[:6]])
    assert float((one * b).sum(axis=1).min()) >= 0.9999


def test_8_bit_weights_that_move_the_vectors_are_not_kept(
    onnx_embedder: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """weights8 compares the quantised graph's vectors with the fp32 graph's before it keeps
    the file; below the bar nothing is written (and a graph it cannot read, in the child, is
    a False too), and the embedder runs the fp32 graph instead."""
    import brain.embedding.onnx as oe
    import brain.embedding.onnx_quant as quant
    from brain.embedding.onnx_child import weights8_in_child

    if onnx_embedder.backend != "onnx":
        pytest.skip("the default backend's file")
    out = tmp_path / "w8.onnx"
    monkeypatch.setattr(quant, "W8_MIN_COSINE", 1.01)  # a bar no quantised graph clears
    assert not quant.weights8(onnx_embedder.fused_file, out, onnx_embedder.source)
    assert not out.exists() and list(tmp_path.iterdir()) == [quant.refusal_of(out)]
    assert "cosine" in quant.refusal_of(out).read_text(encoding="utf-8")
    monkeypatch.undo()
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx graph")
    assert not weights8_in_child(broken, out, onnx_embedder.source)
    assert not out.exists()
    # The embedder, its 8-bit file refused: the fused fp32 graph, torch's vectors.
    cache, fused = tmp_path / "cache", onnx_embedder.fused_file
    cache.mkdir()
    monkeypatch.setenv("BRAIN_ONNX_CACHE", str(cache))
    emb = OnnxEmbedder(onnx_embedder.record, onnx_embedder.source, backend="onnx")
    shutil.copyfile(fused, emb.fused_file)
    monkeypatch.setattr(oe, "weights8_in_child", lambda *a: False)
    assert emb._model_path() == emb.fused_file
    fp32 = OnnxEmbedder(onnx_embedder.record, onnx_embedder.source, backend="onnx-fp32")
    assert float(emb.embed_query(TEXTS[0]) @ fp32.embed_query(TEXTS[0])) >= 0.99999
    assert not emb.model_file.exists()
    # A refusal on record: the next start runs the fp32 graph without quantising again.
    quant.refusal_of(emb.model_file).write_text("moved\n", encoding="utf-8")
    monkeypatch.setattr(oe, "weights8_in_child", lambda *a: pytest.fail("quantised again"))
    again = OnnxEmbedder(onnx_embedder.record, onnx_embedder.source, backend="onnx")
    assert again._model_path() == again.fused_file
