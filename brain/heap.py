"""Giving the C heap's free pages back to the system.

glibc keeps memory a process has freed for its own reuse, so a resident size grows with the
largest burst of work and stays there: after a bulk import of 100,000 notes it kept 2.0 GB
(RSS 2.9 GB, 0.9 GB after a trim), and an embedding batch leaves its activations
(BENCHMARKS.md). The index maintenance run and the ONNX embedder call :func:`release` after
such bursts.
"""

from __future__ import annotations

import ctypes


def release() -> None:
    """glibc's ``malloc_trim(0)``; a no-op where there is no glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
