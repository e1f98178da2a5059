"""Mistake memory: failures, their fixes, and a preflight check before similar work.

``record_failure`` keeps one fleeting ``mistake`` note per (project, failure_signature): the
same signature again counts an occurrence instead of writing a duplicate. The note keeps the
first occurrence and the latest different one (those between are elided), so a failure that
recurs a hundred times costs what one costs: an identical repeat only counts (no re-embed),
a changed one re-embeds a note of at most two occurrences. ``record_resolution`` stores a permanent ``fix`` note linked ``fixes`` to the
failure and promotes (distills) the failure to permanent. ``preflight_check`` finds past
mistakes, fixes and patterns relevant to a task, each mistake with its fixes attached.
Every write goes through ``MemoryService.add`` / ``update`` so secrets are redacted; the
failure signature, stored beside the content, is redacted here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from brain.clock import Clock, iso
from brain.embedding.credential import search_warnings
from brain.errors import InvalidArgument
from brain.memory import MAX_TOP_K, MemoryService, RecallFilter, check_project, check_top_k
from brain.notes import point_id
from brain.search.presentation import answer_band, band_keep
from brain.trust import tenancy
from brain.trust.limits import MAX_SIGNATURE_CHARS as MAX_SIGNATURE
from brain.trust.limits import has_text
from brain.trust.redact import redact
from brain.vector_store import Filter, Match, MatchAny, VectorStore, scroll_all

ELIDED = "\n\n[... earlier occurrences elided ...]"
_SECTION = "\n\n--- occurrence"


def _signature(value: str) -> str:
    if not isinstance(value, str) or not has_text(value):
        raise InvalidArgument(
            "failure_signature is empty: pass a short stable key for this "
            "failure, e.g. 'pytest:ImportError:qdrant_edge'",
            field="failure_signature",
        )
    value = " ".join(value.split())
    if len(value) > MAX_SIGNATURE:
        raise InvalidArgument(
            f"failure_signature is longer than {MAX_SIGNATURE} characters",
            field="failure_signature",
        )
    return value


def _sections(content: str) -> tuple[str, str]:
    """(first occurrence, latest occurrence's detail) of a mistake note's content."""
    first = content.split(_SECTION, 1)[0].removesuffix(ELIDED)
    if _SECTION not in content:
        return first, first
    return first, content.rsplit(_SECTION, 1)[1].split("---\n", 1)[-1]


def _append(content: str, detail: str, header: str, cap: int) -> str:
    """The first occurrence + the new one (the ones between elided), within cap."""
    first, _ = _sections(content)
    middle = ELIDED if _SECTION in content else ""
    section = f"{_SECTION} {header.removeprefix('occurrence ')} ---\n{detail}"
    head_room = cap - len(section) - len(middle)
    if head_room <= 0:
        return detail[:cap]
    return first[:head_room] + middle + section


class MistakeService:
    def __init__(self, memory: MemoryService, store: VectorStore, clock: Clock,
                 changed_since: Callable[[str, str | None], dict[str, Any]] | None = None,
                 ) -> None:
        self.memory = memory
        self.store = store
        self.clock = clock
        # (git ref, project) -> the caller's notes citing code changed since (brain/citations)
        self.changed_since = changed_since
        self._lock = threading.Lock()

    def _redacted_signature(self, sig: str) -> tuple[str, tuple[str, ...]]:
        """The signature is stored, payload-indexed and exported like content, so it is
        redacted like content. Redaction is deterministic: the same signature still finds
        its failure."""
        if not self.memory.cfg.redact_secrets:
            return sig, ()
        red = redact(sig)
        return red.text, red.kinds

    def find_failure(self, project: str, signature: str) -> dict[str, Any] | None:
        flt = Filter(
            must=(
                Match("kind", "note"),
                Match("note_kind", "mistake"),
                Match("project", project),
                Match("failure_signature", signature),
                MatchAny("memory_type", ("fleeting", "permanent")),
                *tenancy.conditions(self.memory.identity),  # another user's failure is not this one's
            )
        )
        # forgotten is checked here: boolean matches are not reliable on qdrant-edge-py 0.9.
        found = [
            p.payload for p in scroll_all(self.store, flt) if not p.payload.get("forgotten")
        ]
        found.sort(key=lambda p: float(p.get("created_ts") or 0))
        return found[0] if found else None

    def record_failure(self, content: str, project: str | None,
                       failure_signature: str) -> dict[str, Any]:
        project = self.memory.project_of(project)
        sig, sig_kinds = self._redacted_signature(_signature(failure_signature))
        detail, kinds = self.memory.prepare_content(content)
        kinds = tuple(sorted(set(kinds) | set(sig_kinds)))
        now = iso(self.clock.now())
        with self._lock:
            existing = self.find_failure(project, sig)
            if existing is None:
                res = self.memory.add(
                    detail,
                    project,
                    "fleeting",
                    "mistake",
                    tags=["mistake"],
                    extra={
                        "failure_signature": sig,
                        "occurrences": 1,
                        "first_seen": now,
                        "last_seen": now,
                        "resolved": False,
                        "fix_ids": [],
                    },
                )
                return {
                    "note": {**res.note, "occurrences": 1},
                    "occurrences": 1,
                    "duplicate": False,
                    "redacted": sorted(set(kinds) | set(res.redacted)),
                }
            n = int(existing.get("occurrences") or 1) + 1
            redacted: tuple[str, ...] = ()
            if " ".join(_sections(existing["content"])[1].split()) == " ".join(detail.split()):
                # The same failure again: count it; the text (and its vectors) stand.
                state = self.memory.set_state(existing["zk_id"], occurrences=n, last_seen=now)
                note = self.memory.public(state)
            else:
                merged = _append(existing["content"], detail, f"occurrence {n} at {now}",
                                 self.memory.cfg.max_content_chars)
                res = self.memory.update(existing["zk_id"], merged)
                self.memory.set_state(existing["zk_id"], occurrences=n, last_seen=now)
                note, redacted = res.note, res.redacted
        return {
            "note": {**note, "occurrences": n},
            "occurrences": n,
            "duplicate": True,
            "recurred_after_fix": bool(existing.get("resolved")),
            "redacted": sorted(set(kinds) | set(redacted)),
        }

    def record_resolution(
        self, failure_zk_id: str, fix_content: str, project: str | None = None,
        cites: Sequence[str] = (),
    ) -> dict[str, Any]:
        failure = self.memory.get_payload(failure_zk_id)
        if failure.get("note_kind") != "mistake":
            raise InvalidArgument(
                f"{failure['zk_id']} is a {failure.get('note_kind')} note, not "
                "a mistake: pass the id record_failure returned",
                field="failure_zk_id",
            )
        project = check_project(project or failure["project"])
        fid = failure["zk_id"]
        res = self.memory.add(
            fix_content,
            project,
            "permanent",
            "fix",
            tags=["fix"],
            links=[(fid, "fixes")],
            cites=cites,
            # As visible as the failure it fixes: a shared fix never names a private note.
            visibility=failure.get("visibility", tenancy.SHARED),
            extra={
                "fixes_failure": fid,
                # redacted again: a failure stored before signatures were redacted
                "failure_signature": self._redacted_signature(
                    str(failure.get("failure_signature", ""))
                )[0],
            },
        )
        fix = res.note
        if failure["memory_type"] == "fleeting":
            self.memory.distill(fid)
        fix_ids = [*self.memory.get_payload(fid).get("fix_ids", []), fix["zk_id"]]
        promoted = self.memory.set_state(
            fid, resolved=True, fix_ids=fix_ids, resolved_at=iso(self.clock.now())
        )
        return {
            "fix": fix,
            "failure": self.memory.public(
                promoted, occurrences=promoted.get("occurrences", 1), resolved=True
            ),
            "redacted": list(res.redacted),
        }

    # ------------------------------------------------------------------ preflight
    def fixes_of(self, mistake_zk: str) -> list[dict[str, Any]]:
        """Live notes linked ``fixes`` to a mistake (the store's links are the truth)."""
        flt = Filter(must=(Match("kind", "note"), Match("links", mistake_zk)))
        ids = [
            p.payload["zk_id"]
            for p in scroll_all(self.store, flt)
            if p.payload.get("link_types", {}).get(mistake_zk) == "fixes"
        ]
        return self._live(sorted(ids))

    def mistakes_fixed_by(self, fix: dict[str, Any]) -> list[dict[str, Any]]:
        return self._live(
            [ln["zk_id"] for ln in fix.get("links", []) if ln.get("relation") == "fixes"]
        )

    def _live(self, ids: list[str]) -> list[dict[str, Any]]:
        pts = self.store.retrieve([point_id(z) for z in ids])
        return [
            self.memory.public(p.payload)
            for p in pts
            if p.payload.get("kind") == "note"
            and self.memory.visible(p.payload)
            and not p.payload.get("forgotten")
            and p.payload.get("memory_type") != "archived"
        ]

    def preflight_check(
        self, task: str, project: str | None = None, top_k: int | None = None,
        changed_since: str | None = None,
    ) -> dict[str, Any]:
        """Mistakes, fixes and patterns for ``task``, up to ``top_k`` (5) of each. Without
        ``top_k``, a clear single answer (the relevance band, brain/search/presentation.py) comes
        alone. ``changed_since``: a git ref; the result also lists the notes citing code git
        reports changed since it (``changed_notes``)."""
        explicit, top_k = top_k is not None, 5 if top_k is None else top_k
        check_top_k(top_k, 50)
        if project is not None:
            project = check_project(project)
        changed = (self.changed_since(changed_since, project)
                   if changed_since is not None and self.changed_since is not None else None)
        rf = RecallFilter(
            project=project, include_fleeting=True, note_kinds=("mistake", "fix", "pattern")
        )
        hits = self.memory.search(task, min(top_k * 3, MAX_TOP_K), rf)
        band = self.memory.cfg.policy.relevance_band
        scores = [float(h.get("score", 0.0)) for h in hits]
        if band is not None:
            kept = band_keep(scores, band, explicit)
            more, hits = len(hits) - kept, hits[:kept]
        mistakes: list[dict[str, Any]] = []
        fixes: list[dict[str, Any]] = []
        patterns: list[dict[str, Any]] = []
        for hit in hits:
            kind = hit["note_kind"]
            if kind == "mistake" and len(mistakes) < top_k:
                mistakes.append({**hit, "fixes": self.fixes_of(hit["zk_id"])})
            elif kind == "fix" and len(fixes) < top_k:
                fixes.append({**hit, "fixes_mistakes": self.mistakes_fixed_by(hit)})
            elif kind == "pattern" and len(patterns) < top_k:
                patterns.append(hit)
        unresolved = [m["zk_id"] for m in mistakes if not m["fixes"]]
        return {
            "project": project,
            "mistakes": mistakes,
            "fixes": fixes,
            "patterns": patterns,
            "unresolved_mistakes": unresolved,
            "count": len(mistakes) + len(fixes) + len(patterns),
            **({"changed_since": changed_since, "changed_notes": changed["notes"],
                "changed_count": changed["count"],
                "changed_repositories": changed["repositories"]} if changed is not None
               else {}),
            **({"answer": answer_band(scores, band)} if band is not None else {}),
            **({"more_hits": more} if band is not None and more else {}),
            **({"warnings": w} if (w := search_warnings(self.memory.embedder)) else {}),
        }

