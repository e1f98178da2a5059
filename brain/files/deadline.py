"""The per-file processing deadline of uploads (issue 13).

One worker indexes uploads one after another, so a file that takes too long would hold up
every later upload. Each file gets ``files.process_timeout_s``; the parse, the one step that
cannot check the clock itself, runs in a helper thread the worker stops waiting for at the
deadline. The parsers' size caps bound what such an abandoned parse can still cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class DeadlinePassed(Exception):
    """The file's processing deadline passed; the message is the reason to record."""


def late_reason(timeout_s: float) -> str:
    return (
        f"processing took longer than its deadline of {timeout_s:g} s "
        "(BRAIN__FILES__PROCESS_TIMEOUT_S); split the document or raise the deadline, "
        "then reprocess_file"
    )


def check(deadline: float, timeout_s: float) -> None:
    if time.monotonic() > deadline:
        raise DeadlinePassed(late_reason(timeout_s))


def run_within(
    fn: Callable[[], T],
    deadline: float,
    timeout_s: float,
    stop: threading.Event | None = None,
    stopped: type[Exception] = InterruptedError,
) -> T:
    """``fn()``'s result, or DeadlinePassed when it is still running at ``deadline``
    (it then finishes in the background, its result dropped). Its exceptions propagate.
    When ``stop`` is set meanwhile (the service is closing), ``stopped`` is raised at once."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="brain-files-parse", daemon=True)
    worker.start()
    while worker.is_alive() and (left := deadline - time.monotonic()) > 0:
        if stop is not None and stop.is_set():
            raise stopped
        worker.join(min(left, 0.1))
    if worker.is_alive():
        raise DeadlinePassed(late_reason(timeout_s))
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]
