"""The portable path on a Linux machine: memory-agent's own code cannot import `fcntl`.

Loaded by every Python process of a portable run, whatever its PYTHONPATH: scripts/setup puts
a `memory_agent_portable.pth` in the virtualenv that runs this file when the environment names
it (`MEMORY_AGENT_PORTABLE_BLOCK`, set by tests/conftest.py under `MEMORY_AGENT_PORTABLE=1`,
which `scripts/check --portable` sets); conftest runs it in the test process too. An `import fcntl`
written in `memory_agent`, `ragcore` or `legal_web` raises ImportError, as on Windows, so the
code must take its portable path (the lockf lock, the watchfiles watcher, TCP to the daemon).
Third-party packages keep fcntl (the MCP SDK imports it on POSIX and handles Windows itself).
"""

import builtins

OURS = ("memory_agent", "ragcore", "legal_web")
_real_import = builtins.__import__


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if name == "fcntl" and level == 0:
        importer = (globals or {}).get("__name__", "") or ""
        if importer.split(".")[0] in OURS:
            raise ModuleNotFoundError("No module named 'fcntl' (the portable run)", name="fcntl")
    return _real_import(name, globals, locals, fromlist, level)


if not getattr(builtins.__import__, "portable_run", False):
    _import.portable_run = True  # type: ignore[attr-defined]
    builtins.__import__ = _import
