"""Secrets never reach the journal: real-looking samples of each kind."""

import pytest

from memory_agent.intake import redact as redact_module
from memory_agent.intake.redact import redact

SAMPLES = {
    "aws": ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "aws secret": (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "github": ("token: ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c"),
    "github fine-grained": (
        "GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW",
        "github_pat_11ABCDEFG",
    ),
    "openai": ('OPENAI_API_KEY="sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"', "sk-proj-abc"),
    "anthropic": (
        "key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdefgh",
        "sk-ant-api03",
    ),
    "slack": ("xoxb-2400000000-2400000000-abcdefghijklmnopqrstuvwx", "xoxb-2400000000"),
    "stripe": ("sk_live_51H8abcdefghijklmnopqrstuv", "sk_live_51H8"),
    "google": ('"api_key": "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI"', "AIzaSyDdI0hCZtE6vySjMm"),
    "jwt": (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    ),
    "url credentials": ("postgres://admin:hunter2secret@db.internal:5432/app", "hunter2secret"),
    "env password": ("DB_PASSWORD: correct-horse-battery", "correct-horse-battery"),
    "private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9u\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9u",
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_secret_is_redacted(name):
    text, secret = SAMPLES[name]
    out = redact(f"before\n{text}\nafter")
    assert secret not in out and "[REDACTED:" in out
    assert out.startswith("before\n") and out.endswith("\nafter")


def test_ordinary_text_survives():
    text = "max_tokens=256 tokenizer=bert author: Jane Doe, ran pytest -k token_refresh"
    assert redact(text) == text


MORE_SAMPLES = {
    "hf": ("HF_TOKEN hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567", "hf_aBcDeFgHiJkLmNoPqRs"),
    "slack webhook": (
        "https://hooks.slack.com/services/T024BE7LD/B01ABCDEF/abcdefghijklmnopqrstuvwx",
        "abcdefghijklmnopqrstuvwx",
    ),
    "azure": ("AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4MTIzNA==;EndpointSuffix=x", "Zm9vYmFy"),
    "curl -u": ("curl -u ci:Hunt3rPassw0rd https://x.io", "Hunt3rPassw0rd"),
    "mysql -p": ("mysqldump -u root -pR00tPassw0rd shop", "R00tPassw0rd"),
    "flag": ("psql --password Sup3rS3cret", "Sup3rS3cret"),
    "netrc": ("machine h login me password N3trcS3cret", "N3trcS3cret"),
    "prose": ("auth failed with password Tr0ub4dor&3 for ci", "Tr0ub4dor&3"),
    "json number": ('{"password": 90817263, "user": "ci"}', "90817263"),
    "json nested": ('{"credentials": {"user": "ci", "secret": "n3stedVal"}}', "n3stedVal"),
    "camelCase key": ('{"clientSecret": "Cl13ntS3cret"}', "Cl13ntS3cret"),
    "pem tail after a cut": (
        "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\nQUJDREVGR0hJSktM\n-----END RSA PRIVATE KEY-----",
        "QUJDREVGR0hJSktM",
    ),
}


@pytest.mark.parametrize("name", sorted(MORE_SAMPLES))
def test_more_shapes_are_redacted(name):
    text, secret = MORE_SAMPLES[name]
    out = redact(f"before\n{text}\nafter")
    assert secret not in out and "[REDACTED" in out
    assert out.endswith("after")


@pytest.mark.parametrize(
    "text",
    [
        "ssh -p2222 host; mkdir -p build",
        '{"max_tokens": 256, "input_tokens": 12, "token_count": 3}',
        "the password prompt appears; password authentication failed for user bob",
        "export PWD=/home/u/src; token_type=bearer",
        "see https://example.com/a:b and key: value",
    ],
)
def test_more_ordinary_text_survives(text):
    assert redact(text) == text


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("password", True),
        ("DB_PASSWORD", True),
        ("apiKey", True),
        ("X-Api-Key", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("client_secret", True),
        ("auth", True),
        ("Cookie", True),
        ("identitytoken", True),
        ("AccountKey", True),
        ("max_tokens", False),
        ("tokenizer", False),
        ("password_file", False),
        ("author", False),
        ("session_id", False),
        ("token_count", False),
        ("keys", False),
    ],
)
def test_secret_names(name, secret):
    assert redact_module.secret_name(name) is secret


def test_structured_redaction_hides_whole_values_and_keeps_the_rest():
    value = {
        "env": {"AWS_SECRET_ACCESS_KEY": "abc/def+ghi", "HOME": "/root", "PWD": "/src"},
        "auth": {"user": "ci", "pass": "x"},
        "items": [{"name": "API_TOKEN", "value": 12345678}, {"name": "MODE", "value": "fast"}],
        "enabled": True,
        "password": None,
    }
    out = redact_module.redact_value(value)
    assert out["env"] == {
        "AWS_SECRET_ACCESS_KEY": "[REDACTED:secret]",
        "HOME": "/root",
        "PWD": "/src",
    }
    assert out["auth"] == "[REDACTED:secret]"
    assert out["items"] == [
        {"name": "API_TOKEN", "value": "[REDACTED:secret]"},
        {"name": "MODE", "value": "fast"},
    ]
    assert out["enabled"] is True and out["password"] is None


def test_redaction_is_idempotent():
    text = " ".join(t for t, _ in [*SAMPLES.values(), *MORE_SAMPLES.values()])
    once = redact(text)
    assert redact(once) == once
