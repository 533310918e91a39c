"""Fixtures for the legal_web tests: the bundled sample data, an engine on a temporary home."""

from __future__ import annotations

import json

import pytest

from legal_web.engine import LegalEngine, default_data_dir


@pytest.fixture(scope="session")
def questions() -> list[dict]:
    text = (default_data_dir() / "questions.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def engine(tmp_path_factory, shared_cache) -> LegalEngine:
    home = tmp_path_factory.mktemp("legal-web-home")
    (home / "cache").symlink_to(shared_cache)  # embeddings shared with the other tests
    eng = LegalEngine(default_data_dir(), home)
    eng.load()
    yield eng
    eng.close()
