"""The ONNX export of a sentence-transformers model (``torch.onnx.export``, run in a child
process: brain/embedding/onnx_child.py) and the fusion of each layer's attention into one
operator (:func:`fuse`)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from brain.embedding import bert_graph
from brain.embedding.onnx_compare import same_outputs
from brain.embedding.onnx_quant import quantize_int8
from brain.errors import ModelUnavailable

log = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Model types whose export :func:`fuse` runs the BERT fusions on (MiniLM, BGE, E5 and the
# other BERT encoders); any other model runs its plain export.
FUSABLE = frozenset({"bert"})


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


def export(source: Path, out: Path, quantize: bool, fp32: Path | None = None,
           fused: bool = True) -> list[str]:
    """Export ``source`` (a sentence-transformers folder) to an ONNX file at ``out``, with
    int8 weights when ``quantize``, else with its attention fused where :func:`fuse` can
    (``fused``). Returns the ONNX input names (empty when quantising an already exported
    plain ``fp32`` file: then the model folder is not read, seconds less, and the result is
    what the export would have quantised). A BERT encoder is built without torch; any other
    model needs torch (:func:`torch_export`)."""
    if quantize and fp32 is not None and fp32.is_file():
        quantize_int8(fp32, out)
        return []
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        model_file = Path(tmp) / "model.onnx"
        try:  # a BERT encoder is written from its weights: no torch (bert_graph.py)
            names = bert_graph.build(source, model_file)
        except ModelUnavailable as refused:
            names = torch_export(source, model_file, refused)
        if quantize:
            quantize_int8(model_file, out)
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
