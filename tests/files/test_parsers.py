"""Document parsers against fixtures generated in the test: real PDF, DOCX and HTML bytes."""

from __future__ import annotations

import io

import docx
import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from brain.errors import ParseError
from brain.files import ParsedDocument, page_for_offset, parse_document

PAGE_TEXTS = [
    "Alpha page talks about the contract renewal date.",
    "Beta page lists the brand colours and fonts.",
    "Gamma page holds the research conclusion.",
]


def make_pdf(pages: list[str]) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def make_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Quarterly report", level=1)
    document.add_paragraph("First paragraph about revenue.")
    table = document.add_table(rows=2, cols=3)
    for r, row in enumerate([["Region", "Q1", "Q2"], ["EMEA", "10", "12"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("Closing paragraph after the table.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


HTML = """<!DOCTYPE html>
<html><head><title>Ignored title</title><style>body { color: red; }</style>
<script>var leaked = "do not index";</script></head>
<body>
<h1>Guide &amp; Notes</h1>
<p>First   paragraph with <b>bold</b> text.</p>
<script>console.log("inline script");</script>
<noscript>Enable JS</noscript>
<template><p>template body</p></template>
<ul><li>one</li><li>two</li></ul>
<div>Line A<br>Line B</div>
</body></html>"""


def test_pdf_text_and_page_spans() -> None:
    parsed = parse_document(make_pdf(PAGE_TEXTS), "report.pdf")
    assert parsed.format == "pdf"
    assert [number for number, _, _ in parsed.pages] == [1, 2, 3]
    for (number, start, end), expected in zip(parsed.pages, PAGE_TEXTS, strict=True):
        page_text = parsed.text[start:end]
        assert " ".join(page_text.split()) == expected
        assert page_for_offset(parsed.pages, start) == number
        assert page_for_offset(parsed.pages, end - 1) == number
    assert page_for_offset(parsed.pages, parsed.text.index("research")) == 3


def test_page_for_offset_edges() -> None:
    pages = [(1, 0, 10), (2, 12, 20)]
    assert page_for_offset(pages, 11) == 1  # the separator belongs to the page before
    assert page_for_offset(pages, 20) == 2
    assert page_for_offset(pages, 21) is None
    assert page_for_offset([], 0) is None


def test_pdf_detected_by_magic_bytes_without_extension() -> None:
    parsed = parse_document(make_pdf(PAGE_TEXTS[:1]), "upload")
    assert parsed.format == "pdf"
    assert "contract renewal" in parsed.text


def test_encrypted_pdf_is_rejected() -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(PAGE_TEXTS))))
    writer.encrypt(user_password="s3cret", owner_password="owner")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(ParseError, match="encrypted PDF: decrypt it first"):
        parse_document(buffer.getvalue(), "locked.pdf")


def test_truncated_pdf_is_rejected() -> None:
    data = make_pdf(PAGE_TEXTS)
    with pytest.raises(ParseError):
        parse_document(data[: len(data) // 2], "broken.pdf")


def test_garbage_pdf_is_rejected() -> None:
    with pytest.raises(ParseError):
        parse_document(b"%PDF-1.7\nnot really a pdf\n%%EOF\n", "fake.pdf")


def test_docx_paragraphs_and_table_in_order() -> None:
    parsed = parse_document(make_docx(), "report.docx")
    assert parsed.format == "docx"
    assert parsed.pages == []
    text = parsed.text
    assert "Region | Q1 | Q2" in text
    assert "EMEA | 10 | 12" in text
    order = ["Quarterly report", "First paragraph", "Region | Q1", "EMEA", "Closing paragraph"]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)


def test_docx_detected_by_magic_bytes() -> None:
    assert parse_document(make_docx(), "attachment.bin").format == "docx"


def test_html_strips_scripts_and_keeps_blocks() -> None:
    parsed = parse_document(HTML.encode(), "page.html")
    text = parsed.text
    assert parsed.format == "html"
    for hidden in ("leaked", "inline script", "color: red", "Ignored title", "Enable JS"):
        assert hidden not in text
    assert "template body" not in text
    assert "Guide & Notes" in text
    assert "First paragraph with bold text." in text
    lines = text.splitlines()
    assert "one" in lines and "two" in lines
    assert "Line A" in lines and "Line B" in lines


def test_html_detected_by_magic_bytes() -> None:
    assert parse_document(HTML.encode(), "saved_page").format == "html"


def test_markdown_and_text_decode_with_bom_and_bad_bytes() -> None:
    md = parse_document("\ufeff# Title\n\nBody".encode(), "notes.md")
    assert md == ParsedDocument(text="# Title\n\nBody", pages=[], format="markdown")
    txt = parse_document(b"caf\xc3\xa9 \xff end", "log.txt")
    assert txt.format == "text"
    assert txt.text == "café \ufffd end"
    assert parse_document(b"a,b\n1,2", "data.unknownext", mime="text/csv").format == "text"


def test_unknown_extension_is_rejected() -> None:
    with pytest.raises(ParseError, match=r"no parser for \.xyz") as info:
        parse_document(b"\x00\x01binary", "blob.xyz")
    assert info.value.code == "PARSE_FAILED"
