"""The CLI keeps the same disk reserve as the server, and every ENOSPC is DISK_FULL (issue 50).

A real small filesystem (a size-limited tmpfs, mounted per test; skipped where mounting is not
allowed) and the real ``brain`` command in subprocesses: nothing patches the free-space probe.
On tmpfs every byte Edge maps is taken, so a reopen of an existing store fills the holes of
its payload index files (~140 MB): ``brain export`` on a nearly full disk died of SIGBUS there
and filled the disk, and ``brain stats`` then failed with a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from brain.app import Brain
from brain.errors import DiskFull
from config import Settings, load_settings
from tests.conftest import hash_embedder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[[str, int], Path]]:
    mounted: list[Path] = []

    def make(name: str, mb: int) -> Path:
        mnt = tmp_path / name
        mnt.mkdir()
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(mnt)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here (needs root): {res.stderr.strip()}")
        mounted.append(mnt)
        return mnt

    try:
        yield make
    finally:
        for mnt in mounted:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill(disk: Path, leave: int) -> Path:
    filler = disk / f"filler-{time.monotonic_ns()}"
    with filler.open("wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, max(_free(disk) - leave, 4096))
    return filler


def _open(settings: Settings) -> Brain:
    settings.embedding.model = "offline/hash-384"
    return Brain(settings, embedder=hash_embedder()).open()


def _build(home: Path, n: int) -> None:
    settings = load_settings(home=home)
    settings.storage.min_free_mb = 4
    b = _open(settings)
    try:
        for i in range(n):
            b.memory.add(f"note {i}: the deploy runs migrations before traffic " + "x" * 1500,
                         project="ops")
    finally:
        b.close()


def _brain(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN__")}
    env.update(BRAIN__HOME=str(home), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT),
               BRAIN__EMBEDDING__MODEL="offline/hash-384", BRAIN__STORAGE__MIN_FREE_MB="4")
    return subprocess.run([sys.executable, "-m", "brain.cli", *argv], env=env, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300)


def _disk_full_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode not in (-signal.SIGBUS, 128 + signal.SIGBUS), proc.stderr
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("brain: ")]
    assert line.startswith("brain: [DISK_FULL]") and "MB free" in line, line
    return line


def test_cli_export_on_a_nearly_full_disk_is_disk_full_not_sigbus(
        mount: Callable[[str, int], Path]) -> None:
    disk = mount("disk", 320)
    home = disk / "home"
    _build(home, 20)
    # Room for the CLI's min_free_mb (4 MB), not for what reopening the store takes.
    filler = _fill(disk, 40 << 20)
    before = _free(disk)
    line = _disk_full_line(_brain(home, "export", str(disk / "out.jsonl")))
    assert "open the store" in line
    assert not (disk / "out.jsonl").exists()
    assert _free(disk) >= before - (1 << 20)  # the disk was not filled
    # The next command is the same typed refusal, not a traceback.
    _disk_full_line(_brain(home, "stats"))
    # A disk with no byte left: still the typed refusal. Which step meets it depends on the
    # kernel: tmpfs may give back a few pages of the store's mapped files meanwhile (seen: 38
    # pages during a command), so the owner record is written and the reserve check refuses.
    last = _fill(disk, 0)
    _disk_full_line(_brain(home, "stats"))
    # With no store files to give pages back, the first write of any command (its owner
    # record) meets ENOSPC, which is DISK_FULL too, where it was a traceback.
    bare = mount("bare", 1)
    _fill(bare, 0)
    line = _disk_full_line(_brain(bare / "home", "stats"))
    assert "run `brain stats`" in line
    assert not (bare / "home" / "owner.json").exists()
    # With the space back, both work, and every note is exported.
    last.unlink()
    filler.unlink()
    assert _brain(home, "export", str(disk / "out.jsonl")).returncode == 0
    assert (disk / "out.jsonl").read_text().count('"type": "note"') == 20
    assert _brain(home, "stats").returncode == 0


def test_export_keeps_the_margin_on_its_target_and_leaves_no_partial_file(
        settings: Settings, mount: Callable[[str, int], Path]) -> None:
    target = mount("small", 1)  # a 1 MB disk: the export (~1.2 MB) cannot fit
    _build(settings.home, 600)
    b = _open(settings)
    try:
        with pytest.raises(DiskFull) as info:  # the brain's margin, checked as it writes
            b.maintenance.export_jsonl(target / "out.jsonl", keep_free_mb=0.5)
        assert "min_free_mb" in str(info.value)  # stopped by the margin, before ENOSPC
        with pytest.raises(DiskFull) as info:  # no margin: the ENOSPC itself, typed
            b.maintenance.export_jsonl(target / "out.jsonl")
        assert "is full" in str(info.value) and str(target) in str(info.value)
    finally:
        b.close()
    assert list(target.iterdir()) == []  # no partial export, no temp file
    assert _free(target) > 900_000


def test_an_upload_near_a_full_disk_is_disk_full_and_records_nothing(
        tmp_path: Path, mount: Callable[[str, int], Path]) -> None:
    disk = mount("disk", 160)
    settings = load_settings(home=disk / "home")
    settings.storage.min_free_mb = 1
    doc = tmp_path / "report.md"
    doc.write_text("# Quarterly report\n\n" + "figures and plans. " * 200_000)  # ~3.8 MB
    b = _open(settings)
    try:
        filler = _fill(disk, 2 << 20)
        with pytest.raises(DiskFull) as info:  # was: an untyped [Errno 28]
            b.files.ingest(str(doc))
        err = info.value
        assert err.details["needed_bytes"] == doc.stat().st_size
        assert err.details["free_bytes"] < err.details["needed_bytes"]
        assert "report.md" in str(err) and "MB free" in str(err)
        assert b.files.list() == []
        filler.unlink()
        assert b.files.ingest(str(doc))["status"] == "processing"
    finally:
        b.close()
