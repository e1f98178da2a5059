"""A BERT encoder's ONNX graph written from its safetensors weights with ``onnx.helper``: the
onnx backends' export without torch or transformers, so the default install needs neither.

The graph is the one ``torch.onnx.export`` writes of transformers' eager ``BertModel``
(inputs ``input_ids``, ``attention_mask``, ``token_type_ids``, each ``[batch, seq]`` int64;
output ``last_hidden_state`` ``[batch, seq, hidden]``; opset 17), operator for operator where
it matters: onnxruntime's transformer optimizer (:func:`brain.embedding.onnx.fuse`) matches
its attention, LayerNorm and GELU patterns, so the fused, int8 and 8-bit files are made from it
as they were from the torch export. Each Linear is a MatMul by its transposed weight then an
Add of its bias; attention is ``softmax(Q K^T / sqrt(d) + (1 - mask) * min) V``; GELU is the
erf form.

Only ``model_type: bert`` with absolute positions, ``gelu`` and weights in
``model.safetensors`` is built; any other model is refused with :class:`ModelUnavailable`,
and :func:`brain.embedding.onnx.export` then exports it with torch where torch is installed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from brain.errors import ModelUnavailable

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
OPSET = 17
WEIGHTS = "model.safetensors"
# A protobuf file holds at most 2 GB; a larger model would need external data.
MAX_WEIGHT_BYTES = 1_800_000_000
_REQUIRED = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
             "vocab_size", "max_position_embeddings")
TORCH_HINT = ("export it with torch (pip install 'opencode-brain[torch]') or set "
              "BRAIN__EMBEDDING__BACKEND=torch")


def config_of(source: Path) -> dict[str, Any]:
    """``source``'s BERT config, checked; :class:`ModelUnavailable` for a model the builder
    does not cover (the torch export may)."""
    path = source / "config.json"
    if not path.is_file():
        raise ModelUnavailable(f"{source} holds no transformers model (no config.json)")
    cfg = json.loads(path.read_text(encoding="utf-8"))
    why = _unsupported(cfg) or (None if (source / WEIGHTS).is_file() else f"no {WEIGHTS}")
    if why:
        raise ModelUnavailable(f"the torch-free ONNX builder covers BERT encoders only; "
                               f"{source} has {why}: {TORCH_HINT}")
    return cfg


def _unsupported(cfg: dict[str, Any]) -> str | None:
    if cfg.get("model_type") != "bert":
        return f"model_type {cfg.get('model_type')!r}"
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        return f"position_embedding_type {cfg['position_embedding_type']!r}"
    if cfg.get("hidden_act", "gelu") != "gelu":
        return f"hidden_act {cfg['hidden_act']!r}"
    if cfg.get("is_decoder") or cfg.get("add_cross_attention"):
        return "a decoder configuration"
    missing = [k for k in _REQUIRED if not cfg.get(k)]
    if missing:
        return f"no {', '.join(missing)} in config.json"
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        return "a hidden size its heads do not divide"
    return None


def load_weights(source: Path) -> dict[str, np.ndarray]:
    """The encoder's tensors by transformers' names, without a ``bert.`` prefix, in float32."""
    from safetensors.numpy import load_file

    path = source / WEIGHTS
    if path.stat().st_size > MAX_WEIGHT_BYTES:
        raise ModelUnavailable(f"{path} is too large for one ONNX file: {TORCH_HINT}")
    found = load_file(str(path))
    prefix = "bert." if any(k.startswith("bert.embeddings.") for k in found) else ""
    return {k[len(prefix):]: (v if v.dtype == np.int64 else v.astype(np.float32))
            for k, v in found.items() if k.startswith(prefix)}


class _Graph:
    """Nodes and initializers under construction; each helper returns its output's name."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        from onnx import helper

        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out],
                                           name=f"{op_type}_{self._n}", **attrs))
        return out

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.array(value, order="C"), name))  # 0-d stays 0-d
        return name

    def tensor(self, key: str, transpose: bool = False) -> str:
        try:
            value = self.weights[key]
        except KeyError:
            raise ModelUnavailable(f"the weights have no {key}: {TORCH_HINT}") from None
        return self.const(key, value.T if transpose else value)

    def linear(self, x: str, prefix: str) -> str:
        mm = self.op("MatMul", x, self.tensor(f"{prefix}.weight", transpose=True))
        return self.op("Add", self.tensor(f"{prefix}.bias"), mm)

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op("LayerNormalization", x, self.tensor(f"{prefix}.weight"),
                       self.tensor(f"{prefix}.bias"), axis=-1, epsilon=eps)

    def gelu(self, x: str) -> str:
        """x * 0.5 * (1 + erf(x / sqrt 2)), the form onnxruntime fuses into one Gelu."""
        erf = self.op("Erf", self.op("Div", x, "sqrt2"))
        return self.op("Mul", self.op("Mul", x, self.op("Add", erf, "one")), "half")


def _embeddings(g: _Graph, cfg: dict[str, Any], eps: float) -> str:
    positions = g.weights.get("embeddings.position_ids")
    if positions is None:
        positions = np.arange(cfg["max_position_embeddings"], dtype=np.int64)[None]
    # Shape -> Gather(1) -> Unsqueeze -> Slice, the path onnxruntime's EmbedLayerNormalization
    # fusion recognises as BERT's positions.
    seq = g.op("Gather", g.op("Shape", "input_ids"), g.const("at", np.array(1, np.int64)), axis=0)
    ends = g.op("Unsqueeze", seq, g.const("axes_0", np.array([0], np.int64)))
    pos_ids = g.op("Slice", g.const("position_ids", positions.astype(np.int64)),
                   g.const("slice_start", np.array([0], np.int64)), ends,
                   g.const("axes_1", np.array([1], np.int64)))
    words = g.op("Gather", g.tensor("embeddings.word_embeddings.weight"), "input_ids")
    types = g.op("Gather", g.tensor("embeddings.token_type_embeddings.weight"), "token_type_ids")
    summed = g.op("Add", g.op("Add", words, types),
                  g.op("Gather", g.tensor("embeddings.position_embeddings.weight"), pos_ids))
    return g.layer_norm(summed, "embeddings.LayerNorm", eps)


def _mask_bias(g: _Graph) -> str:
    """(1 - mask) * float32 min, [batch, 1, 1, seq]: the eager export's additive mask."""
    wide = g.op("Unsqueeze", g.op("Unsqueeze", "attention_mask", "axes_1"),
                g.const("axes_2", np.array([2], np.int64)))
    inverted = g.op("Sub", g.const("mask_one", np.array(1.0, np.float32)),
                    g.op("Cast", wide, to=1))
    return g.op("Mul", inverted, g.const("mask_min", np.array(np.finfo(np.float32).min,
                                                             np.float32)))


def _heads(g: _Graph, x: str, perm: list[int]) -> str:
    return g.op("Transpose", g.op("Reshape", x, "heads_shape"), perm=perm)


def _layer(g: _Graph, x: str, i: int, mask: str, eps: float) -> str:
    p = f"encoder.layer.{i}"
    q = _heads(g, g.linear(x, f"{p}.attention.self.query"), [0, 2, 1, 3])
    k = _heads(g, g.linear(x, f"{p}.attention.self.key"), [0, 2, 3, 1])
    v = _heads(g, g.linear(x, f"{p}.attention.self.value"), [0, 2, 1, 3])
    scores = g.op("Div", g.op("MatMul", q, k), "head_scale")
    probs = g.op("Softmax", g.op("Add", scores, mask), axis=-1)
    context = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3]),
                   "hidden_shape")
    attended = g.op("Add", g.linear(context, f"{p}.attention.output.dense"), x)
    x = g.layer_norm(attended, f"{p}.attention.output.LayerNorm", eps)
    inner = g.gelu(g.linear(x, f"{p}.intermediate.dense"))
    return g.layer_norm(g.op("Add", g.linear(inner, f"{p}.output.dense"), x),
                        f"{p}.output.LayerNorm", eps)


def encoder_model(cfg: dict[str, Any], weights: dict[str, np.ndarray]) -> Any:
    """The ONNX ModelProto of the BERT encoder ``cfg`` with ``weights``."""
    from onnx import TensorProto, helper

    heads, hidden = int(cfg["num_attention_heads"]), int(cfg["hidden_size"])
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    g = _Graph(weights)
    g.const("heads_shape", np.array([0, 0, heads, hidden // heads], np.int64))
    g.const("hidden_shape", np.array([0, 0, hidden], np.int64))
    g.const("head_scale", np.array(math.sqrt(hidden // heads), np.float32))
    for name, value in (("sqrt2", math.sqrt(2)), ("one", 1.0), ("half", 0.5)):
        g.const(name, np.array(value, np.float32))
    x = _embeddings(g, cfg, eps)
    mask = _mask_bias(g)
    for i in range(int(cfg["num_hidden_layers"])):
        x = _layer(g, x, i, mask, eps)
    g.nodes[-1].output[0] = OUTPUT  # the last LayerNorm's
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in INPUTS]
    output = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", "seq", hidden])
    graph = helper.make_graph(g.nodes, "bert_encoder", inputs, [output], initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="opencode-brain")
    model.ir_version = 8  # opset 17's IR, which every onnxruntime >= 1.14 reads
    return model


def build(source: Path, out: Path) -> list[str]:
    """Write ``source``'s encoder (a sentence-transformers or transformers BERT folder) to
    ``out`` as ONNX; returns its input names. :class:`ModelUnavailable` for a model it does
    not cover (see the module docstring)."""
    import onnx

    cfg = config_of(source)
    model = encoder_model(cfg, load_weights(source))
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return list(INPUTS)
