"""The hook command `memory-agent init` prints: `<python> -S <this file> EVENT --home H`.

An agent runs a hook on every prompt, tool call and stop, so its start-up is the cost: `-S`
skips `site` (the .pth files of every installed package, ~18 ms on 2 cores), which the hook
does not need - it imports only the standard library and this package, found from this
file's own location. `memory-agent hook EVENT` is the same command, slower to start.
"""

import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from memory_agent.capture.hooks import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
