"""No secret slips through a cut (issue 50): text is redacted before it is truncated, paged or
chunked, so a key across a PDF page break, a failing command's long output, a citation's
excerpt at its 1,200-character cut and the hook state file hold none of it.

The corpus (``CORPUS``) is the secret kinds of issue 50's pattern gaps beside the kinds of
``test_secrets.py``; each is fed through every channel that cuts text, then every byte of
every file under the data dir (the store's binary files too) is searched for the distinctive
middle of each secret. A canary written beside them must be found (positive control).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fpdf import FPDF

from brain.app import Brain
from brain.hooks import client as hook_client
from brain.trust.redact import redact, redact_head, redact_mapped, redact_tail
from tests.security.test_secrets import NEEDLES, SECRETS, call

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "brain" / "hooks" / "run.py"
PEM_LINES = [
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunV",
    "TLw7onLRnrq0Qk3LmZ8pRt2Wx5Nc9Hb4Jd1Fg6Zr8vQ2mN5xL1pT7wK3yH9bF6dS4",
    "gJ0cAe5uW8iRkP2wN5xL1pT7zQ4mHc1Jf6Gb0Lq2Wn6Zy1Tc5Xp9Hd4Rk3Vb8Lq2",
    "Wq9rT2zLm5Kd83mZq1LpDk3rPw99zzS3cretPw0rdPw0rd9xQAAAAgQD8kP2wN5x",
] * 12
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_LINES) + "\n-----END RSA PRIVATE KEY-----"
PPK = (
    "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy@ci\nPublic-Lines: 1\n"
    "AAAAB3NzaC1yc2EAAAADAQABAAABAQDhY7v\nPrivate-Lines: 2\n"
    "AAABAQCx7Zq3Lm9Rt4vKp8Nw2Yd5Hc1Jf6Gb0Qx\nAAAAgQD8kP2wN5xL1pT7zQ4mYh\n"
    "Private-MAC: 4f2a9c0d7e1b3a5968c2d4e6f8a0b1c3"
)
# (how it is written, the part that must never be stored)
CORPUS: dict[str, tuple[str, str]] = {
    **{k: v for k, v in SECRETS.items() if k != "pem"},
    "pem_body": (PEM, PEM_LINES[1]),
    "aws_bare_secret": ("aws secret Qr7vZ2mN5xL1pT7wK3yH9bF6dS4gJ0cA/e+uW8iT ok",
                        "Qr7vZ2mN5xL1pT7wK3yH9bF6dS4gJ0cA/e+uW8iT"),  # fmt: skip
    "secret_key_base": (
        "SECRET_KEY_BASE=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ),
    "db_password_prod": ("DB_PASSWORD_PROD=Wq9rT2zLm5Yx", "Wq9rT2zLm5Yx"),
    "github_token_ro": ("GITHUB_TOKEN_RO=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
                        "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"),  # fmt: skip
    "mysql": ("mysql -h db -u root -pS3cretPw0rdQz shop", "S3cretPw0rdQz"),
    "curl": ("curl -sf -u admin:Pw0rd9xQvB https://ci.internal/api", "Pw0rd9xQvB"),
    "docker": ("docker login -u deploy -p Dk3rPw99zzKm registry.example.com", "Dk3rPw99zzKm"),
    "putty": (PPK, "AAABAQCx7Zq3Lm9Rt4vKp8Nw2Yd5Hc1Jf6Gb0Qx"),
    "pgpassword": ("PGPASSWORD=Pg7sEcr3tZq psql -h db", "Pg7sEcr3tZq"),
    "aws_env": ("AWS_SECRET_ACCESS_KEY=Zr8vQ2mN5xL1pT7wK3yH9bF6dS4gJ0cA/e+uW8iR",
                "Zr8vQ2mN5xL1pT7wK3yH9bF6dS4gJ0cA/e+uW8iR"),  # fmt: skip
}


def distinctive(needle: str) -> str:
    """The middle 16 characters of a secret (its whole when shorter): what a leak holds
    even when the secret was cut."""
    if len(needle) <= 16:
        return needle
    mid = (len(needle) - 16) // 2
    return needle[mid : mid + 16]


PROBES = {kind: distinctive(needle) for kind, (_, needle) in CORPUS.items()}


def corpus_text(canary: str) -> str:
    return f"{canary}\n\n" + "\n\n".join(text for text, _ in CORPUS.values()) + "\n\nend.\n"


def found_in(data: bytes) -> list[str]:
    return [k for k, probe in PROBES.items() if probe.encode() in data]


def scan_data_dir(home: Path, canaries: list[str]) -> dict[str, list[str]]:
    """Every file under the data dir, read whole as bytes: {file: kinds found}."""
    seen: set[str] = set()
    leaks: dict[str, list[str]] = {}
    for p in home.rglob("*"):
        if not p.is_file() or p.is_socket():
            continue
        try:
            data = p.read_bytes()
        except OSError:
            continue
        seen.update(c for c in canaries if c.encode() in data)
        if kinds := found_in(data):
            leaks[str(p.relative_to(home))] = kinds
    assert seen == set(canaries), f"positive control: {set(canaries) - seen} not stored"
    return leaks


# ---------------------------------------------------------------------------- units
def test_every_corpus_secret_is_redacted_alone() -> None:
    for kind, (text, _) in CORPUS.items():
        assert not found_in(redact(f"note: {text} (rotate)").text.encode()), kind


def test_a_key_across_a_page_boundary_is_redacted_whole() -> None:
    text = f"page one ends with a key\n{PEM}\npage two goes on"
    cut = text.index(PEM_LINES[10])  # the page break falls inside the key's body
    red, (a, b, c, d) = redact_mapped(text, [0, cut, cut, len(text)])
    assert found_in(red.text.encode()) == [] and red.kinds == ("private_key",)
    assert red.text[a:b].startswith("page one") and red.text[c:d].endswith("page two goes on")
    assert b == c and red.text[a:d] == red.text


def test_a_tail_cut_keeps_no_key_body_and_no_token_head() -> None:
    output = "x" * 5000 + f"\n{PEM}\nlast line\n"
    assert PEM_LINES[1] in output[-2000:] and "BEGIN" not in output[-2000:]  # the old cut
    kept = redact_tail(output, 2000)
    assert found_in(kept.encode()) == [] and kept.endswith("last line\n")
    token = NEEDLES["github"]
    head = "y" * 1180 + f" {token} tail"
    assert token[:10] in head[:1200]  # the old cut kept the token's head
    assert token[:10] not in redact_head(head, 1200)


def test_a_headless_key_body_is_caught_by_its_end_line_and_code_is_left_alone() -> None:
    body = "\n".join(PEM_LINES[3:9]) + "\n-----END RSA PRIVATE KEY-----\n"
    assert found_in(redact(body).text.encode()) == []
    # base64 test data and a public certificate's END are not a private key
    for text in (
        'DATA = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"',
        "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfV\n-----END PUBLIC KEY-----",
        "-----END RSA PRIVATE KEY----- closes a block",
    ):
        assert redact(text).text == text


# ---------------------------------------------------------------------------- channels
def _pdf(pages: list[str]) -> bytes:
    pdf = FPDF()
    pdf.set_font("Courier", size=9)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 5, text)
    return bytes(pdf.output())


def _run_hook(event: str, data: dict[str, Any], home: Path) -> None:
    subprocess.run(
        [sys.executable, "-I", "-S", str(RUNNER), event, "--home", str(home)],
        input=json.dumps(data), capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip


def _failing_command(home: Path, project_dir: Path, command: str, output: str) -> None:
    _run_hook("post-tool", {
        "session_id": "s1", "cwd": str(project_dir), "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": command},
        "tool_response": {"stdout": output, "stderr": "", "exit_code": 1},
    }, home)  # fmt: skip


async def test_the_corpus_through_every_cutting_channel_leaves_no_byte_in_the_data_dir(
    brain: Brain, client: Any, home: Path, tmp_path: Path
) -> None:
    from brain.process.drain import drain

    canary = "zebracanaryseams"
    # 1. add_memory, the whole corpus in one note
    await call(client, "add_memory", content=corpus_text(canary), project="ops")
    # 2. a document whose key crosses a page break (and every corpus line on a page)
    half = len(PEM_LINES) // 2
    pages = [
        f"{canary}doc page one\n-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_LINES[:half]),
        "\n".join(PEM_LINES[half:]) + "\n-----END RSA PRIVATE KEY-----\nafter the key",
        corpus_text(canary + "doc"),
    ]
    doc = tmp_path / "handover.pdf"
    doc.write_bytes(_pdf(pages))
    rec = await call(client, "ingest_file", path=str(doc), project="ops")
    done = brain.files.wait(rec["id"], timeout=120)
    assert done["status"] == "ready" and done["pages"] >= 3, done
    # 3. hooks: failing commands with long outputs (the key's BEGIN line beyond the kept
    # 2,000 characters), commands that carry secrets; no owner, so they go to the spool
    project_dir = tmp_path / "app"
    (project_dir / ".git").mkdir(parents=True)
    long_output = "building...\n" * 400 + f"{PEM}\nError: deploy failed\n"
    _failing_command(home, project_dir, f"echo {canary}hook && ./deploy.sh", long_output)
    for kind, (text, _) in CORPUS.items():
        if "\n" not in text:
            command = text if kind in ("mysql", "curl", "docker", "pgpassword") else f"echo '{text}'"
            _failing_command(home, project_dir, f"{command} && false", "x" * 3000 + text)
        _failing_command(home, project_dir, f"./check-{kind}.sh", "y" * 2500 + text + "\nfailed")
    state = (home / hook_client.STATE_FILE).read_text("utf-8")
    assert "pending" in state and not found_in(state.encode()), found_in(state.encode())
    assert drain(brain) > 0  # the spooled failures reach the store through the server
    # 4. a citation whose excerpt is cut at 1,200 characters through a token
    src = tmp_path / "code"
    (src / "conf").mkdir(parents=True)
    token = NEEDLES["github"]
    body = "    # " + "z" * 1170 + f"\n    return {token!r}  # {canary}cite\n"
    (src / "conf" / "settings.py").write_text(f"def token():\n{body}")
    await call(client, "add_source", path=str(src), name="code", trigger="manual",
               project="ops")  # fmt: skip
    await call(client, "sync_source", source="code", wait=True)
    note = await call(client, "add_memory", content=f"{canary} the token: conf/settings.py::token",
                      project="ops")  # fmt: skip
    cites = brain.memory.get_payload(note["note"]["zk_id"]).get("cites") or []
    assert cites and all(token[:12] not in c.get("excerpt", "") for c in cites), cites
    # 5. the export
    brain.maintenance.export_jsonl(home / "exports" / "notes.jsonl")
    export = (home / "exports" / "notes.jsonl").read_text("utf-8")
    assert canary in export and not found_in(export.encode())

    hits = await call(client, "search_files", query="after the key", threshold=-1.0, limit=30)
    assert hits["count"] >= 1 and not found_in(repr(hits).encode())
    brain.store.flush()
    brain.save_graph()
    leaks = scan_data_dir(home, [canary, canary + "doc", canary + "hook"])
    assert leaks == {}, f"secrets stored in: {leaks}"
