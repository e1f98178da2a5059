"""Secret redaction: every kind is caught, prose survives, assignment keys stay readable."""

from __future__ import annotations

import pytest

from brain.redact import KINDS, Redaction, redact

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA7bq3Xn0sFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE\n"
    "q1w2e3r4t5y6u7i8o9p0FAKEFAKEFAKEFAKEFAKE==\n"
    "-----END RSA PRIVATE KEY-----"
)
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

CASES = [
    ("private_key", PEM),
    (
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    ),
    (
        "private_key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJBgkqhkiG9w0BBQ0w\n-----END ENCRYPTED PRIVATE KEY-----",
    ),
    ("private_key", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----"),
    ("aws_access_key", AWS_ID),
    ("aws_access_key", "ASIAY34FZKBOKMUTVV7A"),
    ("github_token", GITHUB),
    ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
    ("gitlab_token", "glpat-xYz12345678901234567"),
    ("slack_token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    ("stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe_key", "rk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("openai_key", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXyZ0aB"),
    ("openai_key", "sk-T3BlbkFJabcdefghijklmnop1234567890"),
    ("anthropic_key", "sk-ant-api03-Abc123Def456Ghi789Jkl012Mno345Pqr678"),
    ("huggingface_token", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("google_api_key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("jwt", JWT),
]


@pytest.mark.parametrize(("kind", "secret"), CASES)
def test_each_kind_is_redacted(kind: str, secret: str) -> None:
    result = redact(f"config note: {secret} (rotate soon)")
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert result.kinds == (kind,)
    assert result.count == 1
    assert result.text.startswith("config note: ") and result.text.endswith(" (rotate soon)")


def test_kind_names_are_the_documented_ones() -> None:
    assert {kind for kind, _ in CASES} | {"aws_secret_key", "password_assignment"} == set(KINDS)


def test_aws_secret_assignment_keeps_key() -> None:
    result = redact("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    assert result.text == "aws_secret_access_key = [REDACTED:aws_secret_key]"
    assert result.kinds == ("aws_secret_key",)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("PASSWORD=hunter2", "PASSWORD=[REDACTED:password_assignment]"),
        ("DB_PASSWORD='p@ss w0rd'", "DB_PASSWORD='[REDACTED:password_assignment]'"),
        ("export API_KEY=abc123def", "export API_KEY=[REDACTED:password_assignment]"),
        ('{"password": "s3cr3t!"}', '{"password": "[REDACTED:password_assignment]"}'),
        ("  password: letmein", "  password: [REDACTED:password_assignment]"),
        ('client_secret = "abc"', 'client_secret = "[REDACTED:password_assignment]"'),
        ("auth_token: 'zz-top-99'", "auth_token: '[REDACTED:password_assignment]'"),
    ],
)
def test_assignments_replace_only_the_value(line: str, expected: str) -> None:
    result = redact(line)
    assert result.text == expected
    assert result.kinds == ("password_assignment",)


@pytest.mark.parametrize(
    "prose",
    [
        "The password field is required.",
        "We hit the token limit again; raise max_tokens=800 next time.",
        "Rotate the secret every 90 days and store tokens in the vault.",
        "Use sk-learn-style pipelines; risk-free-refactoring-is-a-myth here.",
        "password = os.environ['DB_PASSWORD'] is read at startup via get_password()",
        "PASSWORD=${DB_PASSWORD} comes from the environment",
        "if token == expected: return",
        "Ask Akia about the 16 AKIA-prefixed key ids.",
    ],
)
def test_prose_and_references_are_not_redacted(prose: str) -> None:
    result = redact(prose)
    assert result == Redaction(text=prose, kinds=(), count=0)


def test_note_with_aws_key_github_token_and_pem_key() -> None:
    note = (
        "Deploy notes\n"
        f"AWS id {AWS_ID} for the staging role.\n"
        f"CI uses {GITHUB}\n"
        f"Server key:\n{PEM}\n"
        "Remember to rotate all of the above."
    )
    result = redact(note)
    for secret in (AWS_ID, GITHUB, "MIIEpAIBAAKCAQEA", "BEGIN RSA PRIVATE KEY"):
        assert secret not in result.text
    assert result.kinds == ("aws_access_key", "github_token", "private_key")
    assert result.count == 3
    assert result.text.startswith("Deploy notes\nAWS id [REDACTED:aws_access_key] for")
    assert result.text.endswith("Remember to rotate all of the above.")


def test_token_inside_assignment_is_counted_once_with_its_specific_kind() -> None:
    result = redact(f"GITHUB_TOKEN={GITHUB}")
    assert result.text == "GITHUB_TOKEN=[REDACTED:github_token]"
    assert result.kinds == ("github_token",)
    assert result.count == 1


def test_unterminated_private_key_is_redacted_to_the_end() -> None:
    result = redact("key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC")
    assert result.text == "key:\n[REDACTED:private_key]"


def test_large_text_is_handled() -> None:
    text = ("Plain prose about the password field and token limits. x = 1\n" * 2000) + GITHUB
    result = redact(text)
    assert result.kinds == ("github_token",)
