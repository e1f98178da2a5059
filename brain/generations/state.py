"""What a model switch keeps on disk: ``<home>/generations.json`` and the dirty logs.

The state file names the active generation (the collection ``<name>_g<N>`` a start opens),
the previous one kept for rollback, and the rebuild in progress: its target model, status,
checkpoint (the scroll offset after the last finished batch) and counts. Every save is a
write to a temporary file, an fsync, a rename and an fsync of the folder, so a kill -9
leaves the old state or the new one, never half of either.

A dirty log (``<home>/generations/dirty-g<N>.log``) lists the ids of points written to the
live generation since a rebuild toward generation N began (or since the swap, for the
previous one: what a rollback must bring over). An id is appended and fsynced before the
write it announces reaches the store, so a crash can leave an id the store never got (re-read
harmlessly), never a write the log missed.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from brain.errors import ConfigError
from brain.private import fsync_dir

STATE_FILE = "generations.json"
DIRTY_DIR = "generations"

Status = Literal["idle", "queued", "running", "paused", "cancelled", "complete", "failed"]
ACTIVE_STATUSES = ("queued", "running", "paused")


@dataclass
class Target:
    """The model a rebuild embeds with (a registry record id, its dimension and provider)."""

    model: str
    dimension: int
    provider: str = "local"


@dataclass
class Rebuild:
    generation: int
    target: Target
    status: Status = "queued"
    checkpoint: str | None = None  # scroll offset after the last finished batch
    scrolled: bool = False  # the scroll pass is over; only dirty ids are left
    done: int = 0
    total: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    embedded: int = 0  # texts embedded, scroll pass and dirty ids
    started_at: str = ""
    updated_at: str = ""
    finished_at: str = ""
    reason: str = ""  # why it is paused / failed / cancelled
    elapsed_s: float = 0.0  # time spent running, across resumes

    @property
    def rate(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class GenerationState:
    active: int = 1
    active_model: str = ""
    active_dimension: int = 0  # the store is opened with it, whatever model is configured
    previous: int | None = None
    previous_model: str = ""
    previous_dimension: int = 0
    rebuild: Rebuild | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.rebuild is not None:
            out["rebuild"]["rate_per_s"] = round(self.rebuild.rate, 2)
        return out


def _state_path(home: Path) -> Path:
    return Path(home) / STATE_FILE


def load(home: Path) -> GenerationState:
    """The saved state; a data dir that never switched is generation 1. A damaged file (cut
    short, bytes flipped, fields of the wrong shape) is CONFIG_INVALID naming it, the
    generations found on disk and the fix; nothing is changed."""
    path = _state_path(home)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return GenerationState()
    except (OSError, ValueError) as exc:
        raise _damaged(home, exc) from None
    try:
        return _parse(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _damaged(home, exc) from None


def _parse(data: Any) -> GenerationState:
    if not isinstance(data, dict):
        raise TypeError(f"a JSON object was expected, not {type(data).__name__}")
    rb = data.get("rebuild")
    rebuild = None
    if isinstance(rb, dict):
        rb = {k: v for k, v in rb.items() if k in Rebuild.__dataclass_fields__}
        rb["target"] = Target(**rb["target"])
        rebuild = Rebuild(**rb)
    previous = data.get("previous")
    return GenerationState(
        active=int(data.get("active", 1)), active_model=str(data.get("active_model", "")),
        active_dimension=int(data.get("active_dimension", 0)),
        previous=None if previous is None else int(previous),
        previous_model=str(data.get("previous_model", "")),
        previous_dimension=int(data.get("previous_dimension", 0)),
        rebuild=rebuild,
    )


def _damaged(home: Path, exc: Exception) -> ConfigError:
    path = _state_path(home)
    found = sorted(p.name for p in (Path(home) / "store").glob("*_g*") if p.is_dir())
    on_disk = (f"the embedded store holds {', '.join(found)}" if found
               else "no embedded store collection was found (a Qdrant server keeps its own)")
    return ConfigError(
        f"{path} is damaged ({type(exc).__name__}: {exc}); it records which generation of the "
        f"store a start opens, and {on_disk}. Nothing was changed. Restore the file from a "
        "backup, or write it again: "
        '{"active": N, "active_model": "<model id>", "active_dimension": <size>} with N the '
        "generation you served last (the highest `_gN`, unless you rolled back) and its "
        "model; `brain model status` then shows the state. Deleting it opens generation 1.",
        path=str(path), generations=found,
    )


def save(home: Path, state: GenerationState) -> None:
    path = _state_path(home)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(asdict(state), fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def active_generation(home: Path) -> int:
    """The generation a start opens (``<collection>_g<N>``)."""
    return load(home).active


def active_dimension(home: Path) -> int:
    """The active generation's vector size (0: not recorded yet, a brain that never ran this
    version): a configured model of another size is a pending switch, not a store to re-make."""
    return load(home).active_dimension


class DirtyLog:
    """Ids written to the live generation that a target generation has still to take over."""

    # One lock per log file, whatever the instance: the live store's wrapper appends through
    # one instance and the rebuild consumes through another. With a lock each, an append
    # landing between consume's read and its replace went to the replaced file and was lost.
    _locks: dict[Path, threading.Lock] = {}
    _locks_guard = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = path.resolve()
        with DirtyLog._locks_guard:
            self._lock = DirtyLog._locks.setdefault(key, threading.Lock())

    @classmethod
    def for_generation(cls, home: Path, generation: int) -> DirtyLog:
        return cls(Path(home) / DIRTY_DIR / f"dirty-g{generation}.log")

    def add(self, ids: Iterable[str]) -> None:
        text = "".join(f"{i}\n" for i in ids)
        if not text:
            return
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, text.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def read(self) -> tuple[list[str], int]:
        """The distinct ids in the log, in first-seen order, and the log's size in bytes (pass
        it to :meth:`consume` once they are handled, so later ids survive)."""
        with self._lock:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return [], 0
        end = raw.rfind(b"\n") + 1  # a torn last line (kill -9 mid-append) is left for later
        seen: dict[str, None] = {}
        for line in raw[:end].decode(errors="replace").splitlines():
            if line:
                seen.setdefault(line, None)
        return list(seen), end

    def consume(self, upto: int) -> None:
        """Drop the first ``upto`` bytes (handled); what was appended since stays."""
        with self._lock:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, raw[upto:])
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)

    def pending(self) -> int:
        return len(self.read()[0])

    def remove(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)


def models_in_use(home: Path) -> dict[str, str]:
    """The models the generations use, by role: the active one, and a live rebuild's target
    (queued, running or paused)."""
    state = load(home)
    out = {"active model": state.active_model} if state.active_model else {}
    rb = state.rebuild
    if rb is not None and rb.status in ("queued", "running", "paused"):
        out["rebuild target"] = rb.target.model
    return out
