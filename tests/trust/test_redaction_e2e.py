"""Secrets never stored: an AWS key, a GitHub token and a PEM private key written through every
write tool are redacted before storage, reported by kind, and findable by no search — not
even as raw bytes anywhere in the data dir."""

from __future__ import annotations

from pathlib import Path

from brain.app import Brain

AWS = "AKIAQ7RZ3XW2EXAMPLE1"
GITHUB = "ghp_Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz9Xc8V"
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
SECRETS = (AWS, GITHUB, PEM_BODY)
KINDS = ["aws_access_key", "github_token", "private_key"]


def leaky(marker: str) -> str:
    return (
        f"{marker}: deploy creds were pasted here. aws key {AWS}, token {GITHUB}, "
        f"and the key:\n{PEM}\n"
    )


async def call(client, name: str, **args):  # noqa: ANN001, ANN201
    return (await client.call_tool(name, args)).data


def _bytes_under(home: Path) -> list[bytes]:
    return [p.read_bytes() for p in home.rglob("*") if p.is_file()]


async def test_secrets_redacted_on_every_write_path(brain: Brain, client, home: Path) -> None:  # noqa: ANN001
    added = await call(client, "add_memory", content=leaky("zebracanary1"), project="ops")
    assert sorted(added["redacted"]) == KINDS
    plain = await call(client, "add_memory", content="plain note", project="ops")
    updated = await call(
        client, "update_memory", zk_id=plain["note"]["zk_id"], new_content=leaky("zebracanary2")
    )
    assert sorted(updated["redacted"]) == KINDS
    fail = await call(
        client,
        "record_failure",
        content=leaky("zebracanary3"),
        project="ops",
        failure_signature="deploy:creds",
    )
    assert fail["redacted"] == KINDS
    again = await call(
        client,
        "record_failure",
        content=leaky("zebracanary4"),
        project="ops",
        failure_signature="deploy:creds",
    )
    assert again["redacted"] == KINDS and again["occurrences"] == 2
    fix = await call(
        client,
        "record_resolution",
        failure_zk_id=fail["note"]["zk_id"],
        fix_content=leaky("zebracanary5"),
    )
    assert sorted(fix["redacted"]) == KINDS
    closed = await call(
        client,
        "close_session",
        project="ops",
        objective="rotate creds",
        completed=[leaky("zebracanary6")],
        next_steps=[f"revoke {GITHUB}"],
        key_files=[f"keys/{AWS}.pem"],
    )
    assert closed["redacted"] == KINDS
    stored = brain.memory.get_payload(added["note"]["zk_id"])["content"]
    for kind in KINDS:
        assert f"[REDACTED:{kind}]" in stored

    # No search of any kind finds them.
    for secret in (*SECRETS, "BEGIN RSA PRIVATE KEY", "ghp_Zx9Qw8"):
        for args in (
            {"all_projects": True},
            {
                "all_projects": True,
                "include_fleeting": True,
                "include_contextual": True,
                "fingerprint_match": False,
                "top_k": 100,
            },
        ):
            res = await call(client, "search_memory", query=secret, **args)
            assert secret not in repr(res)
        assert secret not in repr(await call(client, "preflight_check", task=secret, top_k=50))
    for tool, args in (
        ("open_session", {"project": "ops"}),
        ("get_inbox", {}),
        ("decay_report", {"limit": 100}),
        ("brain_stats", {}),
    ):
        out = repr(await call(client, tool, **args))
        assert not any(s in out for s in SECRETS)

    # Not stored anywhere: every byte of the data dir (store, WAL, graph cache, logs).
    brain.store.flush()
    brain.save_graph()
    blobs = _bytes_under(home)
    for i in range(1, 7):  # positive control: the storage format keeps plain text readable
        assert any(f"zebracanary{i}".encode() in b for b in blobs), i
    for secret in SECRETS:
        assert not any(secret.encode() in b for b in blobs), secret


async def test_redaction_setting_turns_it_off(brain: Brain, client) -> None:  # noqa: ANN001
    brain.memory.cfg = type(brain.memory.cfg)(
        **{
            **{f: getattr(brain.memory.cfg, f) for f in brain.memory.cfg.__dataclass_fields__},
            "redact_secrets": False,
        }
    )
    out = await call(client, "add_memory", content=f"test fixture key {AWS}", project="ops")
    assert out["redacted"] == [] and AWS in out["note"]["content"]
