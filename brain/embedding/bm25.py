"""Client-side BM25 sparse vectors, identical for every backend.

Tokenising here (not on the server) makes Qdrant Edge and a Qdrant server rank alike. The
encoder is Qdrant's own (English stemming and stopwords); before it runs, identifiers are split
(``getUserName`` -> get user name, ``snake_case`` -> snake case) so code and prose meet.
"""

from __future__ import annotations

import re
import threading

import qdrant_edge as qe

from brain.vector_store.base import SparseVector

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# What counts as a compound identifier. On a long run of letters this regex is quadratic
# (every start re-scans the run), so it only ever sees runs of at most _SHORT_RUN chars;
# longer runs go through _scan_run, a linear scan that finds exactly the same matches.
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_.\-][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*")
# Every _IDENT match lies inside one of these runs, so matching run by run is the same.
_RUN = re.compile(r"[A-Za-z0-9_.\-]+")
_SEGMENT = re.compile(r"[A-Za-z0-9]+")
_SHORT_RUN = 64
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _scan_run(run: str) -> list[str]:
    """``_IDENT.findall(run)`` in linear time, for a run of ``[A-Za-z0-9_.-]`` chars.

    The run is alphanumeric segments joined by separators. The first alternative matches
    from any letter of a segment followed by exactly one separator and another segment,
    through the whole chain of such segments. The second matches from a lowercase letter
    whose lowercase stretch ends on an uppercase letter, to the end of its segment."""
    segments = [(m.start(), m.end()) for m in _SEGMENT.finditer(run)]
    found: list[str] = []
    k = 0
    while k < len(segments):
        start, end = segments[k]
        last = k
        while last + 1 < len(segments) and segments[last + 1][0] - segments[last][1] == 1:
            last += 1
        if last > k:  # a chain: matches from its first letter (a digit start cannot)
            first = next((i for i in range(start, end) if run[i] in _LETTERS), None)
            if first is not None:
                found.append(run[first : segments[last][1]])
                k = last + 1
                continue
            k += 1
            continue
        found.extend(_camel_matches(run, start, end))
        k += 1
    return found


def _camel_matches(run: str, start: int, end: int) -> list[str]:
    """Matches of ``[a-z]+[A-Z][A-Za-z0-9]*`` inside one segment (at most one: it runs to
    the segment's end)."""
    i = start
    while i < end:
        if run[i] not in _LOWER:
            i += 1
            continue
        j = i
        while j < end and run[j] in _LOWER:
            j += 1
        if j < end and run[j] in _UPPER:
            return [run[i:end]]
        i = j  # every start inside this lowercase stretch ends on the same non-uppercase
    return []


def _identifiers(text: str) -> list[str]:
    found: list[str] = []
    for m in _RUN.finditer(text):
        run = m.group()
        found.extend(_IDENT.findall(run) if len(run) <= _SHORT_RUN else _scan_run(run))
    return found


def split_identifiers(text: str) -> str:
    """The sub-words of compound identifiers in ``text``, space-joined (empty if none)."""
    parts: list[str] = []
    for ident in _identifiers(text):
        for piece in re.split(r"[_.\-]+", ident):
            parts.extend(_CAMEL.split(piece))
    return " ".join(p for p in parts if p)


class BM25Encoder:
    def __init__(self) -> None:
        self._local = threading.local()

    def _model(self) -> qe.Bm25:
        model = getattr(self._local, "model", None)
        if model is None:
            model = qe.Bm25(qe.Bm25Config())
            self._local.model = model
        return model

    @staticmethod
    def _prepare(text: str) -> str:
        extra = split_identifiers(text)
        return f"{text} {extra}" if extra else text

    def document(self, text: str) -> SparseVector:
        sv = self._model().embed_document(self._prepare(text))
        return SparseVector(tuple(sv.indices), tuple(sv.values))

    def query(self, text: str) -> SparseVector:
        sv = self._model().embed_query(self._prepare(text))
        return SparseVector(tuple(sv.indices), tuple(sv.values))
