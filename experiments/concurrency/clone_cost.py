"""What a write pays for the snapshots: the time of one `ReadModel.clone` of a home's index.

    .venv/bin/python experiments/concurrency/clone_cost.py HOME [--repeat 20]
    .venv/bin/python experiments/concurrency/clone_cost.py --tiny   # a temporary demo home (CI)

Opens the home's live generation (no daemon needed, nothing written) and times `clone()` of
its read model; prints the documents, chunks and the p50 / min in milliseconds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from memory_agent import config
from memory_agent.index.memory import Memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="a temporary demo home, 3 clones")
    args = parser.parse_args()
    if args.tiny:
        import tempfile

        home = Path(tempfile.mkdtemp(prefix="clone-cost-")) / "home"
        Memory(config.load({"home": str(home)})).init(demo=True, embedder="minilm")
        args.home, args.repeat = str(home), 3
    elif not args.home:
        parser.error("give a HOME (or --tiny)")
    memory = Memory(config.load({"home": args.home}))
    with memory.session():
        model = memory.index.snapshot().model
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            model.clone()
            times.append((time.perf_counter() - t) * 1000)
    times.sort()
    print(
        f"documents {len(model.docs)}, chunks {model.chunks}: clone p50 "
        f"{times[len(times) // 2]:.2f} ms, min {times[0]:.2f} ms"
    )


if __name__ == "__main__":
    main()
