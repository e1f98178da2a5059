"""The torch-free export (brain/embedding/bert_graph.py): the bundled all-MiniLM-L6-v2's
graph written from its safetensors weights gives torch's vectors, goes through the fusion and
the 8-bit and int8 steps as the torch export did, and a default embedder is built and run in a
process where torch cannot even be imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from brain.embedding import bert_graph
from brain.embedding.onnx_compare import vectors_cosine
from brain.embedding.onnx_export import export, fuse, torch_export
from brain.embedding.onnx_quant import W8_MIN_COSINE, weights8
from brain.embedding.onnx_quant import quantize_int8 as _quantize
from brain.embedding.registry import DEFAULT_MODEL, bundled_model_path
from brain.errors import ModelUnavailable

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parents[2]
SOURCE = bundled_model_path(DEFAULT_MODEL)
pytestmark = pytest.mark.skipif(SOURCE is None, reason="the bundled model package is not installed")

LONG = ("The indexer walks the source tree, skips what .gitignore names, cuts each file into "
        "chunks at function boundaries and embeds them in batches of sixty-four. ") * 12
TEXTS = [
    "Pin torch before installing the package",
    "def is_empty(lst):\n    return len(lst) == 0",
    "The deploy pipeline runs integration tests against a staging database.",
    "Caroline said she went to a support group yesterday",
    "python check if a file exists",
    "Redis cache TTL for sessions is 30 minutes.",
    "ünïcödé — emoji 🚀 and CJK 日本語 in one note",
    "a",
    "SELECT id, name FROM users WHERE created_at > now() - interval '7 days';",
    LONG,  # truncated at 256 tokens, as the embedder does
    LONG[: len(LONG) // 3],
    "Why did the nightly job fail? The disk filled up with core dumps from the worker.",
]


def _embed(graph: Path, texts: list[str]) -> np.ndarray:
    """Mean-pooled, normalised vectors of ``texts`` run through ``graph`` as one padded batch
    (the onnx embedder's tokenizer settings: truncation at 256, [PAD] padding)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    assert SOURCE is not None
    tok = Tokenizer.from_file(str(SOURCE / "tokenizer.json"))
    tok.enable_truncation(max_length=256)
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"))
    encs = tok.encode_batch(texts)
    feed = {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}
    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    hidden = session.run(None, {i.name: feed[i.name] for i in session.get_inputs()})[0]
    mask = feed["attention_mask"][..., None].astype(np.float32)
    vecs = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def _ops(graph: Path) -> Counter[str]:
    import onnx

    return Counter(n.op_type for n in onnx.load(str(graph)).graph.node)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The plain graph built without torch, and torch's eager export of the same model."""
    assert SOURCE is not None
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    tmp = tmp_path_factory.mktemp("graphs")
    built, exported = tmp / "built.onnx", tmp / "torch.onnx"
    assert bert_graph.build(SOURCE, built) == ["input_ids", "attention_mask", "token_type_ids"]
    torch_export(SOURCE, exported, ModelUnavailable("compared"))
    return {"built": built, "torch": exported}


def test_the_built_graph_gives_the_torch_exports_vectors(graphs: dict[str, Path]) -> None:
    """Per text, alone and in a padded batch with texts of every length (the long ones cut
    at the model's window)."""
    torch_vecs = _embed(graphs["torch"], TEXTS)
    built_vecs = _embed(graphs["built"], TEXTS)
    assert built_vecs.shape == (len(TEXTS), 384)
    assert float((torch_vecs * built_vecs).sum(axis=1).min()) >= 0.99999
    alone = np.stack([_embed(graphs["built"], [t])[0] for t in TEXTS])
    assert float((alone * torch_vecs).sum(axis=1).min()) >= 0.99999


def test_the_built_graph_embeds_what_sentence_transformers_embeds(
    graphs: dict[str, Path], st_embedder  # noqa: ANN001
) -> None:
    reference = st_embedder.embed_documents(TEXTS)
    assert float((reference * _embed(graphs["built"], TEXTS)).sum(axis=1).min()) >= 0.99999


def test_the_fusion_and_the_8_bit_and_int8_steps_run_on_the_built_graph(
    graphs: dict[str, Path], tmp_path: Path
) -> None:
    """The optimizer fuses the built graph as it fuses torch's export (each layer's
    attention one operator, the embeddings one, ~50 operators a query), and the quantisers
    take it: the default file's MatMuls are 8-bit MatMulNBits, int8's are dynamic."""
    assert SOURCE is not None
    fused = tmp_path / "fused.onnx"
    assert fuse(graphs["built"], fused, SOURCE)
    ops = _ops(fused)
    assert ops["Attention"] == 6 and ops["EmbedLayerNormalization"] == 1
    assert sum(ops.values()) < 100
    torch_fused = tmp_path / "torch-fused.onnx"
    assert fuse(graphs["torch"], torch_fused, SOURCE)
    assert ops == _ops(torch_fused)  # the same fused graph, operator for operator
    assert float((_embed(fused, TEXTS) * _embed(graphs["torch"], TEXTS)).sum(axis=1).min()) \
        >= 0.99999

    w8 = tmp_path / "w8.onnx"
    assert weights8(fused, w8, SOURCE)
    ops8 = _ops(w8)
    assert "MatMul" not in ops8 and ops8["MatMulNBits"] == 18 and ops8["Attention"] == 6
    assert vectors_cosine(fused, w8, vocab=30522) >= W8_MIN_COSINE

    int8 = tmp_path / "int8.onnx"
    _quantize(graphs["built"], int8)
    assert _ops(int8)["DynamicQuantizeMatMul"] + _ops(int8)["MatMulInteger"] >= 36
    assert float((_embed(int8, TEXTS) * _embed(graphs["torch"], TEXTS)).sum(axis=1).min()) \
        >= 0.985


def _model_folder(tmp_path: Path, **config: object) -> Path:
    assert SOURCE is not None
    folder = tmp_path / "model"
    folder.mkdir()
    cfg = json.loads((SOURCE / "config.json").read_text(encoding="utf-8"))
    cfg.update(config)
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    os.symlink(SOURCE / "model.safetensors", folder / "model.safetensors")
    return folder


@pytest.mark.parametrize(("change", "named"), [
    ({"model_type": "mpnet"}, "model_type 'mpnet'"),
    ({"hidden_act": "relu"}, "hidden_act 'relu'"),
    ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ({"num_attention_heads": 7}, "heads do not divide"),
])
def test_a_model_the_builder_does_not_cover_is_refused_naming_the_torch_extra(
    tmp_path: Path, change: dict[str, object], named: str
) -> None:
    with pytest.raises(ModelUnavailable, match=named) as err:
        bert_graph.build(_model_folder(tmp_path, **change), tmp_path / "out.onnx")
    assert "pip install 'opencode-brain[torch]'" in str(err.value)
    assert not (tmp_path / "out.onnx").exists()


def test_weights_without_a_tensor_the_graph_needs_are_refused(tmp_path: Path) -> None:
    """A BERT config over weights that lack a layer (here: one layer more than they hold)."""
    folder = _model_folder(tmp_path, num_hidden_layers=7)
    with pytest.raises(ModelUnavailable, match=r"no encoder\.layer\.6\."):
        bert_graph.build(folder, tmp_path / "out.onnx")


_DEFAULT_EMBEDDER = """
import json, sys
from brain.embedding.onnx_export import export
from brain.embedding.onnx_quant import weights8
from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder
texts = json.loads(sys.argv[1])
emb = build_embedder(REGISTRY[DEFAULT_MODEL], backend="onnx")
if sys.argv[2] == "here":  # the export's steps in this process, where sys.modules shows them
    export(emb.source, emb.fused_file, quantize=False)
    weights8(emb.fused_file, emb.model_file, emb.source)
vecs = emb.embed_documents(texts)
heavy = ("torch", "transformers", "sentence_transformers")
print(json.dumps({"loaded": sorted(m for m in sys.modules if m.split(".")[0] in heavy),
                  "fused": str(emb.fused_file), "file": str(emb.model_file),
                  "vectors": vecs.tolist()}))
"""


def _env(tmp_path: Path, blocked: bool = False) -> dict[str, str]:
    """A fresh home and ONNX cache; with ``blocked``, torch, transformers and
    sentence_transformers unimportable (a package of each name first on the path that
    raises ImportError; the export's child process inherits the path)."""
    path = [str(ROOT)]
    if blocked:
        blocker = tmp_path / "blocked"
        for name in ("torch", "transformers", "sentence_transformers"):
            (blocker / name).mkdir(parents=True)
            (blocker / name / "__init__.py").write_text(
                f"raise ImportError('{name} is blocked: the default install has none')\n")
        path.insert(0, str(blocker))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    env.update(BRAIN__HOME=str(tmp_path / "home"), BRAIN_ONNX_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(path), HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def _default_embedder(tmp_path: Path, where: str, blocked: bool) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run(
        [sys.executable, "-c", _DEFAULT_EMBEDDER, json.dumps(TEXTS[:6]), where],
        cwd=ROOT, env=_env(tmp_path, blocked), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_building_and_running_the_default_embedder_imports_no_torch(
    tmp_path: Path, st_embedder  # noqa: ANN001
) -> None:
    """torch is installed here: a process that writes the graph, fuses it, gives it 8-bit
    weights and embeds with it would show any import of torch or transformers in
    sys.modules. It shows none, and its vectors are torch's within the 8-bit bar."""
    out = _default_embedder(tmp_path, "here", blocked=False)
    assert out["loaded"] == []
    assert _ops(Path(out["file"]))["MatMulNBits"] == 18
    cosines = (np.array(out["vectors"]) * st_embedder.embed_documents(TEXTS[:6])).sum(axis=1)
    assert float(cosines.min()) >= 0.999


def test_the_default_embedder_needs_no_torch_in_its_export_child(
    tmp_path: Path, st_embedder  # noqa: ANN001
) -> None:
    """From an empty cache with torch, transformers and sentence-transformers unimportable
    (as in the default install), the embedder's child processes write the fused graph and
    its 8-bit weights, and the vectors are torch's within the 8-bit bar."""
    out = _default_embedder(tmp_path, "child", blocked=True)
    assert _ops(Path(out["fused"]))["Attention"] == 6
    assert _ops(Path(out["file"]))["MatMulNBits"] == 18
    cosines = (np.array(out["vectors"]) * st_embedder.embed_documents(TEXTS[:6])).sum(axis=1)
    assert float(cosines.min()) >= 0.999


_TORCH_BACKEND = """
import sys
from brain.embedding.registry import DEFAULT_MODEL, REGISTRY, build_embedder
from brain.errors import ModelUnavailable
try:
    build_embedder(REGISTRY[DEFAULT_MODEL], backend="torch").embed_query("x")
except ModelUnavailable as exc:
    print(exc.code, exc)
    sys.exit(0)
sys.exit("no error")
"""


def test_the_torch_backend_without_torch_names_the_extra(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _TORCH_BACKEND], cwd=ROOT,
                          env=_env(tmp_path, blocked=True), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("MODEL_UNAVAILABLE ")
    assert "pip install 'opencode-brain[torch]'" in proc.stdout


def test_a_model_only_torch_exports_says_so_without_torch(tmp_path: Path) -> None:
    """export() of a model the builder refuses, torch missing: the builder's refusal, which
    names the extra, not an ImportError."""
    folder = _model_folder(tmp_path, model_type="mpnet")
    code = ("import sys; from pathlib import Path; from brain.embedding.onnx_export import export\n"
            "from brain.errors import ModelUnavailable\n"
            "try:\n    export(Path(sys.argv[1]), Path(sys.argv[2]), quantize=False)\n"
            "except ModelUnavailable as exc:\n    print(exc); sys.exit(0)\n"
            "sys.exit('exported')\n")
    proc = subprocess.run([sys.executable, "-c", code, str(folder), str(tmp_path / "o.onnx")],
                          cwd=ROOT, env=_env(tmp_path, blocked=True), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "model_type 'mpnet'" in proc.stdout
    assert "pip install 'opencode-brain[torch]'" in proc.stdout
    assert not (tmp_path / "o.onnx").exists()


def test_export_writes_the_built_graph_fused(tmp_path: Path) -> None:
    """export() itself (what the embedder's child runs) on the bundled model, no torch on
    its path: the fused graph."""
    assert SOURCE is not None
    out = tmp_path / "fused.onnx"
    assert export(SOURCE, out, quantize=False) == list(bert_graph.INPUTS)
    assert _ops(out)["Attention"] == 6


def test_the_builder_follows_the_config_of_another_bert(tmp_path: Path) -> None:
    """A BERT of another shape (hidden 48, 4 heads, 3 layers, intermediate 80, its own
    vocabulary, positions and epsilon), random weights saved under a ``bert.`` prefix as a
    task model's checkpoint has them: the built graph gives transformers' hidden states."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from safetensors.numpy import save_file

    cfg = {"model_type": "bert", "hidden_size": 48, "num_attention_heads": 4,
           "num_hidden_layers": 3, "intermediate_size": 80, "vocab_size": 300,
           "max_position_embeddings": 64, "type_vocab_size": 2, "layer_norm_eps": 1e-7,
           "hidden_act": "gelu"}
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(**cfg), add_pooling_layer=False)
    model.eval()
    folder = tmp_path / "tiny-bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    save_file({f"bert.{k}": v.detach().numpy().copy() for k, v in model.state_dict().items()},
              str(folder / "model.safetensors"))
    bert_graph.build(folder, tmp_path / "tiny.onnx")

    import onnxruntime as ort

    rng = np.random.default_rng(1)
    ids = rng.integers(5, 300, size=(3, 21), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 12:] = 0
    mask[2, 3:] = 0
    types = np.zeros_like(ids)
    types[:, 10:] = 1
    session = ort.InferenceSession(str(tmp_path / "tiny.onnx"), providers=["CPUExecutionProvider"])
    built = session.run(None, {"input_ids": ids, "attention_mask": mask,
                               "token_type_ids": types})[0]
    with torch.no_grad():
        expected = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                         token_type_ids=torch.from_numpy(types)).last_hidden_state.numpy()
    keep = mask.astype(bool)
    assert built.shape == (3, 21, 48)
    assert float(np.abs(built[keep] - expected[keep]).max()) < 1e-4
