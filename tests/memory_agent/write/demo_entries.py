"""The demo KB's entry file the checks and rollback tests edit (`UV`), and the KB's HEAD (`_head`)."""

from tests.memory_agent.helpers import git

UV = "decision/use-uv-for-locking.md"


def _head(memory):
    return git(memory.kb_dir, "rev-parse", "HEAD").strip()
