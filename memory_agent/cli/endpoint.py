"""The `openai` embedder on the command line: its flags (`--embedding-url`, `--embedding-model`,
for `init` and `eval`) and `init`'s check that its server answers before anything is written."""

from __future__ import annotations

import argparse

from memory_agent import config as config_mod

__all__ = ["add_endpoint_flags", "checked_endpoint"]


def add_endpoint_flags(p: argparse.ArgumentParser) -> None:
    """The `openai` embedder's server and model (the settings embedding_url, embedding_model)."""
    p.add_argument(
        "--embedding-url",
        metavar="URL",
        help="with --embedder openai: the server's base URL, with or without /v1 (Ollama: "
        "http://localhost:11434/v1)",
    )
    p.add_argument(
        "--embedding-model",
        metavar="NAME",
        help="with --embedder openai: the embedding model's name on that server (Ollama: "
        "nomic-embed-text)",
    )


INIT_ENDPOINT_EXAMPLE = (
    "memory-agent init --embedder openai --embedding-url http://localhost:11434/v1 "
    "--embedding-model nomic-embed-text (your server's base URL and embedding model; the "
    "README's 'Your own embedder' lists the URL of Ollama, LM Studio, llama.cpp, TEI, vLLM)"
)


def checked_endpoint(
    args: argparse.Namespace, cfg: config_mod.Config
) -> tuple[dict[str, str] | None, str | None]:
    """For `--embedder openai` (or a home that uses it): the endpoint's settings to write and
    its model id, after the server answered one request - so a URL or model that does not work
    changes nothing. (None, None) for the other embedders."""
    from memory_agent.errors import Invalid
    from ragcore import make_embedder

    name = args.embedder or cfg.embedder
    if name == "openai" and not (args.embedder or args.embedding_url or args.embedding_model):
        if (cfg.home_dir / "kb").exists():
            return None, None  # nothing to change: the server is not asked
    if name != "openai":
        if args.embedding_url or args.embedding_model:
            raise Invalid(
                "--embedding-url and --embedding-model are for --embedder openai",
                INIT_ENDPOINT_EXAMPLE,
            )
        return None, None
    url = args.embedding_url or cfg.embedding_url
    model = args.embedding_model or cfg.embedding_model
    missing = [
        flag for flag, v in (("--embedding-url", url), ("--embedding-model", model)) if not v
    ]
    if missing:
        raise Invalid(
            f"init --embedder openai: no {' and no '.join(missing)}", INIT_ENDPOINT_EXAMPLE
        )
    probe = config_mod.load(
        {"home": args.home, "embedder": "openai", "embedding_url": url, "embedding_model": model}
    )
    embedder_args = config_mod.embedder_args(probe)
    embedder_args["work_dir"] = None  # nothing written before the switch is made
    embedder = make_embedder("openai", **embedder_args)
    embedder.load()  # type: ignore[attr-defined] - one request; EndpointError if it fails
    return {"embedding_url": url, "embedding_model": model}, embedder.model_id
