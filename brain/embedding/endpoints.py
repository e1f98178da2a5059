"""The embedding endpoint registry (seed 000): ``[embedding.endpoints.<id>]`` entries, each with
its URL, the API it speaks, its models (dimension, optional price), its authentication and its
address class; a model of one is named ``endpoint:<id>:<model>``.

- **Protocols.** openai, ollama and qwen speak the OpenAI ``/v1/embeddings`` protocol
  (brain/embedding/remote.py's transport); gemini and voyage their native APIs
  (brain/embedding/native.py).
- **Authentication.** ``auth = "key"``: the entry's ``api_key`` (a secret setting, read like
  every other: environment, .env, brain.toml) is the credential ``embedding.endpoint.<id>``;
  missing or rejected, the server still starts and searches answer from BM25
  (brain/embedding/credential.py). ``auth = "none"``: no key is sent.
- **Address class.** ``public``: every address the host resolves to must be public (a global
  address); ``private``: the operator's statement that it is inside their network (loopback,
  LAN, link-local). The address is pinned at first use and every request connects to it; the
  host resolving into the other class later is refused (``ENDPOINT_ADDRESS_CLASS``).
- **In use.** An endpoint whose model is the active generation's or a rebuild's target
  cannot be removed, disabled or renamed: the start refuses with ``ENDPOINT_IN_USE`` before it
  opens (so writes) anything.
- **Price.** ``price_per_mtok`` counts toward ``[embedding] daily_usd_cap``.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from brain.embedding.base import ModelRecord
from brain.embedding.remote import (
    DEFAULT_MAX_TOKENS,
    OpenAITransport,
    RemoteEmbedder,
    RemoteEndpoint,
)
from brain.errors import (
    EndpointAddressRefused,
    EndpointInUse,
    ModelUnavailable,
    UnsupportedEmbeddingDimension,
)

# An entry: config.EmbeddingEndpoint ([embedding.endpoints.<id>]), handed in by app.py; only
# its fields are read here (url, provider, models, auth, api_key, address, enabled).
EmbeddingEndpoint = Any

log = logging.getLogger(__name__)

PREFIX = "endpoint:"
OPENAI_COMPATIBLE = ("openai", "ollama", "qwen")
Resolver = Callable[[str], list[str]]


def parse(model_id: str) -> tuple[str, str] | None:
    """(endpoint id, model name) of ``endpoint:<id>:<model>``; None for another id."""
    if not model_id.startswith(PREFIX):
        return None
    rest = model_id[len(PREFIX):]
    eid, sep, model = rest.partition(":")
    if not sep or not eid or not model:
        raise ModelUnavailable(f"{model_id!r} is not endpoint:<id>:<model>",
                               model=model_id)
    return eid, model


def _entry(endpoints: Mapping[str, EmbeddingEndpoint], model_id: str) -> tuple[str, str, Any]:
    parsed = parse(model_id)
    assert parsed is not None
    eid, model = parsed
    entry = endpoints.get(eid)
    if entry is None:
        raise ModelUnavailable(
            f"no embedding endpoint {eid!r} for {model_id}: add [embedding.endpoints.{eid}] "
            f"(known: {sorted(endpoints) or 'none'})", model=model_id, endpoint=eid)
    if not entry.enabled:
        raise ModelUnavailable(f"the embedding endpoint {eid!r} is disabled; enable it to use "
                               f"{model_id}", model=model_id, endpoint=eid)
    if model not in entry.models:
        raise ModelUnavailable(
            f"the embedding endpoint {eid!r} lists no model {model!r} (it lists "
            f"{sorted(entry.models) or 'none'}); add [embedding.endpoints.{eid}.models."
            f"\"{model}\"] with its dimension", model=model_id, endpoint=eid)
    return eid, model, entry


def record(model_id: str, dimension: int, endpoints: Mapping[str, EmbeddingEndpoint]
           ) -> ModelRecord:
    """The record of an endpoint model: its dimension is the registry's (no guessing)."""
    _, model, entry = _entry(endpoints, model_id)
    spec = entry.models[model]
    if dimension and dimension != spec.dimension:
        raise UnsupportedEmbeddingDimension(
            f"{model_id} returns {spec.dimension}-dimensional vectors (its registry entry); "
            f"BRAIN__EMBEDDING__DIMENSION={dimension} does not match: set 0 or change the entry",
            model=model_id, dimension=dimension)
    return ModelRecord(id=model_id, provider="endpoint", dimension=spec.dimension,
                       supported_dimensions=(spec.dimension,),
                       max_seq_length=spec.max_tokens or DEFAULT_MAX_TOKENS)


def check_in_use(endpoints: Mapping[str, EmbeddingEndpoint], in_use: Mapping[str, str]) -> None:
    """Refuse (``ENDPOINT_IN_USE``) when a model a generation uses (``in_use``: role ->
    model id) names an endpoint that was removed (or renamed), disabled, or lost the model."""
    for role, model_id in in_use.items():
        parsed = parse(model_id) if model_id else None
        if parsed is None:
            continue
        eid, model = parsed
        entry = endpoints.get(eid)
        why = ("is gone from [embedding.endpoints] (removed or renamed)" if entry is None
               else "is disabled" if not entry.enabled
               else f"no longer lists the model {model!r}" if model not in entry.models else "")
        if why:
            raise EndpointInUse(
                f"the embedding endpoint {eid!r} {why}, but it serves {model_id}, the {role}. "
                f"Nothing was opened or written: restore [embedding.endpoints.{eid}] as it was, "
                "or first switch the index to another model (brain model switch) and let the "
                "rebuild finish.", endpoint=eid, model=model_id, role=role)


# ------------------------------------------------------------------------------- address


def resolve(host: str) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})


def address_class(ip: str) -> str:
    """public (a global address) or private (loopback, LAN, link-local, CGNAT...)."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    return "public" if addr.is_global else "private"


class AddressPin:
    """The endpoint's address: every address of its host checked against the declared class,
    the first one pinned at first use and connected to from then on; a later resolution into
    the other class is refused."""

    def __init__(self, endpoint_id: str, url: str, klass: str,
                 resolver: Resolver = resolve) -> None:
        self.endpoint_id = endpoint_id
        self.host = urlsplit(url).hostname or ""
        self.klass = klass
        self._resolve = resolver
        self._lock = threading.Lock()
        self.pinned: str | None = None

    def __call__(self) -> str:
        try:
            ips = self._resolve(self.host)
        except OSError as exc:
            if self.pinned is not None:
                return self.pinned  # the pinned address stands; DNS may be briefly down
            raise EndpointAddressRefused(
                f"the embedding endpoint {self.endpoint_id!r} ({self.host}) does not resolve: "
                f"{exc}", endpoint=self.endpoint_id) from None
        wrong = [ip for ip in ips if address_class(ip) != self.klass]
        with self._lock:
            if wrong or not ips:
                what = "now resolves" if self.pinned else "resolves"
                raise EndpointAddressRefused(
                    f"the embedding endpoint {self.endpoint_id!r} ({self.host}) {what} to "
                    f"{', '.join(wrong) or 'nothing'}, outside its address class "
                    f"{self.klass!r}{f' (pinned {self.pinned})' if self.pinned else ''}; "
                    "nothing was sent. Check the host, or declare the endpoint's address "
                    f"class ([embedding.endpoints.{self.endpoint_id}] address).",
                    endpoint=self.endpoint_id, addresses=ips, address_class=self.klass)
            if self.pinned is None:
                self.pinned = ips[0]
                log.info("embedding endpoint %s: %s pinned to %s (%s)", self.endpoint_id,
                         self.host, self.pinned, self.klass)
            return self.pinned


# ------------------------------------------------------------------------------- embedder


def build(record_: ModelRecord, endpoints: Mapping[str, EmbeddingEndpoint],
          base: RemoteEndpoint | None, resolver: Resolver = resolve) -> RemoteEmbedder:
    """The embedder of an endpoint model: the entry's URL, key, price and pinned address on
    the shared remote settings (timeouts, retries, caps) of ``base``."""
    eid, model, entry = _entry(endpoints, record_.id)
    spec = entry.models[model]
    base = base or RemoteEndpoint()
    secrets = base.secrets
    ep = replace(
        base, base_url=entry.url.rstrip("/"), api_key=SecretStr(entry.api_key.get_secret_value()),
        credential=f"embedding.endpoint.{eid}", price_per_mtok=spec.price_per_mtok,
        send_key=entry.auth == "key", key_required=entry.auth == "key",
        pin=AddressPin(eid, entry.url, entry.address, resolver),
        key_source=(lambda: secrets(f"embedding.endpoints.{eid}.api_key")) if secrets else None,
    )

    def transport_for(e: RemoteEndpoint) -> Any:
        if entry.provider in OPENAI_COMPATIBLE:
            return OpenAITransport(record_, e, model=model, ask_dimension=spec.ask_dimension)
        from brain.embedding.native import GeminiTransport, VoyageTransport

        cls = GeminiTransport if entry.provider == "gemini" else VoyageTransport
        return cls(record_, e, model=model, ask_dimension=spec.ask_dimension)

    return RemoteEmbedder(record_, transport_for(ep), ep, transport_for)


def in_use_models(active: str, rebuild_target: str | None) -> dict[str, str]:
    """The models the generations use, by role, for :func:`check_in_use`."""
    out = {"active model": active}
    if rebuild_target:
        out["rebuild target"] = rebuild_target
    return out


def endpoint_models(endpoints: Mapping[str, EmbeddingEndpoint]) -> Iterable[str]:
    """Every model id the registry offers (enabled endpoints), for listings."""
    for eid, entry in sorted(endpoints.items()):
        if entry.enabled:
            for model in sorted(entry.models):
                yield f"{PREFIX}{eid}:{model}"
