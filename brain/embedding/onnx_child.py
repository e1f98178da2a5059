"""The export and the 8-bit quantisation, each in a child process
(``python -m brain.embedding.onnx_child``): torch and transformers, which the export needs,
and the whole graph the quantiser holds would otherwise stay in the server's memory for the
rest of its life (bench/rss_owner.py). The server runs on onnxruntime alone."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from pathlib import Path

from brain.embedding.onnx_export import export
from brain.embedding.onnx_quant import weights8
from brain.errors import ModelUnavailable

log = logging.getLogger(__name__)


def _child(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m brain.embedding.onnx_child ARGS`` in a child process, output captured."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
    return subprocess.run([sys.executable, "-m", "brain.embedding.onnx_child", *args], env=env,
                          cwd=root, capture_output=True, text=True, timeout=3600, check=False)


def export_in_child(source: Path, out: Path, quantize: bool, fp32: Path | None = None,
                    fused: bool = True) -> None:
    """:func:`export` in a child process (``python -m brain.embedding.onnx_child``). torch and
    transformers, which the export needs, would otherwise stay loaded in the server for the
    rest of its life (bench/rss_owner.py); the default path runs on onnxruntime alone. An
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


def main(argv: list[str] | None = None) -> int:
    """The child's command line (what :func:`_child` runs)."""
    parser = argparse.ArgumentParser(prog="python -m brain.embedding.onnx_child")
    parser.add_argument("source", type=Path, help="a sentence-transformers model folder")
    parser.add_argument("out", type=Path, help="the ONNX file to write")
    parser.add_argument("--int8", action="store_true", help="quantise the MatMul weights")
    parser.add_argument("--from-fp32", type=Path, default=None,
                        help="with --int8: quantise this (plain) fp32 export instead of exporting")
    parser.add_argument("--plain", action="store_true", help="fp32 without fused attention")
    parser.add_argument("--w8-from", type=Path, default=None,
                        help="write this fp32 graph with 8-bit MatMul weights (weights8)")
    args = parser.parse_args(argv)
    if args.w8_from is not None:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        return 0 if weights8(args.w8_from, args.out, args.source) else 3
    export(args.source, args.out, args.int8, args.from_fp32, fused=not args.plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
