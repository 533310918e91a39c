"""Regression tests of reported defects reuse the memory_agent fixtures (real homes, real git)."""

from tests.legal_web.conftest import engine  # noqa: F401, E402
from tests.memory_agent.conftest import env_home, gateway, memory, minilm_model  # noqa: F401
