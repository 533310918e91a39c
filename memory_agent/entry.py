"""The `memory-agent` command's entry point: `hook` goes straight to `memory_agent.hooks`
(standard library, no argument parser: an agent runs it on every prompt and tool call);
everything else to the CLI."""

from __future__ import annotations

import sys


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and "-h" not in argv and "--help" not in argv:
        from memory_agent.hooks import main as hook_main

        return hook_main(argv[1:])
    from memory_agent.cli import main as cli_main

    return cli_main(argv)
