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
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_.\-][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*")


def split_identifiers(text: str) -> str:
    """The sub-words of compound identifiers in ``text``, space-joined (empty if none)."""
    parts: list[str] = []
    for ident in _IDENT.findall(text):
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
