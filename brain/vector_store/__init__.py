"""Vector store backends behind one Protocol; :func:`build_store` picks one from settings."""

from __future__ import annotations

from pathlib import Path

from brain.vector_store.base import (
    DENSE,
    SPARSE,
    Filter,
    HasId,
    HasVector,
    Hit,
    IndexState,
    Match,
    MatchAny,
    Point,
    Range,
    SparseVector,
    StoreInfo,
    VectorStore,
    match_all,
    scroll_all,
)

__all__ = [
    "DENSE", "SPARSE", "Filter", "HasId", "HasVector", "Hit", "IndexState", "Match", "MatchAny",
    "Point", "Range",
    "SparseVector", "StoreInfo", "VectorStore", "build_store", "match_all", "scroll_all",
]


def build_store(
    *,
    home: Path,
    collection: str,
    url: str = "",
    api_key: str = "",
    prefer_grpc: bool = False,
    local_path: str = "",
    index_min_vectors: int | None = None,
    quantization: str = "none",
) -> VectorStore:
    """Qdrant Edge under ``home`` unless a server URL or a local-mode path is configured."""
    if url or local_path:
        from brain.vector_store.qdrant import QdrantClientStore

        return QdrantClientStore(
            collection, url=url, api_key=api_key, prefer_grpc=prefer_grpc, local_path=local_path,
            quantization=quantization,
        )
    from brain.vector_store.edge import EdgeStore

    return EdgeStore(home / "store" / collection, index_min_vectors=index_min_vectors,
                     quantization=quantization)
