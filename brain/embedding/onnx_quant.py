"""Smaller weights for an exported graph: int8 per channel (``onnx-int8``,
:func:`quantize_int8`) and 8 bits per block (the ``onnx`` default, :func:`weights8`), each
written atomically, the latter kept only when its vectors stay within ``W8_MIN_COSINE``."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

from brain.embedding.onnx_compare import vectors_cosine

log = logging.getLogger(__name__)

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


def quantize_int8(fp32: Path, out: Path) -> None:
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


def refusal_of(out: Path) -> Path:
    """Where :func:`weights8` records that ``out``'s vectors moved too far (delete it to try
    again)."""
    return out.with_name(out.name + ".refused")
