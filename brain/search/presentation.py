"""Token-lean search results: the compact form of a note hit.

Search tools return compact hits by default (``detail="compact"``): the id, title, score, a
snippet of bounded length (carrying on after the title when the title is the content's
opening words), tags, project, kind, date and the number of links, plus whatever the search
itself added (a deep_search hop, the fixes of a mistake). ``memory_type`` is left out when it
is "permanent". ``detail="full"`` or ``get_note`` gives the
whole note. The LoCoMo token measurement (``python -m bench --only tokens``) compares the two.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Detail = Literal["compact", "full"]

# The fields of a full note a compact hit leaves out: the content (kept as a snippet),
# the enrichment and bookkeeping an agent rarely needs to pick a note (``matched``, which
# legs found it, is for the web explorer and detail="full").
_DROPPED = frozenset({
    "content", "context", "keywords", "links", "updated", "access_count", "last_accessed",
    "salience", "enriched_by", "agent_id", "similarity", "rerank_score", "matched",
})
# Lists of notes nested in a hit or a page (preflight's fixes, a fix's mistakes, results).
_NESTED = ("results", "mistakes", "fixes", "patterns", "fixes_mistakes", "changed_notes")


def answer_band(scores: list[float], band: float) -> str:
    """``"single"`` when the top hit stands clear of the rest: it is the only one, or the
    second scores at most ``(1 - band)`` of the top's fused score; ``"none"`` when no hit
    answers (brain/search/relevance.py, or nothing in scope); else ``"many"``. The gap is
    read after the filters, on the scores the page shows.

    Two hits are always "many": the default fusion (dbsf) maps a leg's candidates by their
    mean +- 3 standard deviations, so a pool of two scores 2/3 and 1/3 whatever they are,
    and their gap says nothing. A brain of two notes answered every search with one of them
    alone (the older of two decisions on one subject, the newer hidden in ``more_hits``)."""
    if not scores:
        return "none"
    if len(scores) == 1:
        return "single"
    if len(scores) < 3 or scores[0] <= 0:
        return "many"
    return "single" if scores[1] <= (1.0 - band) * scores[0] else "many"


def band_keep(scores: Sequence[float], band: float, explicit: bool) -> int:
    """How many of the leading hits belong to the answer. THE RULE (every search tool): a
    clear single answer (:func:`answer_band` says "single") is returned alone, unless the
    caller asked for a number of results (top_k / limit) explicitly; otherwise all of them."""
    if explicit or answer_band(list(scores), band) != "single":
        return len(scores)
    return min(1, len(scores))


def search_page(page: dict[str, Any], band: float, *, explicit: bool = True,
                warnings: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A search tool's page: ``answer`` (single | many) from the relevance band, which also
    decides membership (:func:`band_keep`: the hits it leaves out are counted in
    ``more_hits``, and an explicit top_k / limit shows them), and ``warnings`` about how the
    search ran (the dense legs off, brain/embedding/credential.py)."""
    hits = page.get("results")
    out = dict(page)
    if isinstance(hits, list):
        scores = [float(h.get("score", 0.0)) for h in hits if isinstance(h, dict)]
        out["answer"] = answer_band(scores, band)
        keep = band_keep(scores, band, explicit)
        if keep < len(hits):
            out["results"], out["more_hits"] = hits[:keep], len(hits) - keep
            if "count" in out:
                out["count"] = keep
    if warnings:
        out["warnings"] = [*out.get("warnings", ()), *warnings]
    return out


def with_answer(page: dict[str, Any], band: float) -> dict[str, Any]:
    """The page with its relevance band (``answer``: single | many), every hit kept."""
    return search_page(page, band)


def snippet(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, marked with "…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def _snippet_after_title(title: str, content: str, limit: int) -> str:
    """The snippet of a hit: when the title is the content's opening words (a derived
    title), the snippet carries on after it rather than repeat them."""
    head = " ".join(title.rstrip("…").split())
    text = " ".join(content.split())
    if head and text.startswith(head):
        # the sentence the title ended goes on, or the title was all but its closing
        # punctuation (nothing to add: it read "…." before)
        rest = text[len(head):].lstrip(" .,;:!?")
        return ("…" + snippet(rest, limit)) if re.search(r"\w", rest) else ""
    return snippet(text, limit)


def compact_note(note: dict[str, Any], snippet_chars: int) -> dict[str, Any]:
    """The compact hit of one public note (see the module docstring)."""
    out: dict[str, Any] = {}
    for key, value in note.items():
        if key in _DROPPED:
            continue
        if key in _NESTED and isinstance(value, list):
            out[key] = [compact_note(v, snippet_chars) if isinstance(v, dict) else v
                        for v in value]
        elif key == "pinned" and not value:
            continue
        else:
            out[key] = value
    out["snippet"] = _snippet_after_title(str(note.get("title", "")),
                                          str(note.get("content", "")), snippet_chars)
    if out.get("memory_type") == "permanent":
        del out["memory_type"]  # the usual case; fleeting or contextual hits still say so
    if isinstance(note.get("links"), list):
        out["links"] = len(note["links"])
    return out


def snippet_around(text: str, query: str, limit: int) -> str:
    """About ``limit`` characters of ``text`` around the first query word found in it (the
    start when none is), marked with "…" where cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    lower = text.lower()
    found = [i for w in re.findall(r"\w{3,}", query.lower()) if (i := lower.find(w)) >= 0]
    at = min(found) if found else 0
    start = max(0, min(at - limit // 3, len(text) - limit))
    cut = text[start:start + limit].strip()
    return ("…" if start else "") + cut + ("…" if start + limit < len(text) else "")


def compact_passage(hit: dict[str, Any], snippet_chars: int, query: str = "") -> dict[str, Any]:
    """A document passage (search_files, include_files) with its excerpt cut to a snippet
    around the query's words."""
    if not isinstance(hit.get("excerpt"), str):
        return hit
    return {**hit, "excerpt": snippet_around(hit["excerpt"], query, snippet_chars)}


def present(page: dict[str, Any], detail: Detail, snippet_chars: int,
            passages: bool = False, query: str = "") -> dict[str, Any]:
    """A result page in the requested detail: its note lists (or, with ``passages``, its
    document passages) compacted, the rest as is. ``files`` (include_files) are passages."""
    if detail == "full":
        return page
    out = dict(page)
    for key in _NESTED:
        items = page.get(key)
        if isinstance(items, list):
            out[key] = [(compact_passage(n, snippet_chars, query) if passages
                         else compact_note(n, snippet_chars)) if isinstance(n, dict) else n
                         for n in items]
    if isinstance(page.get("files"), list):
        out["files"] = [compact_passage(f, snippet_chars, query) if isinstance(f, dict) else f
                        for f in page["files"]]
    out["detail"] = "compact"
    return out


def _no_warnings() -> Sequence[dict[str, Any]]:
    return ()


@dataclass(frozen=True)
class ResultPages:
    """The result page of every search tool, built once by the app (brain/app.py): it holds
    the relevance band and the snippet size, and asks ``warnings`` how the search ran (the
    dense legs off: brain/embedding/credential.py) when it makes a page."""

    band: float
    snippet_chars: int
    warnings: Callable[[], Sequence[dict[str, Any]]] = _no_warnings

    def search(self, page: dict[str, Any], detail: Detail, *, explicit: bool,
               passages: bool = False, query: str = "") -> dict[str, Any]:
        """A search page: the band's answer and membership (:func:`search_page`, the hits
        it leaves out shown when ``explicit``), the warnings, then ``detail``
        (:func:`present`)."""
        out = search_page(page, self.band, explicit=explicit, warnings=self.warnings())
        return present(out, detail, self.snippet_chars, passages=passages, query=query)

    def present(self, page: dict[str, Any], detail: Detail) -> dict[str, Any]:
        """A page that picked its own members (preflight_check) in the requested detail."""
        return present(page, detail, self.snippet_chars)
