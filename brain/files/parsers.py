"""Parse uploaded documents (PDF, DOCX, HTML, Markdown, text) into plain text.

``parse_document`` picks the format by file extension, then by the declared MIME type,
then by magic bytes, and returns a ``ParsedDocument``. Paged formats (PDF) also return
``pages``: ``(page_number, start, end)`` spans into ``text`` so a chunk can be traced back
to its page with ``page_for_offset``. Every failure is a ``ParseError`` with a reason;
parser libraries are imported lazily so importing this module stays cheap.

Nothing is inflated or parsed past ``max_expanded_bytes`` (issue 13: a 545 KB DOCX expanded
to 300 MB and parsed with a 1.1 GB peak). A DOCX is measured from its zip directory before a
byte is inflated; zipfile then never inflates a member past the size that directory declares
(a member that lies fails its CRC), so the check bounds the work too. HTML is measured by its
size and by how deeply its elements nest: lexbor's parse is quadratic in the nesting depth
(100,000 nested ``<div>``, 500 KB, took 30 s).

A PDF is parsed within a time budget (issue 50 item 6: content-stream bombs took 29 s and
53 s to fail, a 100,000-page PDF was still being read after 60 s): one with more than
``MAX_PDF_PAGES`` pages is refused before a page is read, and the clock is checked between
pages and every ``_OPS_PER_CHECK`` content-stream operators inside a page (form XObjects a
page draws are extracted under the same clock), and a page whose content stream is larger
than ``MAX_PAGE_CONTENT_BYTES`` is refused before pypdf tokenises it (~0.5 MB/s here). So a
parse stops at ``budget_s`` (or the caller's deadline) plus at most one page, with a
ParseError that says so, instead of running on in the background.
"""

from __future__ import annotations

import bisect
import io
import mimetypes
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING

from brain.errors import ParseError
from config import FilesSettings

if TYPE_CHECKING:
    from docx.table import Table

__all__ = ["FORMATS", "ParsedDocument", "detect_format", "page_for_offset", "parse_document"]

PageSpan = tuple[int, int, int]  # page number (1-based), start offset, end offset


@dataclass(frozen=True)
class ParsedDocument:
    text: str
    pages: list[PageSpan] = field(default_factory=list)
    format: str = "text"


_EXTENSIONS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
}
_MIMES = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
}
_PAGE_SEPARATOR = "\n\n"

PARSE_BUDGET_S = 60.0  # a parse past this is refused (a PDF's; files.process_timeout_s bounds all)
MAX_PDF_PAGES = 10_000  # ~0.5 ms a page of overhead here: 5 s at most before any text
# pypdf tokenises a page's whole content stream before extracting (~0.5 MB/s here): a dense
# page of text holds 20-100 KB of it, so a page past this is refused before it is tokenised.
MAX_PAGE_CONTENT_BYTES = 1024 * 1024
_OPS_PER_CHECK = 512


def _mime_format(mime: str | None) -> str | None:
    if not mime:
        return None
    mime = mime.split(";", 1)[0].strip().lower()
    if mime in _MIMES:
        return _MIMES[mime]
    return "text" if mime.startswith("text/") else None


def _magic_format(data: bytes) -> str | None:
    head = data[:1024]
    if head.startswith(b"%PDF"):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                if "word/document.xml" in archive.namelist():
                    return "docx"
        except zipfile.BadZipFile:
            return None
        return None
    lowered = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered:
        return "html"
    return None


def detect_format(data: bytes, file_name: str, mime: str | None = None) -> str:
    """Format name for the document, or ParseError when no parser handles it."""
    ext = PurePath(file_name).suffix.lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    guessed = mimetypes.guess_type(file_name)[0] if ext else None
    found = _mime_format(mime) or _magic_format(data) or _mime_format(guessed)
    if found is None:
        raise ParseError(f"no parser for {ext or '(no extension)'}", file_name=file_name)
    return found


def parse_document(
    data: bytes,
    file_name: str,
    mime: str | None = None,
    *,
    max_expanded_bytes: int = FilesSettings.model_fields["max_expanded_bytes"].default,
    budget_s: float = PARSE_BUDGET_S,
) -> ParsedDocument:
    """Extract text (and page spans for PDFs) from an uploaded document, within
    ``budget_s`` seconds for a PDF (ParseError past it)."""
    fmt = detect_format(data, file_name, mime)
    try:
        _GUARDS.get(fmt, _no_guard)(data, max_expanded_bytes)
        if fmt == "pdf":
            return _parse_pdf(data, time.monotonic() + budget_s, budget_s)
        return _PARSERS[fmt](data)
    except ParseError:
        raise
    except Exception as exc:  # parser libraries raise many types on malformed input
        raise ParseError(
            f"could not parse {fmt} file: {type(exc).__name__}: {exc}", file_name=file_name
        ) from exc


def page_for_offset(pages: list[PageSpan], offset: int) -> int | None:
    """1-based page holding ``offset`` (a separator counts for the page before it)."""
    if not pages or offset < pages[0][1] or offset > pages[-1][2]:
        return None
    index = bisect.bisect_right([start for _, start, _ in pages], offset) - 1
    return pages[index][0]


def decode_text(data: bytes) -> str:
    """UTF-8 (or BOM-marked UTF-16) with undecodable bytes replaced and the BOM dropped."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def _parse_text(data: bytes) -> ParsedDocument:
    return ParsedDocument(text=decode_text(data), format="text")


def _parse_markdown(data: bytes) -> ParsedDocument:
    return ParsedDocument(text=decode_text(data), format="markdown")


def _over_budget(budget_s: float, where: str) -> ParseError:
    return ParseError(
        f"parsing the PDF took longer than its budget of {budget_s:g} s ({where}); its content "
        "streams are too costly to read (a content-stream bomb, or a document to split)"
    )


def _parse_pdf(data: bytes, deadline: float = float("inf"),
               budget_s: float = PARSE_BUDGET_S) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    if b"%%EOF" not in data[-2048:]:
        raise ParseError("truncated PDF: the end-of-file marker is missing")
    try:
        reader = PdfReader(io.BytesIO(data))
    except PdfReadError as exc:
        raise ParseError(f"malformed PDF: {exc}") from exc
    if reader.is_encrypted:
        try:  # owner-password-only PDFs open with an empty user password
            opened = bool(reader.decrypt(""))
        except (DependencyError, NotImplementedError, PdfReadError, ValueError):
            opened = False
        if not opened:
            raise ParseError("encrypted PDF: decrypt it first")
    count = len(reader.pages)
    if count > MAX_PDF_PAGES:
        raise ParseError(f"the PDF has {count:,} pages, more than {MAX_PDF_PAGES:,}; split it")
    parts: list[str] = []
    pages: list[PageSpan] = []
    offset = 0
    ops = 0
    number = 0

    def clock(*_: object) -> None:  # before each content-stream operator
        nonlocal ops
        ops += 1
        if ops % _OPS_PER_CHECK == 0 and time.monotonic() > deadline:
            raise _over_budget(budget_s, f"page {number} of {count}")

    for number, page in enumerate(reader.pages, start=1):
        if time.monotonic() > deadline:
            raise _over_budget(budget_s, f"{number - 1} of {count} pages read")
        contents = page.get_contents()  # decoded, not yet tokenised
        size = len(contents.get_data()) if contents is not None else 0
        if size > MAX_PAGE_CONTENT_BYTES:
            raise ParseError(
                f"page {number} of the PDF has a content stream of {_mb(size)}, more than "
                f"{_mb(MAX_PAGE_CONTENT_BYTES)} a page: a content-stream bomb, or a drawing "
                "whose text should be exported first"
            )
        if parts:
            parts.append(_PAGE_SEPARATOR)
            offset += len(_PAGE_SEPARATOR)
        page_text = (page.extract_text(visitor_operand_before=clock) or "").strip()
        parts.append(page_text)
        pages.append((number, offset, offset + len(page_text)))
        offset += len(page_text)
    return ParsedDocument(text="".join(parts), pages=pages, format="pdf")


def _parse_docx(data: bytes) -> ParsedDocument:
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            blocks.extend(_table_rows(item))
        elif item.text.strip():
            blocks.append(item.text)
    return ParsedDocument(text="\n\n".join(blocks), format="docx")


def _table_rows(table: Table) -> list[str]:
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats across the columns it spans
                continue
            seen.add(id(cell._tc))
            cells.append(cell.text.strip())
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


_HTML_DROP = ["script", "style", "noscript", "template", "head", "iframe", "svg"]
_HTML_PARAGRAPH = (
    "p,h1,h2,h3,h4,h5,h6,blockquote,pre,ul,ol,dl,table,section,article,header,footer,"
    "aside,nav,main,figure,form,fieldset,address,hr"
)
_HTML_LINE = "div,li,tr,dt,dd,caption,figcaption,summary,details,option"
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")


def _parse_html(data: bytes) -> ParsedDocument:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(decode_text(data))
    tree.strip_tags(_HTML_DROP)
    for node in tree.css(_HTML_PARAGRAPH):
        node.insert_before("\n\n")
        node.insert_after("\n\n")
    for node in tree.css(_HTML_LINE):
        node.insert_before("\n")
        node.insert_after("\n")
    for node in tree.css("br"):
        node.insert_after("\n")
    for node in tree.css("td,th"):
        node.insert_after(" | ")
    root = tree.body or tree.root
    raw = root.text(deep=True, separator="") if root is not None else ""
    lines = (_SPACES.sub(" ", line).strip().removesuffix(" |") for line in raw.split("\n"))
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return ParsedDocument(text=text, format="html")


# -- size guards, run before a parser sees the bytes ------------------------------------

# Real pages nest a few dozen elements deep; lexbor takes ~0.02 s at this depth.
MAX_HTML_DEPTH = 2_048
MAX_ZIP_MEMBERS = 10_000
_XML_PARTS = (".xml", ".rels")
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9-]*)[^<>]*?(/?)>")
# Elements that never hold others, or that the parser closes by itself when a sibling opens:
# they do not deepen the tree, so they are not counted.
_FLAT_TAGS = frozenset(
    b"area base br col embed hr img input link meta param source track wbr "
    b"p li dt dd tr td th option optgroup rp rt tbody thead tfoot colgroup".split()
)


def _mb(size: int) -> str:
    return f"{size / 1048576:.1f} MB"


def _no_guard(data: bytes, cap: int) -> None:
    return None


def _guard_docx(data: bytes, cap: int) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise ParseError(f"malformed DOCX: {exc}") from exc
    if len(members) > MAX_ZIP_MEMBERS:
        raise ParseError(f"DOCX has {len(members)} parts, more than {MAX_ZIP_MEMBERS}")
    xml = sum(m.file_size for m in members if m.filename.lower().endswith(_XML_PARTS))
    total = sum(m.file_size for m in members)
    # Media barely compress, so beyond the XML a real document inflates to about its size.
    if xml > cap or total > cap + len(data):
        raise ParseError(
            f"the DOCX would expand to {_mb(max(xml, total))} ({_mb(len(data))} compressed), "
            f"more than the cap of {_mb(cap)} (BRAIN__FILES__MAX_EXPANDED_BYTES); a document "
            "this size is likely a decompression bomb"
        )


def _guard_html(data: bytes, cap: int) -> None:
    if len(data) > cap:
        raise ParseError(
            f"the HTML is {_mb(len(data))}, more than the cap of {_mb(cap)} to expand into a "
            "tree (BRAIN__FILES__MAX_EXPANDED_BYTES); save the page as text or split it"
        )
    depth = 0
    for m in _TAG.finditer(data):
        name = m.group(2).lower()
        if name in _FLAT_TAGS or m.group(3):
            continue
        depth = max(0, depth - 1) if m.group(1) else depth + 1
        if depth > MAX_HTML_DEPTH:
            raise ParseError(
                f"the HTML nests elements more than {MAX_HTML_DEPTH} deep; parsing it would "
                "expand into a tree too costly to build (an HTML bomb)"
            )


_GUARDS: dict[str, Callable[[bytes, int], None]] = {"docx": _guard_docx, "html": _guard_html}

_PARSERS: dict[str, Callable[[bytes], ParsedDocument]] = {
    "pdf": _parse_pdf,  # parse_document passes it the budget
    "docx": _parse_docx,
    "html": _parse_html,
    "markdown": _parse_markdown,
    "text": _parse_text,
}
FORMATS = tuple(_PARSERS)
