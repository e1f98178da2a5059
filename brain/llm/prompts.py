"""Prompts for note enrichment and tolerant parsing of the model's JSON replies.

Every function returns ``None`` when the model failed or replied with something unusable;
the caller counts that as a fallback to heuristic enrichment. Replies are accepted inside
```json fences, after prose, after ``<think>`` blocks, with trailing commas, and with
fields of the wrong type where a sensible reading exists.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

from brain.errors import LLMError

log = logging.getLogger(__name__)

RELATIONS = (
    "related",
    "supports",
    "contradicts",
    "extends",
    "fixes",
    "caused_by",
    "supersedes",
)

TITLE_MAX = 80
_CONTENT_CHARS = 4000  # per note in a prompt; keeps small models inside their context
_CANDIDATE_CHARS = 600


class Router(Protocol):
    def complete(self, messages: list[dict[str, Any]], tier: Any, max_tokens: int = ...) -> str: ...


@dataclass(frozen=True, slots=True)
class NoteFields:
    title: str
    context: str
    keywords: list[str]
    tags: list[str]


@dataclass(frozen=True, slots=True)
class MergedNote:
    content: str
    title: str
    context: str
    keywords: list[str]
    tags: list[str]


@dataclass(frozen=True, slots=True)
class Evolution:
    context: str
    keywords: list[str] | None
    tags: list[str] | None


# -- prompts --------------------------------------------------------------------------------

_SYSTEM = "You maintain a Zettelkasten memory for a coding agent. Reply with JSON only."

_CONSTRUCT = """Turn this memory into a note.
Reply with JSON only: {{"title": "...", "context": "...", "keywords": ["..."], "tags": ["..."]}}
- title: one atomic claim, at most 80 characters
- context: one or two sentences on when and why this matters
- keywords: 5-10 specific terms from the content
- tags: 2-5 lowercase kebab-case categories

Memory:
{content}"""

_LINKS = """A new note was added. Decide which candidate notes it should link to.
Relations: {relations}.
Reply with JSON only: {{"links": [{{"id": "ZK-...", "relation": "..."}}]}}
Link only where the connection is real; an empty list is fine.

New note {note}

Candidates:
{candidates}"""

_EVOLVE = """A new note relates to an older note. Rewrite the OLD note's context so it reflects
what the new note adds. Change keywords or tags only if they should change.
Reply with JSON only: {{"context": "...", "keywords": ["..."] or null, "tags": ["..."] or null}}

New note {new}

Old note {old}"""

_MERGE = """These notes say overlapping things. Merge them into one note that keeps every
distinct fact.
Reply with JSON only: {{"content": "...", "title": "...", "context": "...",
"keywords": ["..."], "tags": ["..."]}}
- title: one atomic claim, at most 80 characters; tags: lowercase kebab-case

Notes:
{notes}"""


# -- public functions -----------------------------------------------------------------------


def construct_note(router: Router, content: str) -> NoteFields | None:
    prompt = _CONSTRUCT.format(content=content[:_CONTENT_CHARS])
    data = _ask(router, prompt, "fast", 400)
    if data is None:
        return None
    title = _title(data.get("title"))
    keywords = _terms(data.get("keywords"), limit=10)
    if not title or not keywords:
        return None
    return NoteFields(
        title=title,
        context=_text(data.get("context")),
        keywords=keywords,
        tags=_tags(data.get("tags")),
    )


def decide_links(
    router: Router, note: dict[str, Any], candidates: list[dict[str, Any]]
) -> list[tuple[str, str]] | None:
    if not candidates:
        return []
    listing = "\n".join(_describe(c, _CANDIDATE_CHARS) for c in candidates)
    prompt = _LINKS.format(
        relations=", ".join(RELATIONS),
        note=_describe(note, _CONTENT_CHARS),
        candidates=listing,
    )
    data = _ask(router, prompt, "fast", 400)
    if data is None:
        return None
    raw = data.get("links", data.get("link"))
    if raw is None:
        return None
    known = {str(c.get("zk_id")) for c in candidates}
    links: list[tuple[str, str]] = []
    for item in raw if isinstance(raw, list) else [raw]:
        parsed = _link(item)
        if parsed and parsed[0] in known and parsed[0] not in {z for z, _ in links}:
            links.append(parsed)
    return links


def evolve_context(
    router: Router, new_note: dict[str, Any], old_note: dict[str, Any]
) -> Evolution | None:
    prompt = _EVOLVE.format(
        new=_describe(new_note, _CONTENT_CHARS), old=_describe(old_note, _CONTENT_CHARS)
    )
    data = _ask(router, prompt, "hard", 500)
    if data is None:
        return None
    context = _text(data.get("context"))
    if not context:
        return None
    keywords = _terms(data.get("keywords"), limit=10) or None
    tags = _tags(data.get("tags")) or None
    return Evolution(context=context, keywords=keywords, tags=tags)


def synthesize_merge(router: Router, notes: list[dict[str, Any]]) -> MergedNote | None:
    if not notes:
        return None
    listing = "\n\n".join(_describe(n, _CONTENT_CHARS // max(1, len(notes))) for n in notes)
    data = _ask(router, _MERGE.format(notes=listing), "hard", 1200)
    if data is None:
        return None
    content = _text(data.get("content"))
    title = _title(data.get("title"))
    if not content or not title:
        return None
    return MergedNote(
        content=content,
        title=title,
        context=_text(data.get("context")),
        keywords=_terms(data.get("keywords"), limit=10),
        tags=_tags(data.get("tags")),
    )


# -- calling and parsing --------------------------------------------------------------------


def _ask(router: Router, prompt: str, tier: str, max_tokens: int) -> dict[str, Any] | None:
    messages = [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": prompt},
    ]
    try:
        reply = router.complete(messages, tier, max_tokens=max_tokens)
    except LLMError as error:
        log.info("LLM %s call unavailable (%s); falling back", tier, error.code)
        return None
    data = parse_json_object(reply)
    if data is None:
        log.info("LLM %s reply was not usable JSON; falling back", tier)
    return data


_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def parse_json_object(reply: Any) -> dict[str, Any] | None:
    """The first JSON object in a model reply, or None."""
    if not isinstance(reply, str):
        return None
    text = _THINK.sub("", reply).strip()
    for block in [*_FENCE.findall(text), text]:
        found = _first_object(block)
        if found is not None:
            return found
    return None


def _first_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        end = _matching_brace(text, start)
        if end == -1:
            return None
        candidate = text[start : end + 1]
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                value = json.loads(attempt)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
        start = text.find("{", start + 1)
    return None


def _matching_brace(text: str, start: int) -> int:
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


# -- field cleaning -------------------------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list):
        return " ".join(_text(v) for v in value if isinstance(v, str | int | float)).strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def _title(value: Any) -> str:
    title = _text(value).strip(" \"'#*")
    if len(title) <= TITLE_MAX:
        return title
    cut = title[: TITLE_MAX - 1].rsplit(" ", 1)[0].rstrip(" ,;:-")
    return (cut or title[: TITLE_MAX - 1]) + "…"


def _terms(value: Any, limit: int) -> list[str]:
    if isinstance(value, str):
        value = re.split(r"[,;\n]", value)
    if not isinstance(value, list):
        return []
    seen: dict[str, str] = {}
    for item in value:
        term = _text(item).strip(" \"'#")
        if term and term.lower() not in seen:
            seen[term.lower()] = term
    return list(seen.values())[:limit]


def _tags(value: Any) -> list[str]:
    tags: list[str] = []
    for term in _terms(value, limit=20):
        tag = re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")
        if tag and tag not in tags:
            tags.append(tag)
    return tags[:5]


def _link(item: Any) -> tuple[str, str] | None:
    if isinstance(item, str):
        return item.strip(), "related"
    if isinstance(item, list | tuple) and item:
        zk_id = str(item[0]).strip()
        relation = str(item[1]) if len(item) > 1 else "related"
    elif isinstance(item, dict):
        raw_id = item.get("id", item.get("zk_id", item.get("target")))
        if raw_id is None:
            return None
        zk_id = str(raw_id).strip()
        relation = str(item.get("relation", item.get("type", "related")))
    else:
        return None
    relation = relation.strip().lower().replace("-", "_").replace(" ", "_")
    return zk_id, relation if relation in RELATIONS else "related"


def _describe(note: dict[str, Any], limit: int) -> str:
    parts = [f"[{note.get('zk_id', '')}]", _text(note.get("title"))]
    context = _text(note.get("context"))
    if context:
        parts.append(f"(context: {context})")
    content = str(note.get("content") or "")[:limit]
    return " ".join(p for p in parts if p) + f"\n{content}".rstrip()
