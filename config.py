"""Configuration of opencode-brain: one root ``Settings`` with nested sections.

Precedence: explicit arguments > environment (``BRAIN__SECTION__FIELD``) > ``.env``
> legacy OpenCode Brain variable names (``QDRANT_HOST``, ``FAST_MODEL_ID``, ...) >
``brain.toml`` (in the working directory, then in the data dir) > defaults.

This module imports nothing from ``brain/``; ``brain/app.py`` is the only reader.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

ENV_PREFIX = "BRAIN__"
DEFAULT_HOME = "~/.opencode-brain"


class _Section(BaseModel):
    model_config = {"extra": "forbid", "validate_assignment": True}


class QdrantSettings(_Section):
    url: str = Field("", description="Qdrant server URL; empty = embedded Qdrant Edge in the data dir")
    api_key: str = Field("", description="API key of the Qdrant server (secret, never logged)")
    collection: str = Field("opencode_brain", description="Collection name prefix")
    prefer_grpc: bool = Field(False, description="Use gRPC to talk to the Qdrant server")
    local_path: str = Field(
        "", description="qdrant-client local mode folder (tests and debugging); excludes url"
    )
    optimizer_poll_s: float = Field(
        30.0, gt=0, le=3600,
        description="Server only: seconds between reads of the collection's optimizer runs; "
                    "each finished run is logged as vector.optimizer.completed",
    )  # fmt: skip
    optimizer_warn_after_s: float = Field(
        600.0, gt=0, description="Server only: warn once about an optimizer run still going "
                                 "after this many seconds",
    )

    @model_validator(mode="after")
    def _url_xor_local(self) -> QdrantSettings:
        if self.url and self.local_path:
            raise ValueError(
                "set either qdrant.url (a server) or qdrant.local_path (local mode), not both"
            )
        return self


class EndpointModel(_Section):
    dimension: int = Field(ge=1, le=65_536, description="Length of the vectors the model returns")
    price_per_mtok: float | None = Field(
        None, ge=0, description="USD per million input tokens (counts toward daily_usd_cap); "
                                "empty = unpriced")
    max_tokens: int = Field(0, ge=0, description="Input window in tokens; 0 = 512")
    ask_dimension: bool = Field(
        False, description="Send the dimension in each request (Matryoshka models that cut "
                           "their vectors: OpenAI text-embedding-3, Gemini, Voyage 3.5)")


class EmbeddingEndpoint(_Section):
    """One ``[embedding.endpoints.<id>]``: its models appear as ``endpoint:<id>:<model>``."""

    url: str = Field(description="Base URL: up to /v1 for OpenAI-compatible servers (Ollama, "
                                 "Qwen, vLLM, OpenAI), the API root for gemini and voyage")
    provider: Literal["openai", "ollama", "qwen", "gemini", "voyage"] = Field(
        "openai", description="The API it speaks: openai, ollama and qwen use the OpenAI "
                              "/v1/embeddings protocol; gemini and voyage their native APIs")
    models: dict[str, EndpointModel] = Field(
        default_factory=dict, description="The models it serves, by name, each with its dimension")
    auth: Literal["key", "none"] = Field(
        "key", description="key: send api_key (credential embedding.endpoint.<id>); none: no key")
    api_key: SecretStr = Field(SecretStr(""), description="The endpoint's key (secret, never "
                               "logged or shown); BRAIN__EMBEDDING__ENDPOINTS__<ID>__API_KEY")
    address: Literal["public", "private"] = Field(
        "public", description="public: must resolve to a public address; private: the "
                              "operator's statement that it is inside their network (loopback, "
                              "LAN). The address is pinned at first use; a change of class is "
                              "refused")
    enabled: bool = Field(True, description="false: its models cannot be used (refused while a "
                                            "generation uses one: ENDPOINT_IN_USE)")


class EmbeddingSettings(_Section):
    model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        description="Embedding model id (see the model registry) or a local model folder",
    )
    dimension: int = Field(0, description="Vector dimension; 0 = the model's default")
    batch_size: int = Field(64, ge=1, le=4096, description="Texts per encoding batch")
    backend: Literal["torch", "onnx", "onnx-fp32", "onnx-int8"] = Field(
        "onnx",
        description="onnx: the model exported once to ONNX and run by onnxruntime with 8-bit "
        "weights per block (cosine >= 0.999 to torch, a query embeds ~3x faster); onnx-fp32: "
        "the same graph in fp32 (torch's vectors); onnx-int8: int8 weights and activations "
        "(cosine >= 0.989 to torch); torch: sentence-transformers on PyTorch",
    )
    provider: Literal["local", "openai", "hf"] = Field(
        "local",
        description="Who embeds: local (a registry model or folder, run here); openai (any "
        "OpenAI-compatible /v1/embeddings server: Ollama, vLLM, TEI, llama.cpp, OpenAI); hf "
        "(Hugging Face Inference, feature extraction)",
    )
    base_url: str = Field(
        "",
        description="openai: the endpoint's base URL, up to /v1 (e.g. http://localhost:11434/v1); "
        "hf: an Inference Endpoint or TEI URL (empty = HF Inference Providers)",
    )
    api_key: SecretStr = Field(
        SecretStr(""),
        description="Key of the remote embedding provider (secret, never logged or shown); "
        "needed unless base_url is on loopback. hf: empty = llm.api_key when that is an HF token",
    )
    hf_provider: str = Field(
        "hf-inference", description="HF Inference Provider serving the model (provider hf)"
    )
    timeout_s: float = Field(30.0, gt=0, description="Timeout of one remote embedding request")
    deadline_s: float = Field(
        120.0, gt=0, description="Longest one remote batch may take, retries and backoff included"
    )
    max_retries: int = Field(3, ge=0, le=10, description="Retries of a failed remote batch")
    max_tokens: int = Field(
        0, ge=0, description="Input window of a remote model not in the registry; 0 = 512"
    )
    credential_retry_s: float = Field(
        30.0, ge=0, le=3600,
        description="A missing or rejected embedding key is read again (environment, .env, "
                    "brain.toml) and tried this often, seconds; meanwhile searches answer from "
                    "keywords (BM25) only",
    )  # fmt: skip
    endpoints: dict[str, EmbeddingEndpoint] = Field(
        default_factory=dict,
        description="Embedding endpoint registry ([embedding.endpoints.<id>]); a model id "
                    "endpoint:<id>:<model> embeds through one (docs/embedding.md)",
    )
    daily_usd_cap: float = Field(
        0.0, ge=0, description="Priced embedding spend per UTC day, USD (models with "
                               "price_per_mtok); once reached, embedding stops until 00:00 UTC "
                               "(sync pauses, searches answer from BM25); 0 = no cap",
    )
    daily_token_cap: int = Field(0, ge=0,
        description="Remote embedding tokens per UTC day (paid endpoints); once reached, sync and "
        "note writes pause with EMBEDDING_TOKEN_CAP_REACHED until 00:00 UTC; 0 = no cap",
    )

    rebuild_batch: int = Field(32, ge=1, le=1024,
        description="Model switch (`brain model switch`): points re-embedded per batch of the "
        "background rebuild; each batch is checkpointed",
    )
    rebuild_pause_s: float = Field(0.2, ge=0, le=60,
        description="Model switch: least pause after a rebuild batch during which tool calls "
        "came in (an idle brain rebuilds without pauses); 0 = never yield",
    )
    rebuild_busy_share: float = Field(
        0.25, gt=0, le=1, description="Model switch: share of the time a rebuild works while "
        "tool calls come in (it pauses batch time x (1 - share) / share after each batch)",
    )

    @model_validator(mode="after")
    def _remote_needs_url(self) -> EmbeddingSettings:
        if self.provider == "openai" and not self.base_url:
            raise ValueError(
                "embedding.provider = openai needs embedding.base_url (BRAIN__EMBEDDING__BASE_URL),"
                " e.g. http://localhost:11434/v1"
            )
        return self


class MemorySettings(_Section):
    max_content_chars: int = Field(
        50_000, ge=100, description="Largest note content accepted, in characters"
    )
    link_threshold: float = Field(
        0.55, ge=0.0, le=1.0, description="Cosine similarity above which permanent notes link"
    )
    link_candidates: int = Field(5, ge=1, le=50, description="Nearest notes considered for links")
    redact_secrets: bool = Field(
        True, description="Replace secret-shaped strings in written content by a marker"
    )
    default_project: str = Field("general", description="Project used when a call names none")
    workspace_project: bool = Field(
        True,
        description="A stdio note tool call that names no project works on its client's "
        "workspace project (MCP roots, else the git work tree the server started in; named "
        "as the hooks name it); default_project only when there is none",
    )
    relevance_band: float = Field(0.4, gt=0, lt=1,
        description="A search answers 'single' when its second hit scores at most (1 - this) "
                    "of the top hit's fused score, else 'many'; a 'single' answer is returned "
                    "alone unless top_k / limit is given (every search tool)",
    )
    hype_questions: int = Field(3, ge=0, le=10,
        description="Hypothetical questions (HyPE) the chat model writes per permanent note in "
                    "the background, stored as extra vectors that searches match to the note; "
                    "0 disables. Needs a configured LLM",
    )
    hype_question_chars: int = Field(
        200, ge=20, le=1000, description="Longest hypothetical question kept, in characters",
    )
    snippet_chars: int = Field(
        240, ge=40, le=4000,
        description="Content characters in a compact search hit (detail=compact, the default)",
    )
    session_context: bool = Field(
        False,
        description="A note added after open_session records the previous note the same agent "
        "added in that session and project as its neighbour (thread_prev, scored by "
        "retrieval.neighbour_weight); never as its context. For transcripts, where "
        "consecutive notes are one conversation",
    )
    pool_long_text: bool = Field(
        True,
        description="Encode a note longer than the model's window as the mean of its "
        "window-sized pieces (false: the model reads only the first ~256 tokens)",
    )


class RetrievalSettings(_Section):
    fusion: Literal["dbsf", "rrf", "weighted", "dense", "bm25"] = Field(
        "dbsf",
        description="How dense and BM25 rankings are fused: dbsf (score distributions, "
        "default), rrf (plain reciprocal rank), weighted, or one leg alone (dense, bm25)",
    )
    rrf_k: int = Field(60, ge=1, description="k of reciprocal rank fusion")
    dense_weight: float = Field(
        0.45, ge=0.0, le=1.0, description="Weight of the dense leg in dbsf and weighted fusion"
    )
    code_dense_weight: float = Field(
        0.8,
        ge=0.0,
        le=1.0,
        description="Weight of the dense leg when the candidates are source code (a mix moves "
        "between the two weights by its share of code)",
    )
    candidates: int = Field(50, ge=5, le=1000, description="Candidates fetched per retriever")
    adaptive_weight: bool = Field(True,
        description="dbsf: choose the dense weight per query from its two legs (BM25's margin, "
        "the legs' agreement, their spreads; brain/search/adaptive.py, fitted on the benchmarks' "
        "dev halves), moving dense_weight; false: dense_weight for every query",
    )
    neighbour_weight: float = Field(0.0, ge=0.0, le=1.0,
        description="A note's fused score gains this share of its best session neighbour's "
        "(the note before or after it, recorded with memory.session_context; 0 = off)",
    )
    keyword_lead: float = Field(0.05, ge=0.0, le=1.0,
        description="BM25's first hit ranks first when it leads BM25's second by this share "
        "of its score and the fusion weighs BM25 at least as much as meaning (0 = off)",
    )
    relative_floor: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="search_memory, search_files and fs_search drop a hit whose fused score is "
        "below this share of the best hit's (0 = keep all); the best match is always returned",
    )
    relevance_floor: bool = Field(
        False,
        description="Every search answers nothing (answer: none) when no hit is relevant: the "
        "best cosine plus a share of keyword coverage under the embedding model's calibrated "
        "threshold. Off by default: fitted on LoCoMo it hid a third of the coding-notes "
        "set's answerable queries (BENCHMARKS.md, Relevant or nothing). Models without a "
        "calibration are not judged unless relevance_threshold is set; a call with its own "
        "confidence_min (0 = all) is never judged",
    )
    relevance_threshold: float | None = Field(
        None,
        ge=-1.0,
        le=2.0,
        description="The relevance floor's threshold (None: the active model's calibration; "
        "0.49 for all-MiniLM-L6-v2)",
    )
    graph_decay: float = Field(
        0.85,
        gt=0.0,
        le=1.0,
        description="deep_search: a note reached through a typed link (caused_by, fixes, "
        "supports, ...) scores its parent's score times this",
    )
    related_decay: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="deep_search: the same for a 'related' link (what auto-linking writes) "
        "and for a note only a later hop's expanded query found",
    )
    exact_max_points: int = Field(
        20_000, ge=0, description="Scopes with at most this many points are searched exactly"
    )


class RerankSettings(_Section):
    enabled: bool = Field(
        False, description="Rerank fused candidates (local: load the cross-encoder at start or "
        "refuse to start; http: ask a rerank server, keeping the fused order when it fails)"
    )
    provider: Literal["local", "http"] = Field(
        "local", description="local: a sentence-transformers cross-encoder folder (model); http: "
        "a rerank server (url) speaking the shared rerank protocol (llama.cpp, vLLM, TEI, Jina)"
    )
    model: str = Field("", description="local: the cross-encoder's folder; http: the model name "
                                        "sent to the server (optional)")
    url: str = Field("", description="http: the rerank endpoint, e.g. "
                                     "http://127.0.0.1:8080/v1/rerank or http://tei:80/rerank")
    api_key: SecretStr = Field(
        SecretStr(""), description="http: bearer key of the rerank server (secret, never logged "
        "or shown)")
    timeout_s: float = Field(2.0, gt=0, le=30, description="http: longest one rerank request "
                                                           "may take; past it the fused order is kept")
    candidates: int = Field(30, ge=1, le=200, description="Fused candidates reranked")


class LLMSettings(_Section):
    base_url: str = Field("", description="OpenAI-compatible endpoint (Ollama, llama.cpp, vLLM)")
    api_key: str = Field("", description="Token of the endpoint or of HF Inference Providers")
    provider: str = Field("auto", description="HF Inference Provider of the fast model")
    hard_provider: str = Field(
        "", description="Where the hard model runs: an HF Inference Provider name, or the URL of "
                        "its own OpenAI-compatible server; empty: the fast model's"
    )
    fast_model: str = Field("Qwen/Qwen3-4B-Instruct-2507", description="Fast model id")
    hard_model: str = Field("Qwen/Qwen3-30B-A3B-Instruct-2507", description="Hard model id")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout, seconds")
    max_retries: int = Field(2, ge=0, le=10, description="Retries with backoff per request")
    daily_token_cap: int = Field(0, ge=0, description="Tokens per UTC day; 0 = no cap")
    enrichment: bool = Field(
        True, description="Run LLM enrichment in the background when a model is configured"
    )
    backfill: bool = Field(
        True, description="At start, queue notes still heuristic that never had an LLM job"
    )
    job_max_attempts: int = Field(4, ge=1, le=20, description="Tries per enrichment job")
    job_backoff_s: float = Field(30.0, ge=0, description="First retry delay of a failed job")
    evolve_threshold: float = Field(
        0.6, ge=0, le=1, description="Link similarity above which the older note evolves"
    )


class DecaySettings(_Section):
    stale_days: int = Field(45, ge=1, description="Days without access before a note is stale")
    stale_accesses: int = Field(2, ge=0, description="Accesses that make a note immune")
    score_threshold: float = Field(0.3, ge=0, le=1, description="decay_score below which to archive")
    half_life_days: float = Field(30.0, gt=0, description="Salience half-life in days (decays on read)")
    importance_cap: int = Field(
        10, ge=1, description="Accesses at which access importance reaches 1 (log scale)"
    )


class ForgetSettings(_Section):
    grace_days: float = Field(7.0, ge=0, description="Days a forgotten note can be restored")


class WorkerSettings(_Section):
    enabled: bool = True
    interval_s: float = Field(3600.0, gt=0)


def _default_workers() -> dict[str, WorkerSettings]:
    return {
        "decay": WorkerSettings(enabled=True, interval_s=6 * 3600),
        "reclamation": WorkerSettings(enabled=True, interval_s=3600),
        "enrichment": WorkerSettings(enabled=True, interval_s=1.0),
        "snapshot": WorkerSettings(enabled=True, interval_s=6 * 3600),
        "index": WorkerSettings(enabled=True, interval_s=30.0),
    }


class ObsidianSettings(_Section):
    api_key: str = Field("", description="Obsidian Local REST API key (empty = REST off)")
    host: str = Field("http://localhost:27123", description="Obsidian Local REST API URL")
    subfolder: str = Field("brain", description="Folder in the vault for notes")
    vault_path: str = Field("", description="Write straight into this vault folder instead")
    timeout_s: float = Field(5.0, gt=0, description="Timeout of one Local REST API request")


class GraphSettings(_Section):
    path: str = Field("", description="Graph cache file; empty = <home>/graph.json")


class IdentitySettings(_Section):
    user_id: str = Field("default", description="Caller's user id stamped on every point")
    agent_id: str = Field("default", description="Caller's agent id stamped on every point")


class FilesSettings(_Section):
    max_bytes: int = Field(50 * 1024 * 1024, ge=1, description="Largest uploaded document")
    chunk_tokens: int = Field(0, ge=0, description="Chunk size in tokens; 0 = model max")
    overlap_tokens: int = Field(32, ge=0, description="Overlap between chunks, tokens")
    max_chunks: int = Field(1024, ge=1, description="Chunks per file at most")
    embed_batch: int = Field(64, ge=1, le=1024, description="Chunks embedded per batch")
    embed_retries: int = Field(3, ge=0, le=10, description="Retries of a failed embedding batch")
    retry_backoff_s: float = Field(
        0.5, ge=0, description="First retry delay, seconds; doubles on each retry"
    )
    keep_raw: bool = Field(
        False,
        description="Keep uploaded documents' raw bytes (files/blobs); off: only the parsed, "
        "redacted text is kept and the bytes are deleted once parsed",
    )
    max_expanded_bytes: int = Field(
        16 * 1024 * 1024, ge=1024,
        description="Largest text a document may expand to before parsing: the XML parts of "
        "a DOCX (from its zip directory, before inflating) or an HTML file; larger ones fail",
    )  # fmt: skip
    max_chunk_chars: int = Field(
        4000, ge=100, description="Longest chunk in characters, whatever its token count"
    )
    process_timeout_s: float = Field(
        300.0, gt=0, le=86_400,
        description="Deadline for indexing one file; past it the file is marked failed",
    )  # fmt: skip
    max_attempts: int = Field(
        3, ge=1, le=20,
        description="Starts that resume a file left processing by a crash before it is failed",
    )  # fmt: skip


class SyncSettings(_Section):
    concurrency: int = Field(2, ge=1, le=16, description="Sync jobs run at once")
    max_scan_files: int = Field(200_000, ge=1, description="Files walked per source at most")
    debounce_s: float = Field(0.3, ge=0, description="Watcher debounce before a targeted sync")
    poll_interval_s: float = Field(60.0, gt=0, description="Scheduler poll of interval sources")
    embed_batch: int = Field(
        64, ge=1, le=4096, description="Chunks per embedding call in a sync (cancel checks)"
    )
    grep_timeout_s: float = Field(10.0, gt=0, description="Deadline of an fs_search grep, seconds")
    auto: Literal["on", "off", "packages-only"] = Field(
        "on",
        description="Background sync of every source: on (watcher and timers run), off (manual "
                    "sync only) or packages-only (only pinned sources, by default those holding "
                    "skills, rules, agents or a package manifest); manual sync works in every mode",
    )  # fmt: skip


class HealthSettings(_Section):
    gc_enabled: bool = Field(True, description="Run the scheduled garbage collection")
    gc_interval_s: float = Field(
        86_400.0, ge=60,
        description="Seconds between scheduled GC runs (daily); the first comes one interval "
                    "after start, never at boot",
    )  # fmt: skip
    hot_file_threshold: int = Field(
        30, ge=1, description="Writes of one source file within the window that make it hot"
    )
    hot_file_window_s: float = Field(
        3600.0, gt=0, le=86_400, description="Rolling window of the hot-file write count, seconds"
    )
    hot_files_max: int = Field(
        200, ge=1, le=10_000, description="Files tracked per project at most (oldest dropped)"
    )
    duplicate_threshold: float = Field(
        0.97, gt=0, le=1,
        description="Cosine similarity at or above which two notes or chunks are duplicates",
    )  # fmt: skip
    sample_ids: int = Field(20, ge=1, le=500, description="Ids a health report shows per finding")


class FsSettings(_Section):
    max_read_bytes: int = Field(
        262_144, ge=1024, le=20 * 1024 * 1024,
        description="Largest file fs_read returns (and preview_change shows), bytes",
    )
    max_write_bytes: int = Field(
        1_048_576, ge=1024, le=5 * 1024 * 1024, description="Largest content fs_write accepts, bytes"
    )
    list_limit: int = Field(1000, ge=1, le=20_000, description="Entries one fs_list returns at most")
    index_timeout_s: float = Field(
        30.0, gt=0, le=600,
        description="How long fs_write waits for its file to be indexed before returning",
    )


class IndexSettings(_Section):
    enabled: bool = Field(
        True, description="Optimize the store's index by itself (the index worker decides when)"
    )
    min_unindexed: int = Field(
        5000, ge=1, description="Optimize once this many dense vectors are outside the HNSW index"
    )
    max_segments: int = Field(16, ge=1, description="Optimize when the store has more segments")
    max_deleted_share: float = Field(0.2, gt=0, le=1, description="Optimize when deleted points "
                                     "exceed this share of all")
    quantization: Literal["none", "int8"] = Field("int8", description="Dense vector "
        "quantization of a new store (int8: searched as int8, rescored with the originals on "
        "disk; none: float32 only); an existing store keeps its own until "
        "the health tool's quantization action switches it")  # fmt: skip


class StorageSettings(_Section):
    min_free_mb: float = Field(
        64.0, ge=0,
        description="Free space kept on the data dir's disk: writes (and start) below it are "
                    "refused with DISK_FULL, never a crash",
    )
    snapshots_keep: int = Field(
        3, ge=1, description="Store snapshots kept in <home>/snapshots (newest; see brain restore)"
    )


class PathsSettings(_Section):
    allowed_roots: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="Folders whose files callers may add as sources or upload: a path, an "
        "OS path list (/srv/code:/data) or a JSON list. Recorded in the data dir, so every "
        "process on it agrees; unset = the recorded roots, else the user's home over stdio "
        "and the CLI, nothing over HTTP. /, /proc, /sys, /dev and the data dir are always "
        "refused",
    )

    @field_validator("allowed_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: Any) -> Any:
        if isinstance(value, str):
            return split_roots(value)
        if isinstance(value, list):
            _absolute([str(v).strip() for v in value])
        return value


def split_roots(text: str) -> list[str]:
    """A JSON list, or one path, or paths joined by os.pathsep; every one absolute."""
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list of paths ({exc.msg}); write e.g. "
                             f'["/srv/code"], or a plain path list /srv/code{os.pathsep}/data'
                             ) from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError('a JSON list of path strings, e.g. ["/srv/code"]')
        parts = [v.strip() for v in value]
    else:
        parts = [p.strip() for p in text.split(os.pathsep)] if text else []
    return _absolute([p for p in parts if p])


def _absolute(parts: list[str]) -> list[str]:
    for part in parts:
        if part and not os.path.isabs(os.path.expanduser(part)):
            raise ValueError(f"{part!r} is not an absolute path; give absolute folders, "
                             f"one path or several joined by {os.pathsep!r}")
    return parts


class SourcesSettings(_Section):
    workspace: Literal["auto", "off"] = Field(
        "auto",
        description="auto: the folder a stdio client names as its workspace (MCP roots, "
        "else the git work tree the server started in) becomes a source of its project on "
        "the first tool call, within the allowed roots; off: sources are only added by hand",
    )


class UISettings(_Section):
    enabled: bool = Field(False, description="The owner of the data dir also serves the web "
                          "explorer (docs/ui.md); `brain ui` serves it on demand")
    host: Literal["127.0.0.1", "::1", "localhost"] = Field("127.0.0.1",
                                                          description="Loopback address only")
    port: int = Field(8766, ge=0, le=65535, description="Port of the web explorer (0 = any)")


class LogSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level")


# Legacy OpenCode Brain `.env` names -> (section, field). QDRANT_HOST/PORT are folded into a URL.
LEGACY_ALIASES: dict[str, tuple[str, str]] = {
    "QDRANT_COLLECTION": ("qdrant", "collection"),
    "EMBEDDING_MODEL": ("embedding", "model"),
    "HUGGINGFACE_API_KEY": ("llm", "api_key"),
    "FAST_MODEL_ID": ("llm", "fast_model"),
    "FAST_MODEL_PROVIDER": ("llm", "provider"),
    "HARD_MODEL_ID": ("llm", "hard_model"),
    "HARD_MODEL_PROVIDER": ("llm", "hard_provider"),
    "OBSIDIAN_API_KEY": ("obsidian", "api_key"),
    "OBSIDIAN_HOST": ("obsidian", "host"),
    "OBSIDIAN_VAULT_SUBFOLDER": ("obsidian", "subfolder"),
    "STALE_DAYS_THRESHOLD": ("decay", "stale_days"),
    "STALE_ACCESS_THRESHOLD": ("decay", "stale_accesses"),
    "GRAPH_PATH": ("graph", "path"),
}


def _legacy_values(env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (section, field) in LEGACY_ALIASES.items():
        if env.get(name):
            out.setdefault(section, {})[field] = env[name]
    if env.get("QDRANT_HOST") or env.get("QDRANT_PORT"):
        host = env.get("QDRANT_HOST") or "localhost"
        port = env.get("QDRANT_PORT") or "6333"
        url = host if host.startswith(("http://", "https://")) else f"http://{host}"
        out.setdefault("qdrant", {})["url"] = f"{url}:{port}"
    return out


def _read_dotenv(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


class _LegacySource(PydanticBaseSettingsSource):
    """Maps the OpenCode Brain variable names onto their fields (env and .env)."""

    def __init__(self, settings_cls: type[BaseSettings], env_file: Path | None) -> None:
        super().__init__(settings_cls)
        self._env_file = env_file

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        env = _read_dotenv(self._env_file) if self._env_file else {}
        env.update({k: v for k, v in os.environ.items() if k in LEGACY_ALIASES or k.startswith("QDRANT_")})
        return _legacy_values(env)


class _TomlSource(PydanticBaseSettingsSource):
    """``brain.toml`` in the working directory, then in the data dir (first wins per key)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for _, data in _toml_files():
            _deep_update(merged, data)
        return merged


def _toml_files() -> list[tuple[Path, dict[str, Any]]]:
    """``brain.toml`` in the data dir, then in the working directory (later wins), parsed."""
    home = Path(os.environ.get(f"{ENV_PREFIX}HOME", DEFAULT_HOME)).expanduser()
    out = []
    for path in (home / "brain.toml", Path.cwd() / "brain.toml"):
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"{path} is not valid TOML: {exc}") from exc
            out.append((path.resolve(), data))
    return out


def _deep_update(base: dict[str, Any], new: dict[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_update(base[key], value)
        else:
            base[key] = value


class McpSettings(_Section):
    tools: Literal["core", "full"] = Field(
        "core",
        description="Tool profile the MCP server lists: core (the coding-agent session tools, "
        "about 4,500 tokens) or full (adds the admin tools: health, sources, changes, fs, "
        "files, model, brain_capabilities). Every admin action is also a `brain` command",
    )


class Settings(BaseSettings):
    """Every setting of the brain. Environment: ``BRAIN__SECTION__FIELD``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
        validate_assignment=True,
    )

    home: Path = Field(Path(DEFAULT_HOME), description="Data directory of the brain")
    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    decay: DecaySettings = Field(default_factory=DecaySettings)
    forget: ForgetSettings = Field(default_factory=ForgetSettings)
    workers: dict[str, WorkerSettings] = Field(default_factory=_default_workers)
    obsidian: ObsidianSettings = Field(default_factory=ObsidianSettings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    files: FilesSettings = Field(default_factory=FilesSettings)
    sync: SyncSettings = Field(default_factory=SyncSettings)
    fs: FsSettings = Field(default_factory=FsSettings)
    paths: PathsSettings = Field(default_factory=PathsSettings)
    sources: SourcesSettings = Field(default_factory=SourcesSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    ui: UISettings = Field(default_factory=UISettings)

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("workers", mode="before")
    @classmethod
    def _fill_workers(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        merged: dict[str, Any] = {k: v.model_dump() for k, v in _default_workers().items()}
        for name, conf in value.items():
            conf = conf.model_dump() if isinstance(conf, BaseModel) else conf
            if isinstance(conf, dict):
                merged[name] = {**merged.get(name, {}), **conf}
            else:
                merged[name] = conf
        return merged

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env_file = Path(".env")
        return (
            init_settings,
            env_settings,
            DotEnvSettingsSource(settings_cls, env_file=env_file, env_prefix=ENV_PREFIX,
                                 env_nested_delimiter="__"),
            _LegacySource(settings_cls, env_file),
            _TomlSource(settings_cls),
        )

    @property
    def graph_path(self) -> Path:
        return Path(self.graph.path).expanduser() if self.graph.path else self.home / "graph.json"

    def redacted(self) -> dict[str, Any]:
        """The settings with every secret replaced, for logs and stats."""
        data = self.model_dump(mode="json")
        for section, field in (("qdrant", "api_key"), ("llm", "api_key"), ("obsidian", "api_key")):
            if data[section][field]:
                data[section][field] = "***"
        return data


def current_secret(path: str) -> str:
    """A secret setting by its dotted path (``embedding.api_key``,
    ``embedding.endpoints.<id>.api_key``) as its sources say now, in their order (environment,
    .env, brain.toml), for a key set after start; "" when none sets it. Read from the sources
    themselves, so a key given alone (its endpoint's other fields in brain.toml) still counts."""
    parts = path.split(".")
    env = ENV_PREFIX + "__".join(p.upper() for p in parts)
    value = os.environ.get(env) or _read_dotenv(Path(".env")).get(env)
    if value:
        return value
    try:
        found: Any = _TomlSource(Settings)()
        for part in parts:
            found = found.get(part) if isinstance(found, dict) else None
    except ValueError:
        return ""
    return found if isinstance(found, str) else ""


class ConfigInvalid(ValueError):
    """Raised by :func:`load_settings`; the message names each bad field and the fix.

    ``str()`` is ``[CONFIG_INVALID] message``, the code of ``brain.errors.ConfigError`` (this
    module imports nothing from ``brain/``), so every door that prints it shows the code."""

    code = "CONFIG_INVALID"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


def _choices(model: Any) -> list[str]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted(model.model_fields)
    return []


def _unknown_at(path: list[str]) -> tuple[int, list[str]] | None:
    """Where ``path`` (``["memory", "max_content_chars"]``) leaves the settings: the index of
    the first name no section or field has, with the names it could have been; None when
    every name exists. A dict section (``workers``, ``endpoints``) takes any key, then its
    model's fields; a field that is not a section takes its value whole."""
    model: Any = Settings
    i = 0
    while i < len(path):
        names = _choices(model)
        if not names:
            return None
        field = model.model_fields.get(path[i])
        if field is None:
            return i, names
        ann = field.annotation
        i += 1
        if typing.get_origin(ann) is dict:
            ann = typing.get_args(ann)[1]
            i += 1  # the dict's key: any name
        model = ann
    return None


def _did_you_mean(name: str, names: list[str], shown: typing.Callable[[str], str]) -> str:
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f"did you mean {shown(close[0])}?"
    more = ", ..." if len(names) > 12 else ""
    return "the names there are " + ", ".join(names[:12]) + more + "."


def _env_problem(name: str, origin: str) -> str | None:
    """A ``BRAIN__...`` variable no setting has, said with its origin and the likely one."""
    parts = name[len(ENV_PREFIX):].lower().split("__")
    found = _unknown_at(parts)
    if found is None:
        return None
    i, names = found
    what = "section" if i == 0 and len(parts) > 1 else "setting"

    def shown(candidate: str) -> str:
        return ENV_PREFIX + "__".join(p.upper() for p in [*parts[:i], candidate, *parts[i + 1:]])

    return (f"unknown {what} {parts[i].upper()} in {name} ({origin}): "
            f"{_did_you_mean(parts[i], names, shown)}")


def _toml_problems(path: Path, data: dict[str, Any], prefix: list[str]) -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        keys = [*prefix, str(key).lower()]
        found = _unknown_at(keys)
        if found is not None:
            i, names = found
            where = "[" + ".".join(keys[:i]) + "]" if i else "the top level"
            if i == 0 and isinstance(value, dict):
                what, hint = f"section [{keys[0]}]", _did_you_mean(keys[0], names,
                                                                    lambda n: f"[{n}]")
            else:
                what = f"setting {keys[i]!r} in {where}"
                hint = _did_you_mean(keys[i], names, repr)
            out.append(f"unknown {what} of {path}: {hint}")
        elif isinstance(value, dict):
            out.extend(_toml_problems(path, value, keys))
    return out


def unknown_settings() -> list[str]:
    """Every name the environment, ``.env`` and ``brain.toml`` give that no setting has, one
    message each naming where it came from and the setting it likely meant. A misspelled
    section or variable would otherwise be ignored without a word."""
    problems: list[str] = []
    for name in sorted(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            problems.append(_env_problem(name.upper(), "environment") or "")
    dotenv = Path(".env")
    for name in _read_dotenv(dotenv):
        if name.upper().startswith(ENV_PREFIX):
            problems.append(_env_problem(name.upper(), f"{dotenv.resolve()}") or "")
    for path, data in _toml_files():
        problems.extend(_toml_problems(path, data, []))
    return [p for p in problems if p]


def load_settings(**overrides: Any) -> Settings:
    """Build Settings, turning validation errors into one message naming field and fix.
    A name no setting has (``[memroy]``, ``BRAIN__MEMROY__X``) is refused first."""
    try:
        unknown = unknown_settings()
    except ValueError as exc:  # a brain.toml that is not TOML
        raise ConfigInvalid(f"invalid configuration: {exc}") from None
    if unknown:
        raise ConfigInvalid("; ".join(unknown) + " Rename or remove it (every setting: "
                            "docs/configuration.md); nothing was changed.")
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = [str(p) for p in err["loc"]]
            dotted = ".".join(loc)
            env = ENV_PREFIX + "__".join(p.upper() for p in loc)
            lines.append(
                f"setting {dotted} = {err.get('input')!r}: {err['msg']}. "
                f"Fix it in the environment ({env}), .env or brain.toml."
            )
        raise ConfigInvalid("invalid configuration:\n  " + "\n  ".join(lines)) from None
    except ValueError as exc:
        raise ConfigInvalid(f"invalid configuration: {exc}") from None
