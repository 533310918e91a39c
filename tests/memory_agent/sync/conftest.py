"""Fixtures of the sync tests: every one runs under git as a person has it configured - commits
signed, signatures in every `git log`, insteadOf aliases, an ssh command of their own
(`tests/memory_agent/person_git.py`); a test that needs another configuration sets its own."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _person_git(person_git):
    return person_git
