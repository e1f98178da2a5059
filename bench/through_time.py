"""Facts that change over a replayed git history: ``python -m bench.through_time`` (or
``python -m bench --only through_time``).

A repository is built in a temp dir (``settings.py``: one function per setting returning
its value) and replayed commit by commit like bench/citations.py's. Each commit changes a few
settings (numbers: limits, sizes, timeouts; names: queue, region, backend) and the agent
writes a note about each change, in one of several phrasings; half the settings' notes cite
their function (``settings.py::session_ttl``), half cite nothing. Between them it writes
unrelated notes: facts about other subjects phrased like the settings' ("the mailer retry
limit is 3" beside "the login retry limit is 5"), and statements that differ in one word
("the billing module checks invoices" / "... refunds"). The clock moves a day per commit.

Three brains get the same notes: ``before`` (no supersession: what the brain did until
issue 53), ``detected`` (the write path's detection alone) and ``explicit`` (the agent
passes ``supersedes``). Reported: the share of queries about a changed setting whose top hit
is the currently valid note; in ``detected``, supersessions of a note about another subject
(false, as a share of the notes written) and the changes detected (applied and proposed);
and ``as_of`` each earlier commit, the share whose top hit is the note valid then.
The bundled MiniLM model embeds (detection depends on the similarity of real text).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.citations import git


@dataclass
class Setting:
    fn: str
    subject: str
    unit: str
    values: list[str]
    current: int = 0
    notes: list[tuple[str, int]] = field(default_factory=list)  # (zk_id, commit) per brain

    def value(self, i: int | None = None) -> str:
        return self.values[self.current if i is None else i]


SETTINGS = [
    Setting("session_ttl", "session cache TTL", " seconds", ["60", "300", "900", "120", "30"]),
    Setting("upload_limit", "upload size limit", " MB", ["10", "50", "100", "25", "200"]),
    Setting("worker_threads", "worker pool size", " threads", ["4", "16", "8", "32", "12"]),
    Setting("api_rate", "public API rate limit", " requests per minute",
            ["100", "600", "60", "1200", "300"]),
    Setting("login_retries", "login retry limit", " attempts", ["5", "3", "10", "7", "4"]),
    Setting("password_len", "minimum password length", " characters",
            ["8", "12", "10", "14", "16"]),
    Setting("request_timeout", "HTTP request timeout", " ms", ["500", "2000", "1500", "800",
                                                                 "3000"]),
    Setting("index_batch", "indexer batch size", " documents", ["64", "256", "128", "512",
                                                                 "32"]),
    Setting("log_retention", "log retention period", " days", ["7", "30", "14", "90", "60"]),
    Setting("db_pool", "database connection pool size", " connections",
            ["10", "20", "50", "5", "40"]),
    Setting("queue_name", "job queue name", "", ["jobs", "tasks", "work", "events", "chores"]),
    Setting("region", "default deployment region", "", ["us-east-1", "eu-west-1",
                                                         "ap-south-1", "eu-central-1",
                                                         "us-west-2"]),
    Setting("cache_backend", "session cache backend", "", ["redis", "memcached", "valkey",
                                                           "dragonfly", "keydb"]),
    Setting("primary_db", "primary database engine", "", ["postgres", "mysql", "cockroachdb",
                                                          "mariadb", "sqlite"]),
    Setting("ci_runner", "CI runner image", "", ["ubuntu-22.04", "ubuntu-24.04", "debian-12",
                                                 "alpine-3.19", "fedora-40"]),
    Setting("image_format", "thumbnail image format", "", ["png", "webp", "avif", "jpeg",
                                                           "heic"]),
]
PHRASINGS = [
    "The {subject} is {value}{unit}.",
    "The {subject} is now {value}{unit}.",
    "We set the {subject} to {value}{unit}.",
    "{Subject}: {value}{unit}.",
]
# How agents also write a change (seen with real agents: a kind label, the old value named).
CHANGE_PHRASINGS = [
    "Decision: the {subject} is {value}{unit}.",
    "We changed the {subject} from {previous}{unit} to {value}{unit}.",
    "The {subject} is now {value}{unit} (it was {previous}{unit}).",
]
QUESTIONS = ["What is the {subject}?", "{subject}", "current {subject}"]
# Other subjects phrased like the settings, each stated once (a supersession of one is a
# false one).
LOOKALIKES = [
    "The mailer retry limit is 3 attempts.", "The admin upload size limit is 20 MB.",
    "The internal API rate limit is 5000 requests per minute.",
    "The search cache TTL is 45 seconds.", "The thumbnail worker pool size is 2 threads.",
    "The analytics database connection pool size is 6 connections.",
    "The audit log retention period is 365 days.", "The webhook request timeout is 250 ms.",
    "The email queue name is outbox.", "The backup deployment region is eu-north-1.",
    "The rate limiter backend is redis.", "The reporting database engine is clickhouse.",
    "The mailer retry delay is 30 seconds.", "The search results page size is 25 items.",
    "The admin session timeout is 15 minutes.", "The export file format is csv.",
]
MODULES = ["billing", "search", "auth", "upload", "mailer", "scheduler", "reports", "admin"]
VERBS = ["checks", "validates", "retries", "logs", "caches", "signs", "renders", "parses"]
OBJECTS = ["invoices", "refunds", "tokens", "sessions", "thumbnails", "webhooks", "exports",
           "receipts", "payloads", "headers"]


def _settings_py(settings: list[Setting]) -> str:
    return "\n".join(f"def {s.fn}():\n    return {s.value()!r}\n\n" for s in settings)


def _note(s: Setting, rng: random.Random, changed: bool = False) -> str:
    """A note of the setting's current value; ``changed``: it follows an earlier one, and
    may say so (CHANGE_PHRASINGS)."""
    phrasings = PHRASINGS + (CHANGE_PHRASINGS if changed else [])
    previous = s.values[(s.current - 1) % len(s.values)]
    return rng.choice(phrasings).format(subject=s.subject, Subject=s.subject.capitalize(),
                                        value=s.value(), unit=s.unit, previous=previous)


def _unrelated_pool(rng: random.Random) -> list[str]:
    """Every unrelated note, each written once: the lookalikes, then statements that differ
    from each other in one word ("the billing module checks invoices" / "... refunds")."""
    plain = [f"The {m} module {v} {o}." for m in MODULES for v in VERBS for o in OBJECTS]
    rng.shuffle(plain)
    return [*LOOKALIKES, *plain]


def _brain(home: Path, root: Path) -> Any:
    from brain.app import Brain
    from brain.clock import ManualClock
    from config import load_settings

    settings = load_settings(home=home, paths={"allowed_roots": [str(root.parent)]})
    b = Brain(settings, clock=ManualClock()).open()
    b.sources.add(str(root), name="repo", project="bench", sync=False)
    return b


def _sync(brains: dict[str, Any]) -> None:
    for b in brains.values():
        job = b.sources.sync("repo", wait=True, timeout=600)
        if job["status"] != "done":
            raise RuntimeError(f"sync failed: {job}")


def _top(b: Any, query: str, as_of: str | None = None) -> str | None:
    from brain.memory import RecallFilter

    hits = b.memory.search(query, 1, RecallFilter(project="bench", as_of=as_of), stamp=False)
    return hits[0]["zk_id"] if hits else None


def run(scratch: Path | None = None, quick: bool = False, log: Any = print,
        seed: int = 53) -> dict[str, Any]:
    rng = random.Random(seed)
    commits = 6 if quick else 12
    changes_per_commit = 3 if quick else 4
    unrelated_per_commit = 6 if quick else 12
    settings = [Setting(s.fn, s.subject, s.unit, list(s.values)) for s in SETTINGS]
    cited = {s.fn for s in settings[::2]}
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        tmp = Path(d)
        root = tmp / "repo"
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        (root / "settings.py").write_text(_settings_py(settings))
        git(root, "add", "-A")
        git(root, "commit", "-qm", "commit 0")
        brains = {name: _brain(tmp / name, root) for name in ("before", "detected", "explicit")}
        ids: dict[str, dict[str, list[tuple[str, int]]]] = {n: {} for n in brains}
        unrelated_ids: dict[str, set[str]] = {n: set() for n in brains}
        subject_of: dict[str, dict[str, str]] = {n: {} for n in brains}
        times: list[str] = []
        detected = {"applied": 0, "proposed": 0}
        written = 0
        try:
            _sync(brains)

            def write(s: Setting, c: int) -> None:
                nonlocal written
                text = _note(s, rng, changed=c > 0)
                cites = [f"settings.py::{s.fn}"] if s.fn in cited else []
                for name, b in brains.items():
                    past = [z for z, _ in ids[name].get(s.fn, [])]
                    res = b.memory.add(text, "bench", cites=cites,
                                       detect=name == "detected",
                                       supersedes=past[-1:] if name == "explicit" else None)
                    zk = res.note["zk_id"]
                    ids[name].setdefault(s.fn, []).append((zk, c))
                    subject_of[name][zk] = s.fn
                    if name == "detected" and res.supersession:
                        for v in res.supersession["detected"]:
                            detected[v["confidence"]] += 1
                written += 1

            pool = _unrelated_pool(rng)
            rng.shuffle(pool)

            def noise() -> None:
                nonlocal written
                text = pool.pop()
                for name, b in brains.items():
                    zk = b.memory.add(text, "bench", detect=name == "detected").note["zk_id"]
                    unrelated_ids[name].add(zk)
                    subject_of[name][zk] = "unrelated:" + text
                written += 1

            for s in settings:
                write(s, 0)
            times.append(brains["before"].clock.now().isoformat())
            for c in range(1, commits + 1):
                for b in brains.values():
                    b.clock.advance(days=1)
                changed = rng.sample(settings, changes_per_commit)
                for s in changed:
                    s.current = (s.current + 1) % len(s.values)
                (root / "settings.py").write_text(_settings_py(settings))
                git(root, "commit", "-qam", f"commit {c}")
                _sync(brains)
                order: list[Any] = [*changed, *([None] * unrelated_per_commit)]
                rng.shuffle(order)
                for s in order:
                    if s is None:
                        noise()
                    else:
                        write(s, c)
                times.append(brains["before"].clock.now().isoformat())
                log(f"through_time: commit {c}: {written} notes written")
            for b in brains.values():
                b.clock.advance(hours=1)
            out: dict[str, Any] = {"settings": len(settings), "cited_settings": len(cited),
                                   "commits": commits, "notes_written": written,
                                   "changes_detected": detected}
            changed_settings = [s for s in settings if len(ids["before"][s.fn]) > 1]
            for name, b in brains.items():
                good = total = 0
                for s in changed_settings:
                    current = ids[name][s.fn][-1][0]
                    for q in QUESTIONS:
                        total += 1
                        good += _top(b, q.format(subject=s.subject)) == current
                out[f"top1_current_{name}"] = round(good / total, 4)
                out["queries"] = total
            det = brains["detected"]
            false = 0
            examples: list[str] = []
            for pt_zk, subject in subject_of["detected"].items():
                p = det.memory.get_payload(pt_zk, include_forgotten=True)
                by = p.get("superseded_by")
                if by and subject_of["detected"].get(by) != subject:
                    false += 1
                    examples.append(f"{p['content']} -> "
                                    f"{det.memory.get_payload(by)['content']}")
            out["false_supersessions"] = false
            out["false_supersession_share"] = round(false / written, 4)
            out["false_examples"] = examples[:10]
            missed = sum(1 for s in changed_settings for z, _ in ids["detected"][s.fn][:-1]
                         if not det.memory.get_payload(z).get("superseded_by"))
            out["older_setting_notes"] = sum(len(ids["detected"][s.fn]) - 1
                                             for s in changed_settings)
            out["older_setting_notes_not_superseded"] = missed
            # as_of each commit: the note valid then (explicit supersession's store)
            good = total = 0
            ex = brains["explicit"]
            for c, t in enumerate(times):
                for s in changed_settings:
                    valid = [z for z, at in ids["explicit"][s.fn] if at <= c]
                    if not valid:
                        continue
                    total += 1
                    good += _top(ex, f"What is the {s.subject}?", as_of=t) == valid[-1]
            out["as_of_top1_valid_then"] = round(good / total, 4) if total else 1.0
            out["as_of_queries"] = total
            return out
        finally:
            for b in brains.values():
                b.close()


def section(r: dict[str, Any]) -> str:
    """The report's rows (bench/report.py)."""
    return "\n".join([
        f"{r['settings']} settings ({r['cited_settings']} cited by their notes) change over "
        f"{r['commits']} commits; {r['notes_written']} notes written, unrelated ones "
        f"between; {r['queries']} queries about the settings that changed:",
        "",
        "| top hit is the valid fact: before | detected | explicit | as of each commit | "
        "false supersessions |",
        "|---|---|---|---|---|",
        f"| {r['top1_current_before']} | {r['top1_current_detected']} | "
        f"{r['top1_current_explicit']} | {r['as_of_top1_valid_then']} | "
        f"{r['false_supersessions']} ({r['false_supersession_share']:.2%} of notes) |",
        "",
        f"Detected: {r['changes_detected']['applied']} applied, "
        f"{r['changes_detected']['proposed']} proposed; "
        f"{r['older_setting_notes_not_superseded']} of {r['older_setting_notes']} older "
        "setting notes left current.",
    ])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.through_time", description=__doc__)
    p.add_argument("--quick", action="store_true", help="6 commits instead of 12")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(json.dumps(run(quick=args.quick), indent=2))


if __name__ == "__main__":
    main()
