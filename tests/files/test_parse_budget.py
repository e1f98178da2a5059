"""PDF parses within a budget (issue 50 item 6): content-stream bombs took 29 s and 53 s to
fail, a 100,000-page PDF was still being read after 60 s. Real PDF bytes built here: a page
count over the cap is refused, a page whose content stream costs more than the budget stops
at the budget with a ParseError naming it, and an upload of such a file fails with that
reason. Bounded by CPU time, never wall time (tests/timing.py)."""

from __future__ import annotations

import io
import threading
import time
import zlib
from pathlib import Path

import pytest

from brain.app import Brain
from brain.errors import ParseError
from brain.files import parse_document
from brain.files.parsers import MAX_PDF_PAGES
from tests.files.test_files import write
from tests.timing import CPU_BOUND_S, HANG_S, CpuClock


def raw_pdf(contents: list[bytes]) -> bytes:
    """A minimal PDF: one page per (Flate-compressed) content stream, Helvetica as /F1."""
    n = len(contents)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, body in enumerate(contents):
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                    f"<< /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode())
        z = zlib.compress(body, 9)
        objs.append(f"<< /Length {len(z)} /Filter /FlateDecode >>\nstream\n".encode() + z
                    + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n")
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n".encode() + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
              .encode())
    return out.getvalue()


def text_ops(count: int) -> bytes:
    """A content stream of ``count`` show-text operators: ~80,000 a second to extract here."""
    return b"BT /F1 12 Tf 72 712 Td " + b"(x) Tj " * count + b"ET"


def test_a_small_pdf_parses_whole_under_the_budget() -> None:
    parsed = parse_document(raw_pdf([text_ops(50), b"BT /F1 12 Tf 72 712 Td (end) Tj ET"]),
                            "ok.pdf")
    assert parsed.text.count("x") == 50 and parsed.text.endswith("end")
    assert [p[0] for p in parsed.pages] == [1, 2]


def test_a_page_whose_content_stream_is_a_bomb_is_refused_before_it_is_read() -> None:
    # 400,000 operators (2.8 MB decoded) in 2.8 KB: ~5 s of tokenising before any text.
    data = raw_pdf([text_ops(400_000)])
    assert len(data) < 10_000
    cpu = CpuClock()
    with pytest.raises(ParseError) as err:
        parse_document(data, "bomb.pdf")
    assert err.value.code == "PARSE_FAILED"
    assert err.value.message.startswith("page 1 of the PDF has a content stream of 2.7 MB")
    assert cpu.used() < CPU_BOUND_S


def test_pages_past_the_budget_stop_the_parse() -> None:
    # 40 pages of 100,000 operators each (under the page cap): ~1 s a page, 40 s unbounded.
    data = raw_pdf([text_ops(100_000)] * 40)
    cpu = CpuClock()
    with pytest.raises(ParseError) as err:
        parse_document(data, "slow.pdf", budget_s=0.2)
    assert "longer than its budget of 0.2 s" in err.value.message
    assert "content-stream bomb" in err.value.message
    assert cpu.used() < CPU_BOUND_S


def test_a_pdf_past_the_page_cap_is_refused_before_its_pages_are_read() -> None:
    data = raw_pdf([b"BT ET"] * (MAX_PDF_PAGES + 1))
    cpu = CpuClock()
    with pytest.raises(ParseError, match=r"10,001 pages, more than 10,000; split it"):
        parse_document(data, "pages.pdf")
    assert cpu.used() < CPU_BOUND_S


def _parsing() -> bool:
    return any(t.name == "brain-files-parse" for t in threading.enumerate())


def test_an_upload_of_a_bomb_fails_and_its_parse_stops(brain: Brain, tmp_path: Path) -> None:
    """The worker hands the parse what is left of the file's deadline: a bomb fails at the
    deadline, and the parse stops too instead of running on behind it (40 pages of 100,000
    operators: ~40 s of extraction unbounded)."""
    brain.settings.files.process_timeout_s = 0.5
    data = raw_pdf([text_ops(100_000)] * 40)
    rec = brain.files.ingest(str(write(tmp_path, "bomb.pdf", data)))
    deadline = time.monotonic() + HANG_S
    while (done := brain.files.get(rec["id"]))["status"] == "processing":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert done["status"] == "failed"
    assert "took longer than its" in done["reason"], done
    while _parsing():  # the abandoned parse ends at its own budget, not after every page
        assert time.monotonic() < deadline, "the parse of the bomb runs on past its deadline"
        time.sleep(0.05)
