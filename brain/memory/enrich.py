"""Offline, deterministic enrichment: a claim-like title, 5-10 keywords and 2-5 tags.

Used when no LLM is configured, and as the immediate enrichment on the write path while the
LLM pass runs in the background.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "down", "during", "each", "else", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "like", "may", "me", "might", "more", "most", "must", "my", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "use", "used", "uses", "using", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "via", "get", "gets", "got", "set", "sets", "one", "two", "new", "make", "makes", "need", "needs", "want", "should", "shall", "still", "yet", "per", "etc", "e", "g", "ie", "eg"]
)

# Keyword -> tag. Small on purpose: tags are coarse, searchable categories.
TAG_RULES: dict[str, tuple[str, ...]] = {
    "python": ("python", "pip", "pytest", "venv", "django", "flask", "fastapi", "pydantic"),
    "javascript": ("javascript", "node", "npm", "typescript", "react", "vite", "webpack"),
    "database": ("sql", "postgres", "postgresql", "mysql", "sqlite", "database", "redis", "qdrant",
                 "index", "query", "migration"),
    "devops": ("docker", "compose", "kubernetes", "k8s", "deploy", "ci", "pipeline", "nginx",
               "port", "server"),
    "testing": ("test", "tests", "testing", "pytest", "fixture", "mock", "assert"),
    "performance": ("slow", "latency", "performance", "speed", "memory", "cache", "fast", "p50"),
    "security": ("secret", "token", "auth", "password", "key", "security", "tls", "permission"),
    "bug": ("bug", "error", "fail", "failure", "crash", "exception", "traceback", "broken"),
    "config": ("config", "configuration", "env", "setting", "settings", "toml", "yaml"),
    "git": ("git", "branch", "commit", "merge", "rebase"),
    "llm": ("llm", "model", "embedding", "embeddings", "prompt", "rag", "qwen", "openai"),
    "api": ("api", "http", "endpoint", "rest", "request", "response", "json"),
}

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+#.\-]*[A-Za-z0-9+#]|[A-Za-z]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True, slots=True)
class Enrichment:
    title: str
    context: str
    keywords: list[str]
    tags: list[str]


def make_title(content: str, limit: int = 80) -> str:
    text = " ".join(content.split())
    first = _SENTENCE_END.split(text, maxsplit=1)[0].strip() or text
    if len(first) <= limit:
        return first.rstrip(".")
    cut = first[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def content_words(text: str) -> list[str]:
    """The words of ``text`` that say something, lower-cased, in order (repeats kept): no stop
    words, numbers or words of one or two letters."""
    words = (w.lower().strip(".-") for w in _WORD.findall(text))
    return [w for w in words if len(w) > 2 and w not in STOPWORDS and not w.isdigit()]


def keywords_of(text: str, max_n: int = 10, min_n: int = 5) -> list[str]:
    words = content_words(text)
    counts = Counter(words)
    first_pos: dict[str, int] = {}
    for i, w in enumerate(words):
        first_pos.setdefault(w, i)
    ranked = sorted(counts, key=lambda w: (-counts[w], first_pos[w]))
    out = ranked[:max_n]
    if len(out) < min_n:
        # Short notes: fall back to shorter words so there is something to search by.
        extra = [w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS]
        for w in extra:
            if w not in out:
                out.append(w)
            if len(out) >= min_n:
                break
    return out


def tags_of(keywords: list[str], text: str, note_kind: str, max_n: int = 5) -> list[str]:
    lowered = set(keywords) | {w.lower() for w in _WORD.findall(text)}
    tags: list[str] = []
    for tag, triggers in TAG_RULES.items():
        if lowered.intersection(triggers):
            tags.append(tag)
    tags = tags[: max_n - 1]
    if note_kind not in tags:
        tags.insert(0, note_kind)
    for kw in keywords:
        if len(tags) >= 2:
            break
        slug = re.sub(r"[^a-z0-9]+", "-", kw.lower()).strip("-")
        if slug and slug not in tags:
            tags.append(slug)
    return tags[:max_n]


# A line that is only a heading ("Key files:") or an empty list's placeholder ("- (none)"):
# a template's words, not the note's (a session summary's "Key files:" tagged it security).
_TEMPLATE_LINE = re.compile(r"^\s*(?:[A-Z][A-Za-z ]{1,30}:|-\s*\(none\))\s*$", re.M)


def enrich(content: str, note_kind: str = "general", project: str = "") -> Enrichment:
    said = _TEMPLATE_LINE.sub("", content)
    keywords = keywords_of(said)
    title = make_title(content)
    context = f"{note_kind.replace('_', ' ').capitalize()} note" + (f" in {project}" if project else "")
    return Enrichment(title=title, context=context, keywords=keywords,
                      tags=tags_of(keywords, said, note_kind))
