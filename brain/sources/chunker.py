"""The one chunker for all text: uploaded documents and the folder source index.

``chunk_text`` splits text into chunks of at most ``max_tokens`` tokens (as measured by
``count_tokens``), preferring to break at a paragraph (blank line), then a line break,
then a sentence end, then a word boundary, and only then cutting hard. Pieces are packed
greedily; each chunk after the first starts with about ``overlap_tokens`` of the previous
chunk's tail, aligned to a word start, so a fact straddling a boundary lands whole in one
chunk. Offsets are exact: ``text[c.start:c.end] == c.text``; chunks never start or end on
whitespace.

``chunk_text_ex`` does the same and also says whether ``max_chunks`` cut the text short.

Chunks are bounded in characters too (``max_chars``, by default ``max_tokens * 16``): a
tokenizer counts a 2,000-character "word" as one unknown token, so a token budget alone let
a document of such words make chunks of hundreds of KB (issue 13).

Token counts: pass the counter of the active embedding model (``make_token_counter``);
all-MiniLM-L6-v2 reads 256 word pieces. The default, ``approx_tokens``, is a fast
estimate: ``max(ceil(words * 1.3), ceil(chars / 4))``. English prose averages ~1.3
word pieces per word, and dense code or identifiers ~4 chars per token; taking the larger
keeps the estimate on the safe side for both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from brain.errors import InvalidArgument

__all__ = [
    "Chunk",
    "approx_tokens",
    "chunk_text",
    "chunk_text_ex",
    "line_range",
    "make_token_counter",
]

TokenCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    start: int
    end: int
    index: int


def approx_tokens(text: str) -> int:
    """Fast token estimate: ``max(ceil(words * 1.3), ceil(chars / 4))``."""
    return max(math.ceil(len(text.split()) * 1.3), math.ceil(len(text) / 4))


def make_token_counter(tokenizer: Any) -> TokenCounter:
    """Wrap a Hugging Face tokenizer (e.g. ``SentenceTransformer(...).tokenizer``)."""

    def count(text: str) -> int:
        encoded = tokenizer(text, add_special_tokens=False, verbose=False)
        return len(encoded["input_ids"])

    return count


def line_range(text: str, start: int, end: int) -> tuple[int, int]:
    """1-based (first_line, last_line) covered by ``text[start:end]``."""
    first = text.count("\n", 0, start) + 1
    return first, first + text.count("\n", start, max(start, end - 1))


# Split levels, most preferred first; the last level (hard cut) has no separator.
_SEPARATORS = (
    re.compile(r"[ \t\r\f\v]*\n[ \t\r\f\v]*\n\s*"),  # paragraph: a blank line
    re.compile(r"[ \t\r\f\v]*\n\s*"),  # line
    re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+"),  # sentence end
    re.compile(r"\s+"),  # word
)
_WORD_START = re.compile(r"(?<!\S)\S")
# No real tokenizer yields fewer tokens than chars / this, so longer spans need no count.
_MAX_CHARS_PER_TOKEN = 16

_Piece = tuple[int, int, int]  # start, end, tokens


class _Splitter:
    def __init__(self, text: str, max_tokens: int, count: TokenCounter, max_chars: int) -> None:
        self.text = text
        self.max_tokens = max_tokens
        self.count = count
        self.max_chars = max_chars

    def pieces(self, start: int, end: int, level: int = 0) -> Iterator[_Piece]:
        """Yield pieces of ``text[start:end]``, each within max_tokens, in order."""
        start, end = self._strip(start, end)
        if start >= end:
            return
        if (tokens := self._fits(start, end)) is not None:
            yield start, end, tokens
            return
        for lvl in range(level, len(_SEPARATORS)):
            parts = self._parts(start, end, _SEPARATORS[lvl])
            if len(parts) > 1:
                for part_start, part_end in parts:
                    # Most parts fit; checking here spares a generator per word.
                    if (tokens := self._fits(part_start, part_end)) is not None:
                        yield part_start, part_end, tokens
                    else:
                        yield from self.pieces(part_start, part_end, lvl)
                return
        yield from self._hard_cut(start, end)

    def _fits(self, start: int, end: int) -> int | None:
        """Token count of the span if it fits in one piece, else None."""
        if end - start > self.max_chars:
            return None
        tokens = self.count(self.text[start:end])
        return tokens if tokens <= self.max_tokens else None

    def _strip(self, start: int, end: int) -> tuple[int, int]:
        text = self.text
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        return start, end

    def _parts(self, start: int, end: int, separator: re.Pattern[str]) -> list[tuple[int, int]]:
        """Spans between separator matches; separators eat the whitespace around them."""
        parts = []
        pos = start
        for m in separator.finditer(self.text, start, end):
            if m.start() > pos:
                parts.append((pos, m.start()))
            pos = m.end()
        if pos < end:
            parts.append((pos, end))
        return parts

    def _hard_cut(self, start: int, end: int) -> Iterator[_Piece]:
        while start < end:
            # Largest prefix within max_tokens, by binary search on its length.
            lo, hi = 1, min(end - start, self.max_chars)
            best = (1, self.count(self.text[start : start + 1]))
            while lo <= hi:
                mid = (lo + hi) // 2
                tokens = self.count(self.text[start : start + mid])
                if tokens <= self.max_tokens:
                    best = (mid, tokens)
                    lo = mid + 1
                else:
                    hi = mid - 1
            yield start, start + best[0], best[1]
            start += best[0]


def _overlap_start(
    text: str, chunk_start: int, chunk_end: int, overlap_tokens: int, count: TokenCounter
) -> tuple[int, int] | None:
    """Earliest word start in the chunk's tail whose suffix fits overlap_tokens."""
    window_start = max(chunk_start + 1, chunk_end - overlap_tokens * _MAX_CHARS_PER_TOKEN)
    starts = [m.start() for m in _WORD_START.finditer(text, window_start, chunk_end)]
    if not starts:
        return None
    lo, hi = 0, len(starts) - 1
    best: tuple[int, int] | None = None
    while lo <= hi:  # suffixes shrink as the start moves right, so tokens are monotonic
        mid = (lo + hi) // 2
        tokens = count(text[starts[mid] : chunk_end])
        if tokens <= overlap_tokens:
            best = (starts[mid], tokens)
            hi = mid - 1
        else:
            lo = mid + 1
    return best


def _longest_fit(
    text: str, start: int, candidates: list[_Piece], max_tokens: int, count: TokenCounter
) -> int:
    """Index of the last candidate such that text[start:its end] fits; the first always fits.
    Candidates were cut at ``max_chars`` already, so only tokens are checked here."""
    lo, hi, best = 1, len(candidates) - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if count(text[start : candidates[mid][1]]) <= max_tokens:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def chunk_text_ex(
    text: str,
    max_tokens: int,
    overlap_tokens: int,
    count_tokens: TokenCounter | None = None,
    max_chunks: int | None = None,
    max_chars: int | None = None,
) -> tuple[list[Chunk], bool]:
    """Chunk ``text``; return (chunks, truncated) where truncated means max_chunks cut it."""
    if max_tokens < 1:
        raise InvalidArgument("max_tokens must be at least 1", max_tokens=max_tokens)
    if not 0 <= overlap_tokens < max_tokens:
        raise InvalidArgument(
            "overlap_tokens must be >= 0 and smaller than max_tokens",
            overlap_tokens=overlap_tokens,
            max_tokens=max_tokens,
        )
    if max_chunks is not None and max_chunks < 1:
        raise InvalidArgument("max_chunks must be at least 1", max_chunks=max_chunks)
    cap = max_tokens * _MAX_CHARS_PER_TOKEN if max_chars is None else max_chars
    if cap < 1:
        raise InvalidArgument("max_chars must be at least 1", max_chars=max_chars)
    count = count_tokens or approx_tokens
    source = _Splitter(text, max_tokens, count, cap).pieces(0, len(text))
    pending: list[_Piece] = []  # pieces pushed back, last one next

    def next_piece() -> _Piece | None:
        return pending.pop() if pending else next(source, None)

    chunks: list[Chunk] = []
    overlap: tuple[int, int] | None = None
    while (piece := next_piece()) is not None:
        if max_chunks is not None and len(chunks) >= max_chunks:
            return chunks, True
        start = overlap[0] if overlap else piece[0]
        if overlap and (piece[1] - start > cap or count(text[start : piece[1]]) > max_tokens):
            start = piece[0]  # overlap yields to progress; a lone piece always fits
        # Candidates: following pieces while their summed counts stay under twice the
        # budget (and their span under the char cap). Summed counts only estimate the
        # joined text's count (the default counter overcounts short pieces), so the
        # counter itself picks the cut below.
        candidates = [piece]
        estimate = piece[2] + (overlap[1] if overlap else 0)
        while (nxt := next_piece()) is not None:
            if estimate + nxt[2] > 2 * max_tokens or nxt[1] - start > cap:
                pending.append(nxt)
                break
            candidates.append(nxt)
            estimate += nxt[2]
        best = _longest_fit(text, start, candidates, max_tokens, count)
        pending.extend(reversed(candidates[best + 1 :]))
        end = candidates[best][1]
        chunks.append(Chunk(text=text[start:end], start=start, end=end, index=len(chunks)))
        overlap = (
            _overlap_start(text, start, end, overlap_tokens, count) if overlap_tokens else None
        )
    return chunks, False


def chunk_text(
    text: str,
    max_tokens: int,
    overlap_tokens: int,
    count_tokens: TokenCounter | None = None,
    max_chunks: int | None = None,
    max_chars: int | None = None,
) -> list[Chunk]:
    """Chunk ``text`` (see the module docstring); stops quietly after ``max_chunks``."""
    return chunk_text_ex(text, max_tokens, overlap_tokens, count_tokens, max_chunks, max_chars)[0]
