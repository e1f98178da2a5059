"""Obsidian mirror: notes as markdown with YAML frontmatter, best effort, off the request path.

Files go to ``<vault>/<subfolder>/zk/ZK-XXXXXXXX.md``: through the Local REST API plugin
(``PUT {host}/vault/{path}``, bearer key) when ``obsidian.api_key`` is set, else straight into
``obsidian.vault_path``; with neither the mirror is off. A thread of its own writes them:
callers only drop a note id into a set. Failures are counted and logged, never raised.
The mirror is not durable (a note changed just before a crash may miss its rewrite until it
changes again); ``sync_all`` rewrites every note.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

Mode = Literal["rest", "folder", "off"]
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
_FRONT = (
    "zk_id",
    "title",
    "tags",
    "keywords",
    "memory_type",
    "note_kind",
    "project",
    "created",
    "updated",
    "enriched_by",
)


def render(payload: dict[str, Any]) -> str:
    """A note as markdown: YAML frontmatter, title, content, context and wikilinks."""
    links = list(payload.get("links", []))
    types = payload.get("link_types", {})
    front = {k: payload.get(k, "") for k in _FRONT}
    front["links"] = [f"[[{z}]]" for z in links]
    lines = ["---"]
    for key in (*_FRONT[:2], "tags", "links", *_FRONT[3:]):
        # JSON scalars and flow sequences are valid YAML and escape everything safely.
        lines.append(f"{key}: {json.dumps(front[key], ensure_ascii=False)}")
    lines += ["---", "", f"# {payload.get('title', '')}", "", str(payload.get("content", ""))]
    if payload.get("context"):
        lines += ["", "## Context", "", str(payload["context"])]
    if links:
        lines += ["", "## Links", ""]
        lines += [f"- {types.get(z, 'related')} [[{z}]]" for z in links]
    return "\n".join(lines) + "\n"


class ObsidianMirror:
    def __init__(
        self,
        load: Callable[[str], dict[str, Any] | None],
        *,
        api_key: str = "",
        host: str = "http://localhost:27123",
        subfolder: str = "brain",
        vault_path: str = "",
        timeout_s: float = 5.0,
    ) -> None:
        self._load = load
        self._api_key = api_key
        self._host = host.rstrip("/")
        self._subfolder = subfolder.strip("/")
        self._vault = Path(vault_path).expanduser() if vault_path else None
        self._timeout = timeout_s
        self.mode: Mode = "rest" if api_key else "folder" if vault_path else "off"
        self._pending: dict[str, bool] = {}  # zk_id -> delete?
        self._cond = threading.Condition()
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self.written = 0
        self.deleted = 0
        self.failures = 0
        self.last_error = ""

    # -- feeding ----------------------------------------------------------------------------
    def enqueue(self, zk_id: str, delete: bool = False) -> None:
        if self.mode == "off":
            return
        with self._cond:
            self._pending[zk_id] = delete
            self._cond.notify_all()

    def on_event(self, event: str, payload: dict[str, Any]) -> None:
        if event in ("added", "updated", "distilled", "restored"):
            self.enqueue(payload["zk_id"])
        elif event == "forgotten":
            self.enqueue(payload["zk_id"], delete=True)

    def sync_all(self, zk_ids: list[str]) -> None:
        for zk_id in zk_ids:
            self.enqueue(zk_id)

    # -- the thread -------------------------------------------------------------------------
    def start(self) -> None:
        if self.mode == "off" or self._thread is not None:
            return
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="obsidian-mirror", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def drain(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._stop)
                if self._stop:
                    return
                zk_id, delete = self._pending.popitem()
                self._busy = True
            try:
                self._write_one(zk_id, delete)
            except Exception as exc:  # noqa: BLE001 - best effort, counted
                self._fail(f"{zk_id}: {type(exc).__name__}: {exc}")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _write_one(self, zk_id: str, delete: bool) -> None:
        payload = None if delete else self._load(zk_id)
        rel = f"{self._subfolder}/zk/{zk_id}.md" if self._subfolder else f"zk/{zk_id}.md"
        if payload is None:
            self._remove(rel)
            self.deleted += 1
            return
        text = render(payload)
        if self.mode == "rest":
            self._put(rel, text)
        else:
            self._write_file(rel, text)
        self.written += 1

    # -- targets ----------------------------------------------------------------------------
    def _write_file(self, rel: str, text: str) -> None:
        assert self._vault is not None
        path = self._vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".zk-", suffix=".md")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _remove(self, rel: str) -> None:
        if self.mode == "rest":
            self._request("DELETE", rel, None, ok=(200, 204, 404))
        elif self._vault is not None:
            (self._vault / rel).unlink(missing_ok=True)

    def _put(self, rel: str, text: str) -> None:
        self._request("PUT", rel, text.encode("utf-8"), ok=(200, 201, 204))

    def _request(self, method: str, rel: str, body: bytes | None, ok: tuple[int, ...]) -> None:
        url = f"{self._host}/vault/{urllib.parse.quote(rel)}"
        req = urllib.request.Request(url, data=body, method=method)
        req.add_header("Authorization", f"Bearer {self._api_key}")
        if body is not None:
            req.add_header("Content-Type", "text/markdown")
        try:
            with urllib.request.urlopen(req, timeout=self._timeout, context=self._tls()) as r:
                status = r.status
        except urllib.error.HTTPError as err:
            status = err.code
        if status not in ok:
            raise OSError(f"Obsidian REST {method} answered HTTP {status}")

    def _tls(self) -> ssl.SSLContext | None:
        parts = urllib.parse.urlsplit(self._host)
        if parts.scheme != "https":
            return None
        ctx = ssl.create_default_context()
        if parts.hostname in _LOOPBACK:
            # The Local REST API plugin serves a self-signed certificate on loopback only.
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _fail(self, message: str) -> None:
        self.failures += 1
        self.last_error = message.replace(self._api_key, "***") if self._api_key else message
        log.warning("Obsidian mirror: %s", self.last_error)

    def status(self) -> dict[str, Any]:
        with self._cond:
            pending = len(self._pending)
        return {
            "mode": self.mode,
            "written": self.written,
            "deleted": self.deleted,
            "failures": self.failures,
            "pending": pending,
            "last_error": self.last_error,
        }
