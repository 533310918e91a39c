"""What project identity costs the hook (issue 33, item 4): `identify(folder)` - which the hook
runs on every prompt - timed in a fresh process per code checkout, for a repository whose
remote is a full URL with no alias configured, and one cloned through an `insteadOf` alias.

    python experiments/project-identity/measure.py [--before CHECKOUT] [--runs N] [--tiny]

`--before`: another checkout of memory-agent (the code before the change) measured the same
way, beside this one. Each case: `runs` calls after one warm-up, median and p95 in ms, and the
identity found. A git configuration of the script's own (`GIT_CONFIG_GLOBAL`) holds the alias.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, statistics, sys, time
from memory_agent.intake.projects import identify
folder, runs = sys.argv[1], int(sys.argv[2])
identify(folder)
times = []
for _ in range(runs):
    t = time.perf_counter()
    found = identify(folder)
    times.append((time.perf_counter() - t) * 1000)
times.sort()
print(json.dumps({"median_ms": round(statistics.median(times), 2),
                  "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
                  "identity": found.identity if found else None}))
"""


def git(*args: str, env: dict) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="another checkout: the code before the change")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tiny", action="store_true", help="5 runs (the suite's smoke run)")
    args = parser.parse_args()
    runs = 5 if args.tiny else args.runs
    with tempfile.TemporaryDirectory(prefix="project-identity-") as tmp:
        root = Path(tmp)
        plain_config, alias_config = root / "plain.gitconfig", root / "alias.gitconfig"
        plain_config.write_text("[user]\n\tname = m\n\temail = m@x\n")
        alias_config.write_text(
            plain_config.read_text() + '[url "git@github.com:"]\n\tinsteadOf = gh:\n'
        )
        cases = {
            "no alias": (root / "alpha", "git@github.com:acme/alpha.git", plain_config),
            "insteadOf alias": (root / "alpha-gh", "gh:acme/alpha", alias_config),
        }
        for folder, url, config in cases.values():
            env = dict(os.environ, GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1")
            git("init", "-q", str(folder), env=env)
            git("-C", str(folder), "remote", "add", "origin", url, env=env)
        checkouts = [("this checkout", HERE)]
        if args.before:
            checkouts.insert(0, ("before", Path(args.before).resolve()))
        for label, code in checkouts:
            for case, (folder, _, config) in cases.items():
                env = dict(
                    os.environ,
                    PYTHONPATH=str(code),
                    GIT_CONFIG_GLOBAL=str(config),
                    GIT_CONFIG_NOSYSTEM="1",
                )
                out = subprocess.run(
                    [sys.executable, "-c", PROBE, str(folder), str(runs)],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=root,  # (`-c` puts the cwd first on sys.path: not a checkout)
                    check=True,
                    timeout=600,
                )
                result = json.loads(out.stdout)
                print(json.dumps({"code": label, "case": case, "runs": runs, **result}))


if __name__ == "__main__":
    main()
