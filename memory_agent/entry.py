"""The `memory-agent` command's entry point: `hook` goes straight to `memory_agent.capture.hooks`
(standard library, no argument parser: an agent runs it on every prompt and tool call);
everything else to the CLI.

A reader that stops early (`memory-agent search … | head -1`) closes the pipe: the command then
exits quietly with status 141, no traceback (`memory_agent.procs.stdout_closed`).
"""

from __future__ import annotations

import sys

from memory_agent.procs import stdout_closed

__all__ = ["main"]


def main() -> int:
    argv = sys.argv[1:]
    try:
        if argv[:1] == ["hook"] and "-h" not in argv and "--help" not in argv:
            from memory_agent.capture.hooks import main as hook_main

            code = hook_main(argv[1:])
        else:
            from memory_agent.cli.main import main as cli_main

            code = cli_main(argv)
        sys.stdout.flush()  # here, so a closed pipe is caught below and not at exit
    except BrokenPipeError:
        return stdout_closed()
    return code
