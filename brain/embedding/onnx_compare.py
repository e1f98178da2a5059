"""Whether two encoder graphs compute the same thing: the check a fused graph
(:func:`brain.embedding.onnx_export.fuse`) and an 8-bit one
(:func:`brain.embedding.onnx_quant.weights8`) pass before either is kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np


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
