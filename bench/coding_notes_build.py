"""Build the coding-notes set (bench/data/coding_notes.json) from psf/requests' history.

The notes look like this brain's users' work on a real repository: what a later task would
find in a coding agent's memory of psf/requests, derived deterministically from the project's
own record at one pinned commit:

- ``decision`` notes: the changelog entries (HISTORY.md) that state a choice (Improvements,
  Features, Deprecations, Behavioural/API changes, Dependencies, ...), with their release;
- ``mistake`` notes: the failure a Bugfixes / Security entry describes ("Fixed a bug where X"
  gives the mistake "X"), and a ``fix`` note per such entry (what was done, in which release),
  linked to its mistake (``fixes``). A Bugfixes entry whose failure cannot be told apart from
  its fix is a ``fix`` note alone;
- ``project_context`` notes: what each module of ``src/requests`` does (its docstring) and
  the classes and functions it defines, stored as add_memory's ``general`` kind (what an agent
  writes with add_memory; search_memory leaves the contextual kinds out unless asked);
- ``session_summary`` (handoff-like) notes: one per release with at least three entries,
  "completed" = that release's entries in short, "next" = the next release's. Stored as
  ``session_summary``; a question about a handoff passes ``filters.include_contextual``
  (the query's ``filters``), as an agent looking for a past handoff would.

A note's ``kind`` says what it is, its ``note_kind`` what add_memory is given.

Queries are what a later task would ask: a template per note kind over the note's key terms
(at most one identifier, none in half of the questions: the asker remembers the topic, not
the name; then the words a few entries share, rarest first), with a fixed synonym table as a
paraphrase, so a query is never the note's text. Each answerable query has gold note ids
(a mistake query: the mistake and its fix; a fix query: the fix). Unanswerable queries (gold
``[]``) are of two kinds:

- ``held_out``: a changelog entry chosen by a hash of its id (1 in 5) is left out of the
  stored notes; its queries stay, unanswerable, when no stored note carries more than half of
  the query's key terms (a near miss: the same project, the same kind of question);
- ``off_topic``: plausible coding questions about topics psf/requests does not have (a topic
  is kept only when none of its words occurs in any stored note), three phrasings each.

- ``absent_feature``: features a requests user might expect, asked in the project's own
  words (Session, adapter, response), that its history does not have (kept only when the
  feature's distinctive word occurs in no stored note), two phrasings each.

Each query has a ``topic`` (the changelog entry, the module, the release, the off-topic
subject): bench/splits.py splits the queries by topic, so a topic never straddles dev and test.

Rebuild (no network at bench time: the bench reads the committed JSON)::

    # fetch the repository (any clone of https://github.com/psf/requests with this commit)
    git clone https://github.com/psf/requests /tmp/requests   # or the session's fetch tool
    python -m bench.coding_notes_build /tmp/requests           # writes bench/data/coding_notes.json

The script reads only ``git show COMMIT:HISTORY.md`` and ``COMMIT:src/requests/*.py`` at
:data:`COMMIT` (``--commit`` to change it), so the output is the same on any clone.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

COMMIT = "1f6589ec3a1ee910f9a65cc3ceac60b26677bc0e"  # psf/requests main, 2026-08-03
SOURCE = "https://github.com/psf/requests"
OUT = Path(__file__).with_name("data") / "coding_notes.json"
PROJECT = "requests"
HOLD_OUT_ONE_IN = 5
MIN_WORDS = 6

DECISION_SECTIONS = ("improvements", "features", "deprecations", "behavioural", "behavioral",
                     "api changes", "dependencies", "announcements", "packaging", "updates",
                     "new features", "minor improvements", "miscellaneous", "documentation")
BUG_SECTIONS = ("bugfixes", "security")

STOP = frozenset("""a an the and or but if then else of to in on at by for with from into onto as is are
was were be been being it its this that these those there their them they we our you your i
not no nor so too very can could should would will may might must do does did done has have
had having now when where which who whom what why how than also such only any all some more
most other each every both either neither up down out over under again further once here
about above below after before between through during while until against among per via
requests request python user users now new use used using uses ensure ensures make makes made
properly correctly incorrectly some cases case issue issues bug bugs fixed fix fixes fixing
would occur occurs occurred cause caused causing causes allow allows allowed added add adds
adding support supports supported instead rather just still even already well like one two
ability able breaking certain special component back basic instance update updates possible
problem problems better various several many much first last whether within without always
never another same different small large long short good wrong right result results resulted
based related given specific general thing things able longer behavior behaviour around
""".split())  # noqa: SIM905

KEEP_ED = {"chunked", "deprecated", "embedded", "bundled", "signed", "unicode", "needed"}

# A fixed paraphrase: a query says it in other words than the changelog.
SYNONYMS = {
    "error": "exception", "errors": "exceptions", "raise": "throw", "raised": "thrown",
    "raises": "throws", "header": "HTTP header", "headers": "HTTP headers",
    "redirect": "redirection", "redirects": "redirections", "proxy": "proxies",
    "proxies": "proxy settings", "cookie": "cookies", "cookies": "cookie jar",
    "connection": "socket connection", "connections": "pooled connections",
    "session": "Session object", "sessions": "Session objects", "encoding": "charset",
    "decode": "decoding", "certificate": "cert", "certificates": "certs",
    "timeout": "time limit", "timeouts": "time limits", "url": "URL", "urls": "URLs",
    "authentication": "auth", "response": "reply", "responses": "replies",
    "deprecated": "phased out", "removed": "dropped", "python": "CPython",
    "streaming": "streamed", "stream": "streamed body", "body": "payload",
    "bodies": "payloads", "upload": "uploading", "chunked": "chunk-encoded",
    "verify": "verification", "verification": "TLS verification", "ssl": "TLS",
    "environment": "env", "variable": "var", "variables": "vars", "hostname": "host name",
    "netrc": ".netrc", "json": "JSON", "unicode": "text", "bytes": "byte strings",
    "hang": "hangs", "crash": "crashes", "warning": "warnings", "leak": "leaks",
}

TEMPLATES = {
    "mistake": ("what goes wrong with {a} and {b}?", "known pitfall around {a} {b} {c}?",
                "{a} {b} misbehaving, have we seen this before?",
                "anything to watch for with {b} when {a}?"),
    "fix": ("how was the {a} {b} problem resolved?", "what was the fix for {a} {b} {c}?",
            "which release repaired {b} {a}?"),
    "decision": ("why did the project change {a} {b}?", "what was decided about {a} {b} {c}?",
                 "rationale for the {b} {a} change?", "when did {a} {b} change and why?"),
    "project_context": ("which module handles {a} and {b}?", "where do {a} and {b} live?",
                        "what is the module with {a}, {b} for?"),
    "session_summary": ("what was shipped in {version} and what came after?",
                        "handoff for the {version} release: done and next?",
                        "state of the project at release {version}"),
}

# Plausible questions about a Python HTTP library's kind of project whose answer is not in
# requests' history: topics it does not have. A topic whose words occur in a stored note is
# dropped (the check is automatic, see off_topic_queries).
OFF_TOPICS = (
    "kubernetes helm chart rollback", "alembic database migration", "graphql schema stitching",
    "react component rerender", "dockerfile multistage build cache", "celery task retry backoff",
    "django orm prefetch", "sqlalchemy session flush", "redis cache eviction policy",
    "grpc deadline propagation", "protobuf schema evolution", "jwt refresh token rotation",
    "oauth2 pkce flow", "websocket reconnect heartbeat", "http/3 quic transport",
    "asyncio event loop integration", "trio nursery cancellation", "pandas dataframe memory",
    "numpy broadcasting error", "terraform state lock", "github actions matrix caching",
    "sentry breadcrumbs", "prometheus metrics exporter", "opentelemetry span context",
    "rate limiter token bucket", "circuit breaker half open", "kafka consumer rebalance",
    "rabbitmq dead letter queue", "elasticsearch mapping conflict", "mongodb index hint",
    "postgres advisory lock", "sqlite wal checkpoint", "pydantic validator migration",
    "fastapi dependency injection", "flask blueprint registration", "jinja template autoescape",
    "webpack bundle splitting", "typescript strict null", "rust borrow checker lifetime",
    "golang goroutine leak", "java garbage collector pause", "cron schedule drift",
    "s3 multipart upload presign", "lambda cold start", "nginx reverse proxy buffering",
    "cors preflight cache", "csrf token middleware", "password hashing argon2",
    "feature flag rollout", "blue green deployment", "database sharding key",
    "vector embedding index", "llm prompt caching", "gpu memory fragmentation",
    "thread pool starvation", "memory profiler flamegraph", "mypy plugin stubs generation",
    "poetry lockfile conflict", "conda environment solve", "pytest fixture scope teardown",
    "hypothesis property test shrinking", "docker compose healthcheck", "systemd unit restart",
    "logrotate permissions", "i18n plural forms", "timezone daylight saving bug",
    "csv dialect sniffing", "xml namespace parsing", "yaml anchors merge keys",
    "image thumbnail resize", "pdf text extraction", "email smtp starttls",
    "websocket subprotocol negotiation", "server sent events reconnect", "graphql subscription",
    "orm lazy loading n+1", "bloom filter false positive rate", "b-tree page split",
    "raft leader election", "consistent hashing ring", "snowflake id generator",
    "markdown renderer plugins", "svg sprite generation", "css grid layout",
    "android intent filter", "ios keychain access", "wasm module instantiation",
    "shader compilation stutter", "audio resampling latency", "kernel module signing",
)
# Near misses of another kind: features a requests user might expect, asked in the project's
# own words (Session, adapter, response, retries), that requests' history does not have. The
# first word of each is its distinctive one: the feature is kept only when that word occurs in
# no stored note.
ABSENT_FEATURES = (
    ("AsyncSession", "AsyncSession for concurrent requests"),
    ("HTTP2Adapter", "HTTP2Adapter on a Session"),
    ("aiohttp", "aiohttp transport adapter"),
    ("graphql", "graphql helper on the Session"),
    ("brotli", "brotli response decompression"),
    ("sigv4", "sigv4 request signing auth"),
    ("opentelemetry", "opentelemetry tracing hooks for each request"),
    ("ratelimit", "ratelimit adapter for outgoing requests"),
    ("circuitbreaker", "circuitbreaker around the connection adapter"),
    ("happy", "happy eyeballs connection racing in the adapter"),
    ("doh", "doh (DNS over HTTPS) resolver for the Session"),
    ("quic", "quic connections in the transport adapter"),
    ("msgpack", "msgpack request bodies like json="),
    ("websockets", "websockets upgrade on a Response"),
    ("ResponseCache", "ResponseCache with etag revalidation"),
    ("backpressure", "backpressure when streaming uploads"),
    ("pydantic", "pydantic models as the json= body"),
    ("gzip", "gzip compression of request bodies"),
    ("jitter", "jitter in the retry backoff of the adapter"),
    ("mtls", "mtls client certificate rotation on a Session"),
    ("sse", "sse (server-sent events) iterator on a Response"),
    ("harfile", "harfile export of a Session's traffic"),
)
ABSENT_TEMPLATES = ("how does requests handle {f}?", "where is the {f} configured?",
                    "what did we decide about {f}?", "known bug with {f}?")
OFF_TEMPLATES = ("how do we handle {t} here?", "what did we decide about {t}?",
                 "known bug with {t}?", "where is the {t} code?")

_RELEASE = re.compile(r"^(\d+\.\d+(?:\.\d+)?) \((\d{4}-\d{2}-\d{2})\)\s*$")
_SECTION = re.compile(r"^\*\*([^*]+)\*\*")
_BULLET = re.compile(r"^(?:-|\*)\s+(.*)$")
_PR = re.compile(r"\(#(\d+)\)|\\?#(\d+)")
_FAILURE = re.compile(
    r"^(?:fixed|fix|fixes|resolved)\s+(?:a\s+|an\s+)?(?:bug|issue|regression|problem|crash)"
    r"\s*(?:where|when|with|in which|that|causing|in)?\s+(.*)$", re.I | re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9_]|[A-Za-z]{2,}")


def _h(text: str) -> int:
    return int(hashlib.sha1(text.encode("utf-8")).hexdigest()[:8], 16)


def git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def clean(text: str) -> str:
    text = text.replace("\\_", "_").replace("\\#", "#").replace("\\[", "[").replace("\\]", "]")
    text = re.sub(r"`+", "", text)
    return re.sub(r"\s+", " ", text).strip()


def parse_history(text: str) -> list[dict[str, Any]]:
    """The changelog's entries: [{release, date, section, text}] in file order (newest first).
    A bullet's continuation lines (indented) belong to it; prose between bullets is dropped."""
    entries: list[dict[str, Any]] = []
    release = date = section = ""
    current: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _RELEASE.match(line)
        if m:
            release, date, section, current = m.group(1), m.group(2), "", None
            continue
        if not release:
            continue
        m = _SECTION.match(line.strip())
        if m and not line.startswith(" "):
            section, current = m.group(1).strip().rstrip(":").lower(), None
            continue
        m = _BULLET.match(line)
        if m:
            current = {"release": release, "date": date, "section": section,
                       "text": m.group(1)}
            entries.append(current)
            continue
        if current is not None and line.startswith(" ") and line.strip():
            current["text"] += " " + line.strip()
        elif not line.strip() or not line.startswith(" "):
            current = None if line.strip() else current
    for e in entries:
        e["text"] = clean(e["text"])
    return entries


def kind_of(entry: dict[str, Any]) -> str:
    s, t = entry["section"], entry["text"].lower()
    if any(s.startswith(b) for b in BUG_SECTIONS):
        return "bug"
    if any(s.startswith(d) for d in DECISION_SECTIONS):
        return "decision"
    return "bug" if t.startswith(("fix", "fixed")) else "decision"


def words(text: str) -> list[str]:
    return [w.lower().strip(".") for w in _WORD.findall(text)]


def key_terms(text: str, df: Counter[str], n_docs: int, limit: int = 3,
              names: int = 2) -> list[str]:
    """What a later question would name: identifiers (dotted, snake_case, CamelCase, calls)
    first, then the content words a few entries share (rarest first: the project's own
    vocabulary, not one entry's wording), then words of this entry alone. No stop words,
    adverbs, past-tense verbs or version numbers. ``names`` caps the identifiers (0: a
    question by someone who remembers the topic, not the name), unless too few words are
    left without them."""
    idents: list[str] = []
    for tok in re.findall(r"[A-Za-z_][\w.]*\(?\)?", text):
        tok = tok.rstrip(".")
        bare = tok.rstrip("()")
        if (("_" in bare or "." in bare or re.search(r"[a-z][A-Z]", bare) or tok.endswith("()"))
                and len(bare) > 3 and bare.lower() not in idents):
            idents.append(bare.lower())
    plain = [w for w in dict.fromkeys(words(text))
             if w not in STOP and len(w) > 3 and w not in idents and "." not in w
             and not w.endswith("ly") and not (w.endswith("ed") and w not in KEEP_ED)]
    shared = sorted((w for w in plain if 2 <= df.get(w, 0) <= n_docs // 15),
                    key=lambda w: (df[w], w))
    alone = sorted((w for w in plain if df.get(w, 0) < 2), key=lambda w: (-len(w), w))
    out = (idents[:names] + shared + alone)[:limit]
    return out if len(out) >= 2 else (out + idents[names:])[:limit]


def paraphrase(term: str) -> str:
    return SYNONYMS.get(term, term)


def fill(template: str, terms: list[str], **extra: str) -> str:
    t = [paraphrase(x) for x in terms] + ["it", "this", "that"]
    return template.format(a=t[0], b=t[1], c=t[2], **extra)


def _failure(text: str) -> str | None:
    """The failure a bug entry describes ("Fixed a bug where X" -> "X"; "Requests no longer
    does X" -> "Requests does X"); None when it says only what was done."""
    body = re.sub(r"\s*\(#\d+\)\s*\.?$", "", text).strip().rstrip(".")
    m = _FAILURE.match(body)
    if m:
        rest = m.group(1)
    elif re.search(r"\bno longer\b", body, re.I):
        rest = re.sub(r"\s*\bno longer\b\s*", " ", body, flags=re.I)
    elif re.match(r"^(?:fixed|fix|fixes)\s+", body, re.I):
        rest = re.sub(r"^(?:fixed|fix|fixes)\s+(?:an?\s+)?", "", body, flags=re.I)
    else:
        return None
    rest = rest.strip()
    return rest[0].upper() + rest[1:] if len(rest.split()) >= 4 else None


def _pr(text: str) -> str:
    m = _PR.search(text)
    return f"#{m.group(1) or m.group(2)}" if m else ""


def modules(repo: Path, commit: str) -> list[dict[str, Any]]:
    names = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", commit,
                            "src/requests/"], check=True, capture_output=True,
                           text=True).stdout.split()
    out = []
    for path in sorted(n for n in names if n.endswith(".py")):
        tree = ast.parse(git_show(repo, commit, path))
        doc = ast.get_docstring(tree) or ""
        lines = [ln.strip() for ln in doc.splitlines()
                 if ln.strip() and not set(ln.strip()) <= {"~"} and not ln.startswith("requests")]
        defs = list(dict.fromkeys(n.name for n in tree.body
                                  if isinstance(n, (ast.ClassDef, ast.FunctionDef))
                                  and not n.name.startswith("_")))
        if not lines or not defs:
            continue
        out.append({"module": Path(path).stem, "doc": " ".join(lines), "defs": defs})
    return out


def build(repo: Path, commit: str = COMMIT) -> dict[str, Any]:
    entries = [e for e in parse_history(git_show(repo, commit, "HISTORY.md"))
               if len(e["text"].split()) >= MIN_WORDS]
    seen: set[str] = set()
    unique = []
    for e in entries:  # "Updated bundled urllib3 to 1.16." and its kin: once
        key = re.sub(r"[\d.]+", "#", e["text"].lower())
        if key not in seen:
            seen.add(key)
            unique.append(e)
    entries = unique
    df: Counter[str] = Counter()
    for e in entries:
        df.update(set(words(e["text"])))
    n_docs = len(entries)

    notes: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []  # queries about held-out notes (checked below)
    topic_n = 0

    def topic() -> str:
        nonlocal topic_n
        topic_n += 1
        return f"t{topic_n:04d}"

    def note(kind: str, content: str, tags: list[str], **more: Any) -> dict[str, Any]:
        n = {"id": f"n{len(notes) + 1:04d}", "kind": kind,
             "note_kind": more.pop("note_kind", kind), "content": content, "tags": tags, **more}
        notes.append(n)
        return n

    def ask(kind: str, terms: list[str], gold: list[str], t: str, seed: str,
            **extra: Any) -> dict[str, Any]:
        opts = TEMPLATES[kind]
        return {"query": fill(opts[_h(seed) % len(opts)], terms, **extra), "gold": gold,
                "topic": t, "kind": kind, "terms": terms, **(
                    {"filters": {"include_contextual": True}} if kind == "session_summary"
                    else {})}

    def terms_of(text: str, seed: str) -> list[str]:
        # half the questions name no identifier: the asker remembers the topic, not the name
        return key_terms(text, df, n_docs, names=_h(seed + "name") % 2)

    for i, e in enumerate(entries):
        t = topic()
        eid = f"history:{e['release']}:{i}"
        held_out = _h(eid) % HOLD_OUT_ONE_IN == 0
        pr = _pr(e["text"])
        where = f"requests {e['release']} ({e['date']}{', ' + pr if pr else ''})"
        tags = [f"release-{e['release']}", e["section"] or "changelog"]
        made: list[dict[str, Any]] = []
        if kind_of(e) == "bug":
            failure = _failure(e["text"])
            if failure:
                m = note("mistake", f"{failure}.", tags, source=eid, held_out=held_out,
                         context=f"Bug reported against requests before {e['release']}.")
                f = note("fix", f"Fixed in {where}: {e['text']}", tags, source=eid,
                         held_out=held_out, fixes=m["id"])
                made.append(ask("mistake", terms_of(failure, eid + "m"), [m["id"], f["id"]], t,
                                eid + "m"))
                made.append(ask("fix", terms_of(e["text"], eid + "f"), [f["id"]], t, eid + "f"))
            else:
                f = note("fix", f"Fixed in {where}: {e['text']}", tags, source=eid,
                         held_out=held_out)
                made.append(ask("fix", terms_of(e["text"], eid), [f["id"]], t, eid))
        else:
            d = note("decision", f"Decision in {where}: {e['text']}", tags, source=eid,
                     held_out=held_out)
            made.append(ask("decision", terms_of(e["text"], eid), [d["id"]], t, eid))
        made = [q for q in made if len(q["terms"]) >= 2]
        if held_out:
            for q in made:
                held.append({**q, "gold": [], "unanswerable": "held_out", "about": q["gold"]})
        else:
            queries.extend(made)

    for mod in modules(repo, commit):
        t = topic()
        content = (f"Module requests.{mod['module']}: {mod['doc']} Defines "
                   f"{', '.join(mod['defs'][:12])}.")
        n = note("project_context", content, ["module", mod["module"]], note_kind="general",
                 source=f"src/requests/{mod['module']}.py", held_out=False)
        picks = sorted(mod["defs"], key=lambda d: _h(d))[:2] + ["module"]
        queries.append(ask("project_context", [p.lower() for p in picks[:2]] + ["code"],
                           [n["id"]], t, mod["module"]))
        doc_terms = key_terms(mod["doc"], df, n_docs, limit=3)
        if len(doc_terms) >= 2:
            queries.append(ask("project_context", doc_terms, [n["id"]], t, mod["module"] + "d"))

    by_release: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_release.setdefault(e["release"], []).append(e)
    releases = list(by_release)  # newest first
    for r_i, rel in enumerate(releases):
        items = by_release[rel]
        if len(items) < 3:
            continue
        t = topic()
        nxt = by_release[releases[r_i - 1]] if r_i > 0 else []

        def short(e: dict[str, Any]) -> str:
            return " ".join(e["text"].split()[:10]).rstrip(".,;:")

        content = (f"Handoff after releasing requests {rel} ({items[0]['date']}). Completed: "
                   + "; ".join(short(e) for e in items[:6]) + "."
                   + (" Next: " + "; ".join(short(e) for e in nxt[:3]) + "." if nxt else ""))
        n = note("session_summary", content, [f"release-{rel}", "handoff"],
                 source=f"history:{rel}", held_out=False)
        queries.append(ask("session_summary", [], [n["id"]], t, rel, version=rel))

    stored = [n for n in notes if not n["held_out"]]
    stored_words = [set(words(n["content"] + " " + n.get("context", ""))) for n in stored]
    vocab: set[str] = set().union(*stored_words)
    unanswerable: list[dict[str, Any]] = []
    for q in held:  # a near miss only: no stored note holds more than half its key terms
        term_words = [set(words(x)) for x in q["terms"]]
        best = max(sum(1 for tw in term_words if tw <= sw) for sw in stored_words)
        if best * 2 <= len(term_words):
            unanswerable.append(q)
    for subject in OFF_TOPICS:
        if set(words(subject)) & vocab:
            continue
        t = topic()
        first = _h(subject) % len(OFF_TEMPLATES)
        for step in range(3):
            tpl = OFF_TEMPLATES[(first + step) % len(OFF_TEMPLATES)]
            unanswerable.append({"query": tpl.format(t=subject), "gold": [], "topic": t,
                                 "kind": "off_topic", "terms": words(subject),
                                 "unanswerable": "off_topic"})
    for key, feature in ABSENT_FEATURES:
        if key.lower() in vocab:
            continue
        t = topic()
        first = _h(key) % len(ABSENT_TEMPLATES)
        for step in range(2):
            tpl = ABSENT_TEMPLATES[(first + step) % len(ABSENT_TEMPLATES)]
            unanswerable.append({"query": tpl.format(f=feature), "gold": [], "topic": t,
                                 "kind": "absent_feature", "terms": words(feature),
                                 "unanswerable": "absent_feature"})
    all_q = queries + unanswerable
    for k, q in enumerate(all_q):
        q["id"] = f"q{k + 1:04d}"
    return {
        "source": SOURCE, "commit": COMMIT if commit == COMMIT else commit,
        "project": PROJECT,
        "built_by": "python -m bench.coding_notes_build REPO (bench/coding_notes_build.py)",
        "counts": {
            "notes": len(notes), "stored": len(stored), "held_out": len(notes) - len(stored),
            "queries": len(all_q), "answerable": len(queries),
            "unanswerable": len(unanswerable),
            "by_kind": dict(sorted(Counter(n["kind"] for n in stored).items())),
            "unanswerable_by_why": dict(sorted(Counter(q["unanswerable"]
                                                       for q in unanswerable).items())),
        },
        "notes": notes,
        "queries": all_q,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.coding_notes_build",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("repo", help="a clone (or bare git dir) of psf/requests holding --commit")
    p.add_argument("--commit", default=COMMIT)
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    data = build(Path(args.repo), args.commit)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}: {json.dumps(data['counts'])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
