"""Fixtures shared by the whole test suite."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_bge_m3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BGE-M3-shaped model directory (built offline, once per session)."""
    for module in ("torch", "transformers", "FlagEmbedding"):
        pytest.importorskip(module, reason="BGE-M3 tests need the bge-m3 extra")
    from tests.fixtures.tiny_bge_m3 import build_tiny_bge_m3

    return build_tiny_bge_m3(tmp_path_factory.mktemp("tiny-bge-m3"))


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the session: the demo entries are embedded once."""
    return tmp_path_factory.mktemp("embedding-cache")
