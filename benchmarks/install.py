"""What an install costs, as a person gets it with pipx or `uv tool install`: the wheel built
from a clean copy of this checkout, installed into a fresh venv, then the first
`memory-agent init --demo` with an empty model cache - timed and weighed.

    .venv/bin/python benchmarks/install.py                  # the default install (no extras)
    .venv/bin/python benchmarks/install.py --extras bge-m3  # with BGE-M3 (torch first, pinned)

Prints one JSON line: the wheel's size; the install's seconds, the venv's MB, its number of
distributions and any torch / nvidia-* / triton among them; the first init's seconds and the MB
of weights it downloaded. The Hugging Face hub is unreachable from the machines this project
is built on, so the weights come from `benchmarks/hub_standin.py` on 127.0.0.1 (the same files
at the hub's URL layout): the download's time is a loopback's, not a network's. pip's own
download cache is used as it is (say whether it was warm when you quote a time).
tests/test_install.py checks the same install works (no torch, init --demo, a search, an add).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "triton", "nvidia-")


def clean_copy(dest: Path) -> Path:
    """The files git tracks (committed or not), as a clean clone would have them."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, names):
        src = ROOT / raw.decode()
        if src.is_file():
            target = dest / raw.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def build(source: Path, outdir: Path) -> dict:
    """`python -m build`: the sdist, then the wheel built from it (as PyPI's users get it)."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(outdir), str(source)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError("python -m build failed:\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    wheel = next(outdir.glob("*.whl"))
    return {
        "wheel": wheel,
        "sdist": next(outdir.glob("*.tar.gz")),
        "build_seconds": round(time.monotonic() - start, 1),
        "wheel_mb": round(wheel.stat().st_size / 1e6, 2),
    }


def install(venv: Path, wheel: Path, extras: str = "") -> dict:
    """Create `venv` and install `wheel` into it (with `extras`): the product alone, no test
    tools, no weights package."""
    start = time.monotonic()
    # nothing of this checkout on the path: pip would take a checkout's metadata on
    # PYTHONPATH (an egg-info) for the package installed, and skip it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    if "bge-m3" in extras.split(","):
        subprocess.run([*pip, "torch==2.13.0"], check=True, env=env)
    subprocess.run([*pip, f"{wheel}[{extras}]" if extras else str(wheel)], check=True, env=env)
    seconds = time.monotonic() - start
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    if not any(d["name"] == "memory-agent" for d in json.loads(listed.stdout)):
        raise RuntimeError(f"{wheel.name} is not installed in {venv}")
    dists = [d["name"].lower() for d in json.loads(listed.stdout)]
    return {
        "extras": extras or "(none)",
        "install_seconds": round(seconds, 1),
        "venv_mb": round(_size(venv) / 1e6),
        "distributions": len(dists),
        "heavy": sorted(d for d in dists if d.startswith(HEAVY)),
    }


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def user_env(work: Path, endpoint: str) -> dict[str, str]:
    """A person's environment on a fresh machine: a new home, an empty cache, the hub at
    `endpoint`; nothing of this checkout's (no PYTHONPATH, no MEMORY_AGENT_* of the caller)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMORY_AGENT_", "HF_")) and k not in ("PYTHONPATH", "XDG_CACHE_HOME")
    }
    env.update(
        HOME=str(work / "user"),
        MEMORY_AGENT_HOME=str(work / "home"),
        MEMORY_AGENT_IDLE_EXIT="120",
        HF_ENDPOINT=endpoint,
    )
    return env


def first_init(venv: Path, env: dict[str, str]) -> dict:
    """`memory-agent init --demo` on a new home with an empty cache: its seconds and reply."""
    start = time.monotonic()
    proc = subprocess.run(
        [str(venv / "bin" / "memory-agent"), "init", "--demo", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError("first init failed:\n" + proc.stdout[-2000:] + proc.stderr[-2000:])
    return {"init_seconds": round(seconds, 1), "reply": json.loads(proc.stdout)}


def main() -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's ragcore
    from hub_standin import HubStandIn, package_files

    from ragcore.minilm_weights import REVISION

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="", help="comma-separated extras, e.g. bge-m3,qdrant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        built = build(clean_copy(work / "src"), work / "dist")
        report = {"wheel_mb": built["wheel_mb"], "build_seconds": built["build_seconds"]}
        report.update(install(work / "venv", built["wheel"], args.extras))
        with HubStandIn(package_files(), REVISION) as hub:
            env = user_env(work, hub.url)
            env["MEMORY_AGENT_EMBEDDER"] = "minilm"  # the default without the bge-m3 extra
            try:
                init = first_init(work / "venv", env)
            finally:
                subprocess.run(
                    [str(work / "venv" / "bin" / "memory-agent"), "stop"],
                    env=env,
                    capture_output=True,
                    timeout=60,
                )
        report.update(
            init_seconds=init["init_seconds"],
            weights_downloaded_mb=round(hub.sent / 1e6, 1),
            weights_from="a stand-in for the hub on 127.0.0.1 (the hub is unreachable here)",
            home_mb=round(_size(work / "home") / 1e6, 1),
            entries=init["reply"]["index"]["entries"],
        )
        print(json.dumps(report))


if __name__ == "__main__":
    main()
