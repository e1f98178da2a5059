"""The shared chunker: exact offsets, token budgets, overlap and split preferences."""

from __future__ import annotations

import pytest

from brain.errors import InvalidArgument
from brain.sources.chunker import (
    Chunk,
    approx_tokens,
    chunk_text,
    chunk_text_ex,
    line_range,
    make_token_counter,
)


def words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def word_count(text: str) -> int:
    return len(text.split())


def assert_exact(text: str, chunks: list[Chunk]) -> None:
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text == chunk.text.strip()
    starts = [c.start for c in chunks]
    assert starts == sorted(starts)


def test_offsets_exact_and_sizes_within_budget() -> None:
    text = "\n\n".join(
        f"Paragraph {p}. "
        + " ".join(f"Sentence {s} of paragraph {p} says things." for s in range(p))
        for p in range(1, 30)
    )
    chunks = chunk_text(text, max_tokens=60, overlap_tokens=10)
    assert len(chunks) > 5
    assert_exact(text, chunks)
    assert all(approx_tokens(c.text) <= 60 for c in chunks)
    # All content is covered: every word of the text appears in some chunk.
    covered = set().union(*(range(c.start, c.end) for c in chunks))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_custom_counter_is_respected() -> None:
    text = words(500)
    chunks = chunk_text(text, max_tokens=50, overlap_tokens=0, count_tokens=word_count)
    assert [word_count(c.text) for c in chunks] == [50] * 10
    assert_exact(text, chunks)


def test_overlap_repeats_previous_tail_on_word_boundary() -> None:
    text = words(300)
    chunks = chunk_text(text, max_tokens=40, overlap_tokens=8, count_tokens=word_count)
    assert len(chunks) > 1
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert prev.start < nxt.start < prev.end  # overlap present
        overlap = text[nxt.start : prev.end]
        assert 1 <= word_count(overlap) <= 8
        assert text[nxt.start - 1] == " "  # starts on a word boundary
        assert prev.text.endswith(overlap)
    assert chunks[-1].end == len(text)


def test_no_overlap_when_zero() -> None:
    text = words(200)
    chunks = chunk_text(text, max_tokens=30, overlap_tokens=0, count_tokens=word_count)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.start > prev.end


def test_paragraph_breaks_are_preferred() -> None:
    paragraphs = [words(20, prefix=f"p{i}_") for i in range(6)]
    text = "\n\n".join(paragraphs)
    # Two paragraphs (40 words) fit, a third does not; mid-paragraph cuts would fit more.
    chunks = chunk_text(text, max_tokens=50, overlap_tokens=0, count_tokens=word_count)
    assert [c.text for c in chunks] == ["\n\n".join(paragraphs[i : i + 2]) for i in range(0, 6, 2)]


def test_sentence_boundary_before_word_boundary() -> None:
    sentence = "This sentence has exactly eight words in it."
    text = " ".join([sentence] * 6)
    chunks = chunk_text(text, max_tokens=20, overlap_tokens=0, count_tokens=word_count)
    assert all(c.text.endswith(".") for c in chunks)
    assert_exact(text, chunks)


def test_hard_cut_for_a_huge_token_without_spaces() -> None:
    blob = "x" * 5000
    text = f"intro words here\n\n{blob}\n\noutro"
    chunks = chunk_text(text, max_tokens=100, overlap_tokens=10)
    assert_exact(text, chunks)
    assert all(approx_tokens(c.text) <= 100 for c in chunks)
    assert sum(c.text.count("x") for c in chunks) >= 5000
    assert chunks[-1].text.endswith("outro")


def test_max_chunks_stops_and_reports_truncation() -> None:
    text = words(1000)
    chunks, truncated = chunk_text_ex(text, 20, 0, count_tokens=word_count, max_chunks=3)
    assert len(chunks) == 3 and truncated
    assert chunk_text(text, 20, 0, count_tokens=word_count, max_chunks=3) == chunks
    everything, truncated = chunk_text_ex(text, 20, 0, count_tokens=word_count, max_chunks=50)
    assert len(everything) == 50 and not truncated


def test_empty_and_whitespace_text() -> None:
    assert chunk_text("", 10, 2) == []
    assert chunk_text("  \n\n \t ", 10, 2) == []
    assert chunk_text("  hello  ", 10, 2) == [Chunk("hello", 2, 7, 0)]


@pytest.mark.parametrize(
    ("max_tokens", "overlap", "max_chunks"),
    [(0, 0, None), (10, 10, None), (10, -1, None), (10, 2, 0)],
)
def test_bad_arguments_raise(max_tokens: int, overlap: int, max_chunks: int | None) -> None:
    with pytest.raises(InvalidArgument):
        chunk_text("some text", max_tokens, overlap, max_chunks=max_chunks)


def test_approx_tokens_takes_larger_estimate() -> None:
    assert approx_tokens("one two three four five six seven eight nine ten") == 13
    assert approx_tokens("a" * 400) == 100


def test_line_range() -> None:
    text = "l1\nl2\nl3\nl4\n"
    start = text.index("l2")
    assert line_range(text, start, text.index("l3") + 2) == (2, 3)
    assert line_range(text, 0, 3) == (1, 1)  # a trailing newline stays on its line
    assert line_range(text, start, start + 2) == (2, 2)


class WordTokenizer:
    """Stands in for a Hugging Face tokenizer: same call shape, one id per word."""

    def __call__(self, text: str, add_special_tokens: bool = True, verbose: bool = True) -> dict:
        ids = [1] * len(text.split())
        return {"input_ids": ([101] + ids + [102]) if add_special_tokens else ids}


def test_make_token_counter_excludes_special_tokens() -> None:
    count = make_token_counter(WordTokenizer())
    assert count("three little words") == 3
    chunks = chunk_text(words(100), 25, 5, count_tokens=count)
    assert all(count(c.text) <= 25 for c in chunks)
