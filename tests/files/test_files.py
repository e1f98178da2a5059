"""Brain files service: upload, dedupe, caps, failures, reprocess, delete, search scoping.

Runs on the offline hash embedder and Qdrant Edge in a temp dir; documents are generated
here (fpdf2 PDFs, text), never downloaded.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fpdf import FPDF

from brain.errors import FileNotFound, FileTooLarge, InvalidArgument
from brain.files.service import FilesService, chunk_point_id, doc_chunks
from brain.trust.identity import Identity, acting_as
from tests.timing import HANG_S

TOPICS = [
    "The contract renewal date is the first of March and requires written notice.",
    "Brand colours are teal and orange; headings use the Inter typeface.",
    "The research concluded that caching halves the median response latency.",
    "Quarterly revenue in the EMEA region grew by twelve percent year over year.",
    "Office plants should be watered twice a week during the summer months.",
]


def long_text(paragraphs: int = 40) -> str:
    return "\n\n".join(f"Paragraph {i}. {TOPICS[i % len(TOPICS)]}" for i in range(paragraphs))


def make_pdf(pages: list[str]) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def blobs(brain: Any) -> list[Path]:
    root = brain.home / "files" / "blobs"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def raw_files(brain: Any) -> list[Path]:
    """Raw upload bytes anywhere under files/: kept blobs or ones waiting to be parsed."""
    return blobs(brain) + [p for p in (brain.home / "files" / "incoming").glob("*")]


def ingest_ready(svc: Any, path: Path) -> dict[str, Any]:
    rec = svc.ingest(path)
    done = svc.wait(rec["id"], 30)
    assert done["status"] != "processing", done
    return done | {"deduped": rec["deduped"]}


class GatedEmbedder:
    """Wraps an embedder; batches after the first wait until ``gate`` is set."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.record = inner.record
        self.dimension = inner.dimension
        self.gate = threading.Event()
        self.first_batch_done = threading.Event()
        self.calls = 0

    def embed_documents(self, texts: Any) -> np.ndarray:
        self.calls += 1
        if self.calls > 1:
            assert self.gate.wait(20), "gate never opened"
        out = self.inner.embed_documents(texts)
        self.first_batch_done.set()
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


class FlakyEmbedder(GatedEmbedder):
    """Fails the batches whose 1-based call numbers are in ``fail_calls``."""

    def __init__(self, inner: Any, fail_calls: set[int]) -> None:
        super().__init__(inner)
        self.fail_calls = fail_calls

    def embed_documents(self, texts: Any) -> np.ndarray:
        self.calls += 1
        if self.calls in self.fail_calls:
            raise ConnectionError("embedding endpoint unreachable")
        return self.inner.embed_documents(texts)


@pytest.fixture
def svc(brain: Any) -> FilesService:
    return brain.files


# ------------------------------------------------------------------ upload and dedupe


def test_ingest_returns_processing_then_ready(svc: FilesService, tmp_path: Path) -> None:
    path = write(tmp_path, "notes.md", long_text())
    rec = svc.ingest(path)
    assert rec["status"] == "processing" and rec["deduped"] is False
    assert rec["file_size"] == path.stat().st_size and len(rec["content_hash"]) == 64
    done = svc.wait(rec["id"], 30)
    assert done["status"] == "ready" and done["format"] == "markdown"
    assert done["chunks_count"] > 1
    assert svc.count_points(rec["id"]) == done["chunks_count"]
    payload = doc_chunks(svc.store, rec["id"])[0].payload
    assert payload["kind"] == "doc_chunk" and payload["file_name"] == "notes.md"
    assert payload["user_id"] == "default" and payload["embed_model"] == "offline/hash-384"
    assert payload["content_hash"] == rec["content_hash"] and payload["file_status"] == "ready"


def test_same_bytes_under_two_names_is_one_record(
    brain: Any, svc: FilesService, tmp_path: Path
) -> None:
    first = ingest_ready(svc, write(tmp_path, "report.txt", long_text(5)))
    again = svc.ingest(write(tmp_path, "renamed/copy of report.txt", long_text(5)))
    assert again["deduped"] is True and again["id"] == first["id"]
    assert again["file_name"] == "report.txt" and again["status"] == "ready"
    assert [r["id"] for r in svc.list()] == [first["id"]]
    assert raw_files(brain) == []  # files.keep_raw = false: only the parsed text stays


def test_different_users_get_their_own_records(brain: Any, tmp_path: Path) -> None:
    # The caller comes from the call (brain/trust/tenancy.py), not from a user fixed at start.
    brain.settings.files.keep_raw = True  # kept bytes are shared by content
    path = write(tmp_path, "shared.txt", long_text(5))
    svc = brain.files
    with acting_as(Identity("alice", "a1")):
        alice = ingest_ready(svc, path)
    with acting_as(Identity("bob", "b1")):
        bob = ingest_ready(svc, path)
        assert bob["deduped"] is False and bob["id"] != alice["id"]
        assert len(blobs(brain)) == 1  # one blob, two records
        assert [r["id"] for r in svc.list()] == [bob["id"]]
        with pytest.raises(FileNotFound):
            svc.get(alice["id"])  # another user's file is invisible
        hits = svc.search("contract renewal", threshold=0.1)
        assert hits and {h["file_id"] for h in hits} == {bob["id"]}
    with acting_as(Identity("alice", "a1")):
        assert svc.delete(alice["id"])["blob_removed"] is False
    with acting_as(Identity("bob", "b1")):
        assert len(blobs(brain)) == 1 and svc.search("contract renewal", threshold=0.1)
        assert svc.delete(bob["id"])["blob_removed"] is True
    assert blobs(brain) == []


def test_file_over_the_cap_is_refused_and_nothing_stored(
    brain: Any, svc: FilesService, tmp_path: Path
) -> None:
    big = tmp_path / "huge.pdf"
    with big.open("wb") as fh:
        fh.truncate(51 * 1024 * 1024)  # sparse: instant, no disk used
    with pytest.raises(FileTooLarge) as err:
        svc.ingest(big)
    assert err.value.code == "FILE_TOO_LARGE"
    assert "51.0 MB" in err.value.message and "50 MB" in err.value.message
    assert svc.list() == [] and blobs(brain) == []
    assert not doc_chunks_any(svc)


def doc_chunks_any(svc: FilesService) -> bool:
    from brain.vector_store import Filter, Match

    return svc.store.count(Filter(must=(Match("kind", "doc_chunk"),))) > 0


BAD_PATHS = [
    ("missing.txt", None, "no such file"),
    ("folder", "dir", "not a regular file"),
    (".ssh/id_ed25519", "file", "credential"),
    ("project/.env", "file", "credential"),
    ("keys/server.pem", "file", "credential"),
    ("user/.aws/credentials", "file", "credential"),  # tmp_path/home is the data dir
]


def test_bad_paths_are_refused(brain: Any, svc: FilesService, tmp_path: Path) -> None:
    for name, make, needle in BAD_PATHS:
        path = tmp_path / name
        if make == "dir":
            path.mkdir()
        elif make == "file":
            write(tmp_path, name, "AWS_SECRET_ACCESS_KEY=abc")
        with pytest.raises(InvalidArgument) as err:
            svc.ingest(path)
        assert needle in err.value.message, name
    assert svc.list() == [] and blobs(brain) == []


# ------------------------------------------------------------------ failures


def test_truncated_pdf_fails_with_a_reason_and_others_keep_working(
    svc: FilesService, tmp_path: Path
) -> None:
    pdf = make_pdf(TOPICS)
    broken = ingest_ready(svc, write(tmp_path, "broken.pdf", pdf[: len(pdf) // 2]))
    assert broken["status"] == "failed" and "truncated" in broken["reason"]
    assert svc.count_points(broken["id"]) == 0
    good = ingest_ready(svc, write(tmp_path, "good.pdf", pdf))
    assert good["status"] == "ready" and good["pages"] == len(TOPICS)
    text = ingest_ready(svc, write(tmp_path, "plain.txt", long_text(3)))
    assert text["status"] == "ready"
    assert {r["status"] for r in svc.list()} == {"failed", "ready"}


def test_unknown_format_is_stored_and_marked_failed(
    brain: Any, svc: FilesService, tmp_path: Path
) -> None:
    rec = ingest_ready(svc, write(tmp_path, "data.xyz", b"\x00\x01binary"))
    assert rec["status"] == "failed" and "no parser" in rec["reason"]
    assert raw_files(brain) == []  # a failed upload leaves no bytes behind (issue 13)
    again = svc.ingest(write(tmp_path, "data.xyz", b"\x00\x01binary"))
    assert again["id"] == rec["id"] and again["status"] == "processing"  # so it can retry
    assert svc.wait(rec["id"], 30)["status"] == "failed" and raw_files(brain) == []


def test_failed_embedding_batch_fails_the_file_and_removes_its_points(
    brain: Any, tmp_path: Path
) -> None:
    brain.settings.files.chunk_tokens = 24
    brain.settings.files.embed_batch = 4
    brain.settings.files.embed_retries = 2
    brain.settings.files.retry_backoff_s = 0.01
    flaky = FlakyEmbedder(brain.embedder, fail_calls={2, 3, 4})  # batch 2 fails 3 times
    svc = FilesService(replace(brain.files.deps, embedder=flaky), brain.settings.files)
    try:
        rec = ingest_ready(svc, write(tmp_path, "long.md", long_text()))
        assert rec["status"] == "failed"
        assert "embedding failed after 3 attempts" in rec["reason"]
        assert "ConnectionError" in rec["reason"]
        assert svc.count_points(rec["id"]) == 0  # batch 1 was written, then removed
    finally:
        svc.close()


def test_embedding_retry_recovers(brain: Any, tmp_path: Path) -> None:
    brain.settings.files.chunk_tokens = 24
    brain.settings.files.embed_batch = 4
    brain.settings.files.retry_backoff_s = 0.01
    flaky = FlakyEmbedder(brain.embedder, fail_calls={2, 3})  # two failures, then success
    svc = FilesService(replace(brain.files.deps, embedder=flaky), brain.settings.files)
    try:
        rec = ingest_ready(svc, write(tmp_path, "long.md", long_text()))
        assert rec["status"] == "ready"
        assert svc.count_points(rec["id"]) == rec["chunks_count"] > 4
    finally:
        svc.close()


# ------------------------------------------------------------------ chunking and reprocess


def test_reprocess_after_chunk_size_change_leaves_no_leftover_points(
    brain: Any, svc: FilesService, tmp_path: Path
) -> None:
    rec = ingest_ready(svc, write(tmp_path, "long.md", long_text(60)))
    default_count = rec["chunks_count"]
    brain.settings.files.chunk_tokens = 40
    small = svc.reprocess(rec["id"])
    assert small["status"] == "processing"
    small = svc.wait(rec["id"], 30)
    assert small["status"] == "ready" and small["chunks_count"] > default_count
    ids = {p.id for p in doc_chunks(svc.store, rec["id"])}
    assert ids == {chunk_point_id(rec["id"], i) for i in range(small["chunks_count"])}
    brain.settings.files.chunk_tokens = 120  # shrink the count: old tail points must go
    svc.reprocess(rec["id"])
    large = svc.wait(rec["id"], 30)
    assert large["chunks_count"] < small["chunks_count"]
    assert svc.count_points(rec["id"]) == large["chunks_count"]
    for point in doc_chunks(svc.store, rec["id"]):
        assert svc.embedder.count_tokens(point.payload["content"]) <= 120


def test_chunk_budget_follows_the_model(brain: Any, svc: FilesService) -> None:
    assert svc.chunk_budget() == (256 - 8, 32)
    brain.settings.files.chunk_tokens = 40
    brain.settings.files.overlap_tokens = 100
    assert svc.chunk_budget() == (40, 20)  # overlap never reaches the chunk size


def test_max_chunks_caps_and_flags_truncation(
    brain: Any, svc: FilesService, tmp_path: Path
) -> None:
    brain.settings.files.chunk_tokens = 20
    brain.settings.files.max_chunks = 3
    rec = ingest_ready(svc, write(tmp_path, "long.md", long_text()))
    assert rec["status"] == "ready" and rec["chunks_count"] == 3 and rec["truncated"] is True
    assert svc.count_points(rec["id"]) == 3


def test_pdf_chunks_keep_their_page(brain: Any, svc: FilesService, tmp_path: Path) -> None:
    brain.settings.files.chunk_tokens = 30
    brain.settings.files.overlap_tokens = 0
    rec = ingest_ready(svc, write(tmp_path, "topics.pdf", make_pdf(TOPICS)))
    covered: set[int] = set()
    for point in doc_chunks(svc.store, rec["id"]):
        first, last = point.payload["page"], point.payload["page_end"]
        assert 1 <= first <= last <= len(TOPICS)
        covered.update(range(first, last + 1))
    assert covered == set(range(1, len(TOPICS) + 1))
    hit = svc.search("office plants watered summer", limit=1, threshold=0.1)[0]
    assert hit["page"] <= 5 == hit["page_end"] and "plants" in hit["excerpt"]


def test_secrets_in_documents_are_redacted_before_indexing(
    svc: FilesService, tmp_path: Path
) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    rec = ingest_ready(svc, write(tmp_path, "setup.md", f"Deploy notes.\n\nUse token {token}."))
    contents = " ".join(p.payload["content"] for p in doc_chunks(svc.store, rec["id"]))
    assert token not in contents and "[REDACTED:github_token]" in contents
    assert rec["redactions"] == 1


# ------------------------------------------------------------------ search, delete, restart


def test_search_validates_limit_and_sees_only_ready_files(brain: Any, tmp_path: Path) -> None:
    brain.settings.files.chunk_tokens = 24
    brain.settings.files.embed_batch = 2
    gated = GatedEmbedder(brain.embedder)
    svc = FilesService(replace(brain.files.deps, embedder=gated), brain.settings.files)
    try:
        for bad in (0, -3, True):
            with pytest.raises(InvalidArgument):
                svc.search("anything", limit=bad)
        assert svc.search("anything", limit=31) == []  # above the maximum: clamped
        rec = svc.ingest(write(tmp_path, "long.md", long_text()))
        assert gated.first_batch_done.wait(20)
        deadline = time.monotonic() + HANG_S
        while svc.count_points(rec["id"]) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert svc.count_points(rec["id"]) > 0  # half written ...
        assert svc.search("contract renewal", threshold=-1.0) == []  # ... and invisible
        gated.gate.set()
        assert svc.wait(rec["id"], 30)["status"] == "ready"
        hits = svc.search("contract renewal notice", limit=3, threshold=0.1)
        assert len(hits) == 3 and "contract renewal" in hits[0]["excerpt"]
        assert [h["similarity"] for h in hits] == sorted(
            (h["similarity"] for h in hits), reverse=True
        )
        assert svc.search("contract renewal", file_name="other.md", threshold=-1.0) == []
        assert svc.search("contract renewal", file_name="long.md", threshold=0.1)
    finally:
        gated.gate.set()
        svc.close()


def test_search_with_vector_shares_one_query_embedding(
    brain: Any, svc: FilesService, tmp_path: Path
) -> None:
    ingest_ready(svc, write(tmp_path, "long.md", long_text()))
    qvec = svc.embedder.embed_query("brand colours typeface")
    by_text = svc.search("brand colours typeface", limit=5, threshold=0.1)
    by_vec = svc.search_with_vector(qvec, "brand colours typeface", limit=5, threshold=0.1)
    assert by_text == by_vec and by_vec
    # notes never pick up document chunks
    assert brain.memory.search("brand colours typeface", 5) == []


def test_delete_removes_record_points_and_bytes(
    brain: Any, svc: FilesService, tmp_path: Path
) -> None:
    rec = ingest_ready(svc, write(tmp_path, "long.md", long_text()))
    out = svc.delete(rec["id"])
    assert out == {"id": rec["id"], "file_name": "long.md", "deleted": True, "blob_removed": True}
    assert svc.count_points(rec["id"]) == 0 and blobs(brain) == [] and svc.list() == []
    for call in (svc.get, svc.delete, svc.reprocess):
        with pytest.raises(FileNotFound):
            call(rec["id"])


def test_interrupted_processing_resumes_at_next_start(brain: Any, tmp_path: Path) -> None:
    brain.settings.files.chunk_tokens = 24
    brain.settings.files.embed_batch = 2
    gated = GatedEmbedder(brain.embedder)
    first = FilesService(replace(brain.files.deps, embedder=gated), brain.settings.files)
    rec = first.ingest(write(tmp_path, "long.md", long_text()))
    assert gated.first_batch_done.wait(20)
    closer = threading.Thread(target=first.close)
    closer.start()
    while not first._stop.is_set():
        time.sleep(0.005)
    gated.gate.set()
    closer.join(20)
    assert brain.files.get(rec["id"])["status"] == "processing"
    second = FilesService(brain.files.deps, brain.settings.files)
    try:
        second.start()
        done = second.wait(rec["id"], 30)
        assert done["status"] == "ready"
        assert second.count_points(rec["id"]) == done["chunks_count"]
    finally:
        second.close()


def test_records_survive_a_restart(settings: Any, clock: Any, tmp_path: Path) -> None:
    from brain.app import Brain
    from tests.conftest import hash_embedder

    settings.embedding.model = "offline/hash-384"
    with Brain(settings, embedder=hash_embedder(), clock=clock) as b:
        rec = ingest_ready(b.files, write(tmp_path, "long.md", long_text()))
    with Brain(settings, embedder=hash_embedder(), clock=clock) as b:
        again = b.files.get(rec["id"])
        assert again["status"] == "ready" and again["chunks_count"] == rec["chunks_count"]
        assert b.files.search("brand colours", threshold=0.1)


# ------------------------------------------------------------------ CLI


def test_cli_ingest_list_search_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from brain.cli import main

    monkeypatch.setenv("BRAIN__EMBEDDING__MODEL", "offline/hash-384")
    doc = write(tmp_path, "guide.md", long_text())
    assert main(["ingest", str(doc), str(doc)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in out] == ["ready", "ready"]
    assert [r["deduped"] for r in out] == [False, True]
    assert main(["files", "list"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert main(["files", "search", "brand colours", "--threshold", "0.1"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["file"] == "guide.md"
    assert main(["ingest", str(tmp_path / "nope.pdf")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["files", "delete", out[0]["id"]]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"] is True
