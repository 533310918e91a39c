"""The `memory-agent` command's entry point: `hook` goes straight to `memory_agent.capture.hooks`
(standard library, no argument parser: an agent runs it on every prompt and tool call);
everything else to the CLI.

A reader that stops early (`memory-agent search … | head -1`) closes the pipe: the command then
exits quietly with status 141 (128 + SIGPIPE, what a shell reports for a command killed by a
closed pipe, so `set -o pipefail` still sees that the output was cut), no traceback. This is
the recipe of the Python docs (`signal` module, "Note on SIGPIPE"): point stdout at devnull so
the interpreter's last flush cannot fail again.
"""

from __future__ import annotations

import os
import sys

__all__ = ["EXIT_PIPE_CLOSED", "main", "stdout_closed"]

EXIT_PIPE_CLOSED = 141


def stdout_closed() -> int:
    """The reader of stdout went away: drop whatever is left and return 141."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (an embedding caller)
        pass
    return EXIT_PIPE_CLOSED


def main() -> int:
    argv = sys.argv[1:]
    try:
        if argv[:1] == ["hook"] and "-h" not in argv and "--help" not in argv:
            from memory_agent.capture.hooks import main as hook_main

            code = hook_main(argv[1:])
        else:
            from memory_agent.cli import main as cli_main

            code = cli_main(argv)
        sys.stdout.flush()  # here, so a closed pipe is caught below and not at exit
    except BrokenPipeError:
        return stdout_closed()
    return code
