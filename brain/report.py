"""What brain_capabilities reports beside the agentic status: the reranker, the storage
backend and every part that runs degraded, each with why. Built from plain values the
composition root reads (brain/app.py), so this module depends on no service."""

from __future__ import annotations

from typing import Any

from brain.vector_store import StoreInfo


def reranker_status(reranker: Any) -> dict[str, Any]:
    return reranker.status() if reranker is not None else {"enabled": False, "order": "fusion"}


def degraded_parts(
    agentic: dict[str, Any], embedding: dict[str, Any], pending_model: str | None,
    backend: dict[str, Any],
) -> list[dict[str, str]]:
    """The parts that run degraded, each with why."""
    out: list[dict[str, str]] = []
    if not agentic["llm"]["configured"]:
        out.append({"part": "llm", "why": "no chat model configured: enrichment is "
                    "heuristic and deep_search does not rewrite queries"})
    if agentic["llm"].get("paused_by_cap"):
        out.append({"part": "llm", "why": "the daily LLM token cap is reached"})
    if embedding.get("dense") is False:
        out.append({"part": "embedding", "why": f"the embedding credential "
                    f"{embedding.get('credential_id')} is {embedding.get('credential_state')}: "
                    "semantic search is off, searches answer from keywords (BM25) only, and "
                    "writes that need a vector are refused until it works"})
    if embedding.get("paused_by_cap"):
        out.append({"part": "embedding", "why": "the daily embedding token cap is reached"})
    if pending_model:
        out.append({"part": "embedding", "why": f"a switch to {pending_model} is pending; "
                    "searches use the active model"})
    if backend["degraded"]:
        out.append({"part": "storage", "why": "the Qdrant server did not answer at start: "
                    "serving from the embedded stand-in, writes journaled"})
    return out


def capabilities(
    agentic: dict[str, Any], info: StoreInfo, embedding: dict[str, Any],
    pending_model: str | None, backend: dict[str, Any], reranker: Any,
) -> dict[str, Any]:
    """brain_capabilities: the agentic status plus the reranker, the storage backend, the
    embedding model and what runs degraded."""
    return {
        **agentic,
        "reranker": reranker_status(reranker),
        "storage": {"backend": info.backend, "location": info.location,
                    "points": info.points, **backend},
        "embedding": {k: embedding[k] for k in ("provider", "model", "dimension", "dense",
                                                 "credential_id", "credential_state",
                                                 "dense_off_reason") if k in embedding},
        "degraded": degraded_parts(agentic, embedding, pending_model, backend),
    }
