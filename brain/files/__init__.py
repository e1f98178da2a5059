"""Uploaded documents ("brain files"): parsing now; storage and indexing build on it."""

from brain.files.parsers import (
    ParsedDocument,
    detect_format,
    page_for_offset,
    parse_document,
)

__all__ = ["ParsedDocument", "detect_format", "page_for_offset", "parse_document"]
