"""Secrets never reach the journal: real-looking samples of each kind."""

import pytest

from memory_agent.redact import redact

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
