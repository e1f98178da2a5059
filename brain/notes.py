"""The note: payload schema, ids and enums (the OpenCode Brain schema plus tenancy and stamps)."""

from __future__ import annotations

import re
import secrets
import uuid
from typing import Any

from brain.citation import summary as citation_summary

MEMORY_TYPES = ("fleeting", "permanent", "archived")
NOTE_KINDS = (
    "mistake", "fix", "pattern", "research", "decision", "general",
    "open_thread", "session_summary", "project_context",
)
CONTEXTUAL_KINDS = ("open_thread", "session_summary", "project_context")
RELATIONS = ("related", "supports", "contradicts", "extends", "fixes", "caused_by", "supersedes")
VISIBILITIES = ("shared", "private")

ZK_ID_RE = re.compile(r"^ZK-[0-9A-F]{8}$")
_NAMESPACE = uuid.UUID("6f1c7a52-8c4e-4b8e-9d0b-3a1f2a6c9e11")

# Fields every stored note has; check_schema_health and the migrations use this.
REQUIRED_FIELDS: dict[str, type | tuple[type, ...]] = {
    "kind": str, "zk_id": str, "title": str, "content": str, "context": str,
    "keywords": list, "tags": list, "links": list, "link_types": dict,
    "memory_type": str, "note_kind": str, "pinned": bool, "project": str,
    "created": str, "updated": str, "access_count": int, "last_accessed": str,
    "user_id": str, "agent_id": str, "salience": (int, float), "embed_model": str,
    "enriched_by": str, "forgotten": bool,
}


def new_zk_id() -> str:
    return "ZK-" + secrets.token_hex(4).upper()


def point_id(zk_id: str) -> str:
    """The store's point id of a note: a UUID derived from its zk_id."""
    return str(uuid.uuid5(_NAMESPACE, zk_id))


def normalise_zk_id(value: str) -> str:
    value = value.strip().upper()
    if not value.startswith("ZK-"):
        value = "ZK-" + value
    return value


def public_note(payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The fields a tool returns for a note."""
    return {
        "zk_id": payload.get("zk_id"),
        "title": payload.get("title", ""),
        "content": payload.get("content", ""),
        "context": payload.get("context", ""),
        "keywords": payload.get("keywords", []),
        "tags": payload.get("tags", []),
        "links": [
            {"zk_id": z, "relation": payload.get("link_types", {}).get(z, "related")}
            for z in payload.get("links", [])
        ],
        "project": payload.get("project"),
        "memory_type": payload.get("memory_type"),
        "note_kind": payload.get("note_kind"),
        "pinned": payload.get("pinned", False),
        "created": payload.get("created"),
        "updated": payload.get("updated"),
        "access_count": payload.get("access_count", 0),
        "last_accessed": payload.get("last_accessed", ""),
        "salience": round(float(payload.get("salience", 0.0)), 4),
        "enriched_by": payload.get("enriched_by"),
        "agent_id": payload.get("agent_id"),
        # The code it cites, compactly: state, how many fresh, which changed or gone.
        **({"citations": citation_summary(payload["cites"])} if payload.get("cites") else {}),
        **extra,
    }
