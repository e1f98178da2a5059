"""Secret redaction: every kind is caught, prose survives, assignment keys stay readable."""

from __future__ import annotations

import pytest

from brain.trust.redact import KINDS, Redaction, redact, redact_tags

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

PPK = (
    "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy@ci\nPublic-Lines: 2\n"
    "AAAAB3NzaC1yc2EAAAADAQABAAABAQDhY7v\nQk3LmZ8pRt2Wx5Nc9Hb4Jd1Fg6\nPrivate-Lines: 2\n"
    "AAABAQCx7Zq3Lm9Rt4vKp8Nw2Yd5Hc1Jf6Gb0\nAAAAgQD8kP2wN5xL1pT7zQ4m\n"
    "Private-MAC: 4f2a9c0d7e1b3a5968c2d4e6f8a0b1c3"
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
    ("github_token", "gho_" + "Q1w2E3r4T5y6U7i8O9p0AsDfGhJkLzXcVbNm"),
    ("gitlab_token", "gldt-Rk4Lm8Np2Qs6Tv0Wx3Yz"),
    ("slack_token", "https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/Qw8Er7Ty6Ui5Op4As3Df2Gh1"),
    ("stripe_key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    ("google_api_key", "ya29.a0AfH6SMBx1234567890abcdefghij"),
    ("npm_token", "npm_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"),
    ("sendgrid_key", "SG." + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7O" + "." + "p" * 20 + "Q1r2S3t4U5v6W7x8Y9z0AbCdEfG"),
    ("putty_key", PPK),
    ("putty_key", "Private-Lines: 2\nAAAAIQCx7Zq3Lm9Rt4v\nAAAAIQD8kP2wN5xL1pT7\nPrivate-MAC: 4f2a9c"),
]

# One near miss per whole-token kind: the prefix without the secret's shape.
NEAR_MISSES = [
    ("private_key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0B\n-----END PUBLIC KEY-----"),
    ("aws_access_key", "AKIA1234 is too short, and AKIAIOSFODNN7EXAMPLEX is too long"),
    ("github_token", "ghp_short and github_pat_tiny"),
    ("gitlab_token", "glpat-short"),
    ("slack_token", "xoxb-123 and hooks.slack.com/services/docs"),
    ("stripe_key", "sk_live_ and rk_test_abc"),
    ("openai_key", "sk-learn-is-a-great-library-for-ml"),
    ("anthropic_key", "sk-ant-short"),
    ("huggingface_token", "hf_hub_download is a function"),
    ("google_api_key", "AIza is a prefix; ya29.x is not a token"),
    ("npm_token", "npm_config_cache=/tmp/npm"),
    ("sendgrid_key", "SG.compose() returns a mail"),
    ("jwt", "eyJhbGci is only a header"),
    ("putty_key", "PuTTY-User-Key-File is the header of a .ppk file; Private-Lines: counts lines"),
]


@pytest.mark.parametrize(("kind", "secret"), CASES)
def test_each_kind_is_redacted(kind: str, secret: str) -> None:
    result = redact(f"config note: {secret} (rotate soon)")
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert result.kinds == (kind,)
    assert result.count == 1
    assert result.text.startswith("config note: ") and result.text.endswith(" (rotate soon)")


@pytest.mark.parametrize(("kind", "text"), NEAR_MISSES)
def test_near_misses_of_each_token_kind_survive(kind: str, text: str) -> None:
    assert redact(text) == Redaction(text=text, kinds=(), count=0), kind


# Value patterns: the key, user or host stays, only the value goes. (kind, text, expected)
VALUE_CASES = [
    ("url_password", "postgres://admin:Xq7pW2zLm9@db.internal:5432/app",
     "postgres://admin:[REDACTED:url_password]@db.internal:5432/app"),
    ("url_password", "redis://:s3cr3tPass@cache:6379/0", "redis://:[REDACTED:url_password]@cache:6379/0"),
    ("bearer_token", "Authorization: Bearer mF9q2Lr7Zt4Xw8Kp3Nv6Bj1Hc5Ds0Ya",
     "Authorization: Bearer [REDACTED:bearer_token]"),
    ("bearer_token", "Authorization: Basic dXNlcjpwYXNzd29yZA==",
     "Authorization: Basic [REDACTED:bearer_token]"),
    ("aws_secret_key", "the aws secret access key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "the aws secret access key is [REDACTED:aws_secret_key]"),
    ("aws_secret_key", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]"),
    ("connection_string_key",
     "AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA=;EndpointSuffix=core",
     "AccountName=acct;AccountKey=[REDACTED:connection_string_key];EndpointSuffix=core"),
    ("password_assignment", "the db password is Tr0ub4dor&3horse, keep it safe",
     "the db password is [REDACTED:password_assignment], keep it safe"),
    ("password_assignment", "our secret key: x9Fq2LmZ7tQ for staging",
     "our secret key: [REDACTED:password_assignment] for staging"),
    ("password_assignment", "the api key is AbC12345xyz", "the api key is [REDACTED:password_assignment]"),
    ("high_entropy_secret", 'API_CREDENTIAL_X = "Zr8vQ2mN5xL1pT7wK3yH9bF6dS4gJ0cA"',
     'API_CREDENTIAL_X = "[REDACTED:high_entropy_secret]"'),
    # issue 50: the pattern gaps, one case each
    ("aws_secret_key", "aws secret Zr8vQ2mN5xL1pT7wK3yH9bF6dS4gJ0cA/e+uW8iR for prod",
     "aws secret [REDACTED:aws_secret_key] for prod"),
    ("aws_secret_key", "the secret Zr8vQ2mN5xL1pT7wK3yH9bF6dS4gJ0cA/e+uW8iR",
     "the secret [REDACTED:aws_secret_key]"),
    ("password_assignment",
     "SECRET_KEY_BASE=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
     "SECRET_KEY_BASE=[REDACTED:password_assignment]"),
    ("password_assignment", "DB_PASSWORD_PROD=Wq9rT2zLm5", "DB_PASSWORD_PROD=[REDACTED:password_assignment]"),
    ("password_assignment", "GITHUB_TOKEN_RO=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
     "GITHUB_TOKEN_RO=[REDACTED:password_assignment]"),
    ("password_assignment", "API_KEY_2=Kd83mZq1Lp", "API_KEY_2=[REDACTED:password_assignment]"),
    ("cli_password", "mysql -h db -u root -pS3cretPw0rd shop",
     "mysql -h db -u root -p[REDACTED:cli_password] shop"),
    ("cli_password", "mysqldump -uroot -phunter2x shop > dump.sql",
     "mysqldump -uroot -p[REDACTED:cli_password] shop > dump.sql"),
    ("cli_password", "curl -sf -u admin:Pw0rd9xQ https://ci.internal/api",
     "curl -sf -u admin:[REDACTED:cli_password] https://ci.internal/api"),
    ("cli_password", "docker login -u deploy -p Dk3rPw99zz registry.example.com",
     "docker login -u deploy -p [REDACTED:cli_password] registry.example.com"),
    ("cli_password", "docker login --password=Dk3rPw99zz ghcr.io",
     "docker login --password=[REDACTED:cli_password] ghcr.io"),
]
VALUE_NEAR_MISSES = [
    ("url_password", "http://localhost:8080/path@v2 and https://user@example.com/x"),
    ("url_password", "postgres://admin:${DB_PASSWORD}@db:5432/app"),
    ("url_password", "dsn = f'postgres://{user}:{password}@{host}/db'"),
    ("bearer_token", "send a bearer token in the header; Authorization: Basic realm"),
    ("aws_secret_key", "the aws secret access key is stored in the vault"),
    ("connection_string_key", "AccountKey=<your key>"),
    ("password_assignment", "the password is required and the secret is out"),
    ("password_assignment", "the api key was rotated yesterday"),
    ("password_assignment", "class Config:\n    password: str\n    token: SecretStr | None = None"),
    ("high_entropy_secret",
     'checksum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"'),
    ("high_entropy_secret", 'model = "all-MiniLM-L6-v2-quantized-int8"'),
    ("high_entropy_secret", 'fast_model: str = "Qwen/Qwen3-30B-A3B-Instruct-2507"'),
    ("aws_secret_key", "the secret abcdefghijklmnopqrstuvwxyzabcdefghijklmn is a 40-letter word"),
    ("password_assignment", "token_limit=100000000 and password_field = form.password"),
    ("cli_password", "mysql -u root -p shop; mysql -P3306 -h db; docker login --password-stdin"),
    ("cli_password", "curl -u $USER:$TOKEN https://x and curl -u admin https://y"),
]


@pytest.mark.parametrize(("kind", "text", "expected"), VALUE_CASES)
def test_each_value_kind_keeps_its_surroundings(kind: str, text: str, expected: str) -> None:
    result = redact(text)
    assert result.text == expected
    assert result.kinds == (kind,)


@pytest.mark.parametrize(("kind", "text"), VALUE_NEAR_MISSES)
def test_value_near_misses_survive(kind: str, text: str) -> None:
    assert redact(text) == Redaction(text=text, kinds=(), count=0), kind


def test_every_kind_has_a_positive_and_a_near_miss_case() -> None:
    tested = {kind for kind, _ in CASES} | {kind for kind, _, _ in VALUE_CASES}
    assert tested | {"password_assignment"} == set(KINDS)
    missed = {kind for kind, _ in NEAR_MISSES} | {kind for kind, _ in VALUE_NEAR_MISSES}
    assert missed == set(KINDS)


def test_keep_lines_leaves_the_line_breaks_of_a_pem_block() -> None:
    text = f"a\n{PEM}\nb"
    kept = redact(text, keep_lines=True).text
    assert kept.count("\n") == text.count("\n") and "MIIEpAIBAAKCAQEA" not in kept
    assert redact(text).text == "a\n[REDACTED:private_key]\nb"


def test_tags_are_redacted_one_by_one_and_normal_tags_are_untouched() -> None:
    tags, kinds = redact_tags(["deploy", "db", GITHUB, "postgres://u:Xq7pW2zLm9@h/d"])
    assert tags == ["deploy", "db", "[REDACTED:github_token]", "postgres://u:[REDACTED:url_password]@h/d"]
    assert kinds == ("github_token", "url_password")


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


# issue 52: lines of this repository's own code that name a secret without holding one. Each
# was redacted before (``self.token = [REDACTED:password_assignment]``); all must pass through.
CODE_LINES = [
    "self.token = token  # set at each election; empty admits nobody",
    "self._api_key = api_key",
    "info, token = owner",
    "self.client = InferenceClient(model=ep.base_url, token=token, timeout=ep.timeout_s)",
    "token = secrets.token_urlsafe(32)",
    "collection, url=url, api_key=api_key, prefer_grpc=prefer_grpc, local_path=local_path,",
    "self._client = QdrantClient(url=url, api_key=api_key or None, prefer_grpc=prefer_grpc,",
    "return AccessToken(token=token, client_id=\"sibling\", scopes=[], claims={\"sibling\": True})",
    "brain = Brain(endpoint_settings(home, server, api_key=KEY)).open()",
    "BRAIN__EMBEDDING__DIMENSION=\"300\", BRAIN__EMBEDDING__API_KEY=KEY,",
    "# HUGGINGFACE_API_KEY=                      # = BRAIN__LLM__API_KEY",
    "with the key in the environment: `BRAIN__EMBEDDING__ENDPOINTS__OPENAI__API_KEY=sk-...`, and",
    'sibling -> owner   {"token": "...", "pid": 123}',
    "password = None",
    "secret = True",
    "token = 0",
    "const token = getToken();",
    "let password = user.password;",
    "api_key = self.settings.api_key",
]


@pytest.mark.parametrize("line", CODE_LINES)
def test_code_that_names_a_secret_is_not_redacted(line: str) -> None:
    assert redact(line) == Redaction(text=line, kinds=(), count=0)


def test_the_repositorys_own_tree_has_no_redacted_identifier_assignment() -> None:
    """bench/redaction_fp.py over every tracked file: 0 markers on plain identifier
    assignments (the figure docs/safety.md gives)."""
    from bench.redaction_fp import markers, summarize

    counts = summarize(markers())
    assert counts["markers"] > 0  # the corpora in the tree are still caught
    assert counts["plain_identifier_assignments"] == 0, counts
