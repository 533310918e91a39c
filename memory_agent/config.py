"""Configuration: one table of settings, read when used.

Each setting has a name, an environment variable, a default and a help line. Precedence:
command-line flag > environment variable > `config.toml` in the home > default. Nothing is read
at import time (`load()` reads the environment and the file when called), so tests can point
everything at a temporary home with one environment variable.
"""

from __future__ import annotations

import contextlib
import os
from collections import namedtuple
from pathlib import Path

from memory_agent.files import read_toml, set_toml_line

# The hooks import this module on every agent event: typing, the error tree and datetime are
# imported only where needed (about 5 ms of a hook's start-up on 2 cores).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "API_KEY_ENV",
    "QDRANT_API_KEY_ENV",
    "SETTINGS",
    "Config",
    "Setting",
    "embedder_args",
    "endpoint_of",
    "installed_embedder",
    "load",
    "qdrant_of",
    "write_setting",
]

# The `openai` embedder's API key: read from this environment variable only - never a setting,
# so it is never written to config.toml (a key there is refused), logs, the index or a reply.
API_KEY_ENV = "MEMORY_AGENT_EMBEDDING_API_KEY"
QDRANT_API_KEY_ENV = "MEMORY_AGENT_QDRANT_API_KEY"  # a Qdrant server's key: never in a file


Setting = namedtuple("Setting", "name env default help")  # noqa: PYI024 - no typing at start-up


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "home",
        "MEMORY_AGENT_HOME",
        "~/.memory-agent",
        "Where everything lives: kb/, index/, cache/, events/, run/, config.toml.",
    ),
    Setting(
        "embedder",
        "MEMORY_AGENT_EMBEDDER",
        "",
        "Embedding model: `bge-m3` (multilingual, dense + sparse; needs the `bge-m3` extra and "
        "the weights), `minilm` (offline all-MiniLM-L6-v2, English) or `openai` (an "
        "OpenAI-compatible /v1/embeddings server: embedding_url, embedding_model). Empty: "
        "`bge-m3` where its extra (FlagEmbedding) is installed, else `minilm`.",
    ),
    Setting(
        "embedding_url",
        "MEMORY_AGENT_EMBEDDING_URL",
        "",
        "For the `openai` embedder: the server's base URL, with or without /v1 (e.g. "
        "http://localhost:11434/v1 for Ollama); the embeddings are posted to <base>/v1/"
        "embeddings. No user, password or query in it: the API key is read from "
        "MEMORY_AGENT_EMBEDDING_API_KEY only.",
    ),
    Setting(
        "embedding_model",
        "MEMORY_AGENT_EMBEDDING_MODEL",
        "",
        "For the `openai` embedder: the model name the server knows (e.g. nomic-embed-text). "
        "The index's model id names the server's host and port, this name and the dimension: "
        "changing any of them asks for a rebuild.",
    ),
    Setting(
        "embedding_batch_size",
        "MEMORY_AGENT_EMBEDDING_BATCH_SIZE",
        64,
        "For the `openai` embedder: at most this many texts per request.",
    ),
    Setting(
        "embedding_timeout",
        "MEMORY_AGENT_EMBEDDING_TIMEOUT",
        30,
        "For the `openai` embedder: seconds a request may take. A connection error, a "
        "timeout, 429 or 5xx is retried 3 times (backoff 0.5, 1, 2 s), then reported.",
    ),
    Setting(
        "model_path",
        "MEMORY_AGENT_MODEL_PATH",
        "",
        "A local directory with the embedder's weights (empty: the default for the embedder).",
    ),
    Setting(
        "runtime",
        "MEMORY_AGENT_RUNTIME",
        "auto",
        "How MiniLM runs: `onnx` (ONNX Runtime, its graph built once from the shipped weights "
        "into the cache folder; the same vectors, no torch), `torch` (needs the bge-m3 extra), "
        "or `auto` (onnx when onnxruntime is installed).",
    ),
    Setting(
        "query_precision",
        "MEMORY_AGENT_QUERY_PRECISION",
        "int8",
        "MiniLM on onnx: a query's graph, `int8` (a third less CPU per search, the same "
        "answers on the benchmarks; ADR 0027) or `float`. Entries stay float: no rebuild; a "
        "running daemon takes it at its next start (`memory-agent stop`).",
    ),
    Setting(
        "cache",
        "MEMORY_AGENT_CACHE",
        "",
        "Embedding cache directory (empty: <home>/cache). Safe to delete.",
    ),
    Setting(
        "max_chars", "MEMORY_AGENT_MAX_CHARS", 1500, "Largest chunk, in characters of body text."
    ),
    Setting(
        "idle_exit",
        "MEMORY_AGENT_IDLE_EXIT",
        1800,
        "Seconds without a request after which the daemon exits (0: never). The next call "
        "starts it again.",
    ),
    Setting(
        "read_processes", "MEMORY_AGENT_READ_PROCESSES", 0, "Search processes (ADR 0028); 0: none."
    ),
    Setting(
        "machine",
        "MEMORY_AGENT_MACHINE",
        "",
        "This machine's name in the `Memory-Agent-Machine` trailer of the KB's commits "
        "(empty: the host name).",
    ),
    Setting(
        "sync_interval",
        "MEMORY_AGENT_SYNC_INTERVAL",
        300,
        "Seconds between the daemon's rounds of sync with the KB's remote (also shortly after "
        "a write and at a session's start; 0: only `memory-agent sync`).",
    ),
    Setting(
        "clock",
        "MEMORY_AGENT_CLOCK",
        "",
        "A fixed time (ISO 8601, e.g. 2026-11-30T09:00:00Z) the memory takes as now: entry "
        "dates, usage events, recency, dormancy, gc. Empty: the system clock. For tests and "
        "experiments.",
    ),
    Setting(
        "request_ttl",
        "MEMORY_AGENT_REQUEST_TTL",
        86400,
        "Seconds a write's reply is kept under its request_id for a retry to get back. After "
        "that the id may be used again.",
    ),
    Setting(
        "capture",
        "MEMORY_AGENT_CAPTURE",
        "on",
        "`on`: the agent hooks write each turn to the journal (redacted); `off`: hooks write "
        "nothing and inject nothing.",
    ),
    Setting(
        "inject",
        "MEMORY_AGENT_INJECT",
        "on",
        "`on`: the prompt hook adds relevant memory to the agent's context; `off`: capture only.",
    ),
    Setting(
        "recall_limit",
        "MEMORY_AGENT_RECALL_LIMIT",
        6,
        "At most this many snippets injected before a prompt.",
    ),
    Setting(
        "inject_budget",
        "MEMORY_AGENT_INJECT_BUDGET",
        3000,
        "At most this many characters injected before a prompt, and at a session's start "
        "(the best snippets first; a snippet that would pass it is left out).",
    ),
    Setting(
        "hook_budget_ms",
        "MEMORY_AGENT_HOOK_BUDGET_MS",
        1500,
        "A hook that has not finished in this time exits 0 with no output (the agent goes on).",
    ),
    Setting(
        "journal_retention_days",
        "MEMORY_AGENT_JOURNAL_RETENTION_DAYS",
        90,
        "Episodes older than this leave the index (their journal lines stay on disk, gzipped).",
    ),
    Setting(
        "gate",
        "MEMORY_AGENT_GATE",
        "propose",
        "What the ingest gate does with a lesson verified by recurring outcomes: `propose` "
        "(default) puts it in the inbox for memory_accept, `auto` writes it to the KB (source: "
        "auto; a person opts in), `off`.",
    ),
    Setting(
        "gate_min_episodes",
        "MEMORY_AGENT_GATE_MIN_EPISODES",
        3,
        "A failure->fix must be seen in at least this many episodes to become a lesson.",
    ),
    Setting(
        "gate_min_sessions",
        "MEMORY_AGENT_GATE_MIN_SESSIONS",
        2,
        "... of at least this many sessions.",
    ),
    Setting(
        "summarizer",
        "MEMORY_AGENT_SUMMARIZER",
        "chat",
        "What may rewrite the text of a lesson the gate writes: `chat` (built in: the "
        "OpenAI-compatible endpoint at summarizer_url; nothing while that is empty) or a name "
        "a package registers under the entry-point group `memory_agent.summarizers`. The "
        "gate's decision is never the summarizer's.",
    ),
    Setting(
        "summarizer_url",
        "MEMORY_AGENT_SUMMARIZER_URL",
        "",
        "For the `chat` summarizer: an OpenAI-compatible chat endpoint (e.g. "
        "http://127.0.0.1:11434/v1 for Ollama) that rewrites a lesson's text; empty (default): "
        "heuristics only. The gate's decision is never the model's.",
    ),
    Setting(
        "summarizer_model",
        "MEMORY_AGENT_SUMMARIZER_MODEL",
        "",
        "The model name the `chat` summarizer's endpoint expects.",
    ),
    Setting(
        "start_timeout",
        "MEMORY_AGENT_START_TIMEOUT",
        60,
        "Seconds a client (the proxy, the CLI, the browser) waits for a daemon it started to "
        "answer before it reports `daemon`.",
    ),
    Setting(
        "repos",
        "MEMORY_AGENT_REPOS",
        "",
        "The read-only corpora list (empty: <home>/repos.json).",
    ),
    Setting(
        "watcher",
        "MEMORY_AGENT_WATCHER",
        "auto",
        "How the daemon learns that files changed: `inotify` (Linux, exact), `watchfiles` "
        "(any OS: FSEvents, ReadDirectoryChangesW, inotify; a change made outside memory-agent "
        "is seen some milliseconds later), `rescan` (every search stats the files: always "
        "right, slower at size) or `auto` (inotify on Linux, watchfiles elsewhere where it is "
        "installed, else rescan). experiments/watchers measures each.",
    ),
    Setting(
        "no_inotify",
        "MEMORY_AGENT_NO_INOTIFY",
        0,
        "1: the same as `watcher = rescan` (kept for homes that set it before `watcher` "
        "existed). 0 (default): the `watcher` setting decides.",
    ),
    Setting(
        "transport",
        "MEMORY_AGENT_TRANSPORT",
        "auto",
        "How clients reach the daemon: `unix` (a socket file in <home>/run, owner-only), "
        "`tcp` (127.0.0.1 on a free port, every request carrying the token in "
        "<home>/run/daemon.json) or `auto` (unix where the OS has Unix sockets, else tcp: "
        "Windows).",
    ),
    Setting(
        "fault",
        "MEMORY_AGENT_FAULT",
        "",
        "A test hook, never for normal use (the fault points of memory_agent.faults): "
        "`after-write` or `after-commit` kills the process at that step of a write, "
        "`pause-rebuild` holds a rebuild before it embeds, `pause-commit` a commit between "
        "staging and moving HEAD, `pause-open` the daemon's open of the index at its start "
        "and `pause-sync-embed` a round of sync after a batch of its pre-embedding (until "
        "<home>/run/fault-continue exists). Empty (default): none.",
    ),
    Setting(
        "dense_graph",
        "MEMORY_AGENT_DENSE_GRAPH",
        "on",
        "on (default): above 50,000 chunks the dense channel searches an HNSW graph of int8 "
        "vectors (built in the background, saved beside the index) and rescores its candidates "
        "exactly; off: the exact scan at every size (slower at scale; for comparing).",
    ),
    Setting(
        "qdrant_url",
        "MEMORY_AGENT_QDRANT_URL",
        "",
        "A Qdrant server URL (empty: the embedded store under <home>/index). Each index "
        "generation becomes a collection on the server. Its API key, if it needs one, comes "
        "from MEMORY_AGENT_QDRANT_API_KEY only. A local folder instead of a URL runs the same "
        "code on qdrant-client's in-process engine (one process, no server; for trying it).",
    ),
)


class Config:
    """The settings' values, as attributes (`cfg.embedder`)."""

    def __init__(self, values: dict[str, Any]):
        self.values = values

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError as exc:
            raise AttributeError(name) from exc

    @property
    def home_dir(self) -> Path:
        return Path(os.path.expanduser(str(self.values["home"]))).resolve()

    @property
    def cache_dir(self) -> Path:
        return (
            Path(os.path.expanduser(self.values["cache"]))
            if self.values["cache"]
            else self.home_dir / "cache"
        )

    @property
    def index_dir(self) -> Path:
        return self.home_dir / "index"


def _coerce(setting: Setting, value: Any) -> Any:
    if isinstance(setting.default, int) and not isinstance(value, int):
        try:
            return int(value)
        except ValueError as exc:
            if setting.name in ("start_timeout", "embedding_timeout"):  # a fraction is fine
                with contextlib.suppress(ValueError):
                    return float(value)
            raise _config_error(
                f"{setting.env}={value!r}: {setting.name} must be a whole number",
                f"set {setting.env} (or {setting.name} in config.toml) to a number",
            ) from exc
    if setting.name == "query_precision":
        precision = str(value).strip().lower() or str(setting.default)
        if precision not in ("int8", "float"):  # ragcore's QUERY_PRECISIONS (numpy: not here)
            raise _config_error(
                f"{setting.env}={value!r}: query_precision is int8 or float",
                f"set {setting.env} (or query_precision in config.toml) to int8 or float",
            )
        return precision
    if setting.name == "clock" and value:
        try:
            from memory_agent.clock import parse_time

            parse_time(str(value))
        except ValueError as exc:
            raise _config_error(
                f"{setting.env}={value!r}: {exc}", "unset it to use the system clock"
            ) from exc
    return value


def installed_embedder() -> str:
    """The default model follows the install: `bge-m3` where its extra is installed (the
    design's model, for machines with a network), else the offline `minilm`."""
    import importlib.util

    return "bge-m3" if importlib.util.find_spec("FlagEmbedding") is not None else "minilm"


def embedder_args(cfg: Config) -> dict[str, Any]:
    """The keywords of `ragcore.make_embedder` for the configured embedder (after its name):
    the weights, the runtime, the folder for derived model files, and for `openai` the
    endpoint's options, with the API key from the environment."""
    args: dict[str, Any] = {
        "model_path": cfg.model_path or None,
        "runtime": cfg.runtime,
        "work_dir": cfg.cache_dir,
    }
    if cfg.embedder == "minilm":
        args["options"] = {"query_precision": str(cfg.query_precision)}
    if cfg.embedder == "openai":
        args["options"] = {
            "url": str(cfg.embedding_url),
            "model": str(cfg.embedding_model),
            "api_key": os.environ.get(API_KEY_ENV) or None,
            "batch_size": int(cfg.embedding_batch_size),
            "timeout": float(cfg.embedding_timeout),
        }
    return args


def qdrant_of(cfg: Config) -> dict[str, str | None]:
    """The index's Qdrant arguments: `qdrant_url` is a server (`http(s)://host:6333`, its key
    from QDRANT_API_KEY_ENV) or a local folder (qdrant-client's in-process engine: one process,
    no server); empty: the in-memory read model."""
    where = str(cfg.qdrant_url or "").strip()
    if not where:
        return {}
    if where.startswith(("http://", "https://")):
        return {"qdrant_url": where, "qdrant_api_key": os.environ.get(QDRANT_API_KEY_ENV) or None}
    return {"qdrant_location": str(Path(where).expanduser())}


def endpoint_of(cfg: Config) -> dict[str, str] | None:
    """The `openai` embedder's server and model as the settings give them (None for another
    embedder): what health and status show, never the key."""
    if cfg.embedder != "openai":
        return None
    return {"url": str(cfg.embedding_url), "model": str(cfg.embedding_model)}


def _config_error(message: str, fix: str):
    from memory_agent.errors import ConfigError

    return ConfigError(message, fix)


def load(overrides: dict[str, Any] | None = None) -> Config:
    """Settings from flags (`overrides`, None values ignored), environment, config.toml, defaults."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    values: dict[str, Any] = {}
    home = overrides.get("home") or os.environ.get("MEMORY_AGENT_HOME") or "~/.memory-agent"
    file_values: dict[str, Any] = {}
    config_file = Path(os.path.expanduser(str(home))) / "config.toml"
    if config_file.is_file():
        try:
            file_values = read_toml(config_file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise _config_error(
                f"{config_file}: not valid TOML ({exc})", f"fix or delete {config_file}"
            ) from exc
    if file_values:
        _check_keys(file_values, config_file)
    for s in SETTINGS:
        if s.name in overrides:
            raw = overrides[s.name]
        elif s.env in os.environ:
            raw = os.environ[s.env]
        elif s.name in file_values:
            raw = file_values[s.name]
        else:
            raw = s.default
        values[s.name] = _coerce(s, raw)
    if not values["embedder"]:
        values["embedder"] = installed_embedder()
    values["home"] = home
    return Config(values)


def _check_keys(file_values: dict[str, Any], config_file: Path) -> None:
    """Refuse a key config.toml holds that is not a setting: a typo (`embeder`) would
    otherwise do nothing, silently. Names the nearest setting, or says it may come from a
    newer version. Every setting is in `SETTINGS`, so this check grows with the table."""
    names = [s.name for s in SETTINGS]
    unknown = [k for k in file_values if k not in names]
    if not unknown:
        return
    import difflib

    key = unknown[0]
    if "key" in key.lower() or "token" in key.lower() or "secret" in key.lower():
        raise _config_error(  # named, never shown: its value may be a credential
            f"{config_file}: {key!r} is not a setting: an API key is never read from config.toml",
            f"delete the line from {config_file} and set "
            f"{QDRANT_API_KEY_ENV if 'qdrant' in key.lower() else API_KEY_ENV} in the environment "
            "of the agent (or shell) that starts memory-agent",
        )
    nearest = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if nearest:
        raise _config_error(
            f"{config_file}: unknown key {key!r}; the nearest setting is {nearest[0]!r}",
            f"rename {key!r} to {nearest[0]!r} in {config_file} (or delete the line); the "
            "README's Configuration table lists every setting",
        )
    raise _config_error(
        f"{config_file}: unknown key {key!r} (from a newer version of memory-agent?); "
        f"this version's settings are {', '.join(names)}",
        f"delete the line from {config_file}, or upgrade memory-agent if a newer version wrote it",
    )


def write_setting(home: Path, name: str, value: str) -> bool:
    """Set `name = "value"` in `<home>/config.toml` (owner-only), keeping every other line.
    True if the file changed."""
    if name not in {s.name for s in SETTINGS}:
        raise _config_error(f"unknown setting {name!r}", "see the settings table in the README")
    return set_toml_line(Path(home) / "config.toml", name, f'"{value}"')
