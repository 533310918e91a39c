"""`memory-agent ...`: the argument tree (`build_parser`) and the dispatch (`main`). The command
shells are in `memory_agent.cli.entries`, `.home`, `.imports` and `.evaluate`."""

from __future__ import annotations

import argparse
import json
import sys

from memory_agent import __version__
from memory_agent.cli import entries, evaluate, home, imports, model, sync
from memory_agent.cli.endpoint import add_endpoint_flags
from memory_agent.cli.groups import grouped

EMBEDDERS = ("minilm", "bge-m3", "openai")

TYPES_HELP = (
    "principle, correction, decision, guideline, pitfall, process, model, fact, preference or note"
)
HOME_HELP = "the memory's home directory (default: $MEMORY_AGENT_HOME, else ~/.memory-agent)"
PROJECT_HELP = (
    "act from another project: a folder in its repository, its name or its identity "
    "(default: the working directory's project; see `memory-agent project`)"
)
EXIT_CODES = """exit status: 0 success; 2 refused or bad arguments (nothing was written; the message
says why and what to do); 1 an unexpected failure (a bug: a traceback follows); 130
interrupted (Ctrl-C); 141 the reader closed the pipe (`| head`)."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where there is one worth saying (not None or False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse with our error contract: `--json` gets `{"error": {...}}`, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from memory_agent.errors import ErrorInfo

        info = ErrorInfo("invalid", message, f"see `{self.prog} --help`")
        if "--json" in sys.argv[1:]:
            print(json.dumps({"error": info.as_json()}, ensure_ascii=False))
        self.print_usage(sys.stderr)
        print(f"{self.prog}: {info.code}: {message}\n  fix: {info.fix}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memory-agent",
        usage="memory-agent [--home HOME] COMMAND ... (memory-agent COMMAND --help)",
        description="Long-term memory for coding agents: a Markdown knowledge base in git, "
        "searched through a resident daemon over MCP.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--home", help=HOME_HELP)
    parser.add_argument("--version", action="version", version=f"memory-agent {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=_Parser,
        help=argparse.SUPPRESS,
    )
    helps: dict[str, str] = {}  # listed by job (GROUPS) in the epilog

    def command(name: str, func, help: str, description: str | None = None):
        helps[name] = help
        p = sub.add_parser(name, description=description or help, epilog=EXIT_CODES)
        p.formatter_class = _Help
        p.add_argument(
            "--json",
            action="store_true",
            help='print one JSON object on stdout (errors: {"error": {code, message, fix}})',
        )
        p.add_argument("--home", default=argparse.SUPPRESS, help=HOME_HELP)
        p.set_defaults(func=func)
        return p

    p = command(
        "init",
        home.cmd_init,
        "create (or adopt) the home and its git knowledge base",
        "Create the home directory and kb/ as a git repository (an existing directory "
        "or repository is adopted, never overwritten), then build the index. Run it again "
        "with --embedder to switch models: the daemon of the old one is stopped. --embedder "
        "openai (an OpenAI-compatible /v1/embeddings server) needs --embedding-url and "
        "--embedding-model; config.toml is written once the server answered. Its API key "
        "is read from MEMORY_AGENT_EMBEDDING_API_KEY only.",
    )
    p.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        help="write this embedder to config.toml (a new home without it uses bge-m3 where "
        "the bge-m3 extra is installed, else minilm, the offline model)",
    )
    add_endpoint_flags(p)
    p.add_argument(
        "--demo", action="store_true", help="add the 79 demo entries (one commit, dated from now)"
    )
    p.add_argument(
        "--no-index", action="store_true", help="do not start the daemon to build the index now"
    )
    p.add_argument(
        "--print-config",
        action="store_true",
        help="also print the MCP server, hook and permission settings to paste by hand "
        "(`memory-agent connect AGENT` merges them for you; --json always has them)",
    )

    p = command(
        "connect",
        home.cmd_connect,
        "merge the MCP server, hooks and permission rule into an agent's settings files",
        "Show the change to AGENT's own settings files (the MCP server of this home, the "
        "capture hooks, the permission rule for the read-only memory tools); with --confirm, "
        "write it, keeping a backup of each file it changes. Running it again changes nothing; "
        "--remove takes out exactly what it put in. The files are found from $HOME "
        "($CLAUDE_CONFIG_DIR, $CODEX_HOME and $XDG_CONFIG_HOME are honoured).",
    )
    p.add_argument(
        "agent",
        choices=("claude-code", "codex", "opencode", "cursor"),
        help="the agent whose settings files get the MCP server, the hooks and the permission rule",
    )
    p.add_argument("--confirm", action="store_true", help="write the change (default: preview)")
    p.add_argument("--remove", action="store_true", help="take memory-agent's settings out")

    p = command("add", entries.cmd_add, "add an entry (dedup, validate, write, commit, index)")
    p.add_argument(
        "--kb",
        help="the knowledge base to write to: personal (default) or one `memory-agent kb list` "
        "names, such as team",
    )
    p.add_argument("--title", required=True, help="one line saying the point (at most 200 chars)")
    p.add_argument("--type", default="note", help=f"the kind of entry: {TYPES_HELP}")
    p.add_argument("--tag", action="append", help="a tag (a short word); repeat for more")
    p.add_argument("--body", help="the Markdown text (default: read stdin)")
    p.add_argument(
        "--request-id", help="any unique string: retrying with the same id returns the first reply"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write even past a near-duplicate (named in the commit message)",
    )
    p.add_argument(
        "--link",
        action="append",
        metavar="KIND:ID",
        help="a typed link to an existing entry (references, derived_from, contained_in, "
        "contradicts), e.g. derived_from:old-entry-id; repeatable",
    )
    p.add_argument(
        "--scope",
        help="the project the entry belongs to: project (default: the one the working "
        "directory is in; global outside a repository), global, or a project's name or identity",
    )
    p.add_argument("--project", metavar="DIR|ID", help=PROJECT_HELP)

    p = command("get", entries.cmd_get, "show one entry, read from disk")
    p.add_argument("id", help="the entry's id, as search shows it")

    p = command("search", entries.cmd_search, "search the knowledge base and the read-only corpora")
    p.add_argument("query", help="what you are looking for, in plain words")
    p.add_argument("--limit", type=int, default=8, help="how many hits (1 to 50)")
    p.add_argument("--type", action="append", help=f"only this type ({TYPES_HELP}); repeatable")
    p.add_argument("--tag", action="append", help="only entries with this tag; repeatable")
    p.add_argument("--kb-only", action="store_true", help="leave out the read-only corpora")
    p.add_argument("--kb", help="only this knowledge base (personal, or one `kb list` names)")
    p.add_argument(
        "--include-archived", action="store_true", help="include archived entries (marked)"
    )
    p.add_argument(
        "--episodes", action="store_true", help="include episodes (captured agent turns)"
    )
    p.add_argument("--as-of", metavar="YYYY-MM-DD", help="search the memory as it stood that day")
    p.add_argument(
        "--explain", action="store_true", help="show each channel's rank and every ranking signal"
    )
    p.add_argument(
        "--min-score",
        type=float,
        metavar="SIMILARITY",
        help="leave out hits less similar than this (absolute, -1 to 1; MiniLM: 0.3 keeps what "
        "is about the query)",
    )
    p.add_argument(
        "--scope",
        help="where to look: project (default: the working directory's project and global), "
        "global, all, or a project's name or identity (that project and global)",
    )
    p.add_argument("--project", metavar="DIR|ID", help=PROJECT_HELP)

    p = command(
        "supersede",
        entries.cmd_supersede,
        "replace an entry with a new one (preview first)",
        "Write a new entry that supersedes OLD_ID and mark OLD_ID superseded, in one "
        "commit. Without --confirm, show both files as they would be written.",
    )
    p.add_argument("old_id", help="the id of the entry to replace")
    p.add_argument("--title", required=True, help="the new entry's title (one line)")
    p.add_argument("--body", help="the new entry's text (default: read stdin)")
    p.add_argument("--type", help=f"the new entry's type ({TYPES_HELP}; default: the old one's)")
    p.add_argument("--tag", action="append", help="a tag; repeatable (default: the old tags)")
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")
    p.add_argument("--request-id", help="retrying with the same id returns the first reply")
    p.add_argument("--force", action="store_true", help="write even past a near-duplicate")
    p.add_argument(
        "--link",
        action="append",
        metavar="KIND:ID",
        help="the new entry's typed links (default: the old entry's), e.g. references:other-id",
    )
    p.add_argument(
        "--scope",
        help="the new entry's project: project (the working directory's), global, or a "
        "project's name or identity (default: the old entry's)",
    )
    p.add_argument("--project", metavar="DIR|ID", help=PROJECT_HELP)

    sync.add_commands(command)

    model.add_command(command)  # `memory-agent model`: its arguments beside its shell

    p = command(
        "project",
        entries.cmd_project,
        "print the project a folder belongs to (its identity) and its name in the memory",
        "Print the identity of the project DIR (default: the working directory) is in: the "
        "normalised URL of its repository's origin remote (else its first remote), shared by "
        "every clone and worktree; a repository without a remote is identified by its root's "
        "path, which is local to this machine; outside a repository there is no project "
        "(global). Also the short name entries use for it, once one was written there.",
    )
    p.add_argument("dir", nargs="?", default=".", help="a folder (default: the working one)")

    p = command("import", imports.cmd_import, imports.HELP, imports.DESCRIPTION)
    imports.add_arguments(p, PROJECT_HELP)

    p = command(
        "resolve",
        entries.cmd_resolve,
        "resolve a fork: keep one of two successors, or merge both (preview first)",
        "An entry two machines superseded is a fork: its superseded_by lists two successors "
        "(`remote` and `status` list them). Without --keep or --merge, show both. --keep ID "
        "names the successor to keep and archives the other (its reason names the fork); "
        "--merge writes a new entry from --title and --body (or stdin) that supersedes both. "
        "Either way the old entry names one successor again, in one commit that syncs like "
        "any write. Without --confirm, show the files as they would be written.",
    )
    p.add_argument("id", help="the entry that was superseded twice")
    p.add_argument("--keep", metavar="ID", help="the successor to keep (the other is archived)")
    p.add_argument("--merge", action="store_true", help="write a new entry that supersedes both")
    p.add_argument("--title", help="with --merge: the new entry's title")
    p.add_argument("--body", help="with --merge: the new entry's text (default: read stdin)")
    p.add_argument("--reason", help="with --keep: why (added to the archived one's reason)")
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")
    p.add_argument("--request-id", help="retrying with the same id returns the first reply")

    p = command("archive", entries.cmd_archive, "retire an entry with a reason (preview first)")
    p.add_argument("id", help="the id of the entry to retire")
    p.add_argument("--reason", required=True, help="why it is retired (kept in the file)")
    p.add_argument("--confirm", action="store_true", help="write (default: preview only)")
    p.add_argument("--request-id", help="retrying with the same id returns the first reply")

    command("status", home.cmd_status, "index generation, consistency, sources, pending writes")
    p = command(
        "doctor",
        home.cmd_doctor,
        "check everything this home depends on: each line ok, or the fix",
        "Check the home, free disk, the model (found, not loaded), the daemon, the index's "
        "consistency, the git identity, each KB's remote (git ls-remote, your own ssh and "
        "credentials), each agent's MCP server and hooks, and how this machine locks, "
        "watches and connects. Exit 0 when all is well, 1 when a line names a fix.",
    )
    p.add_argument(
        "--no-start", action="store_true", help="do not start the daemon to check the index"
    )
    command(
        "rebuild",
        home.cmd_rebuild,
        "build a fresh index generation from the files (searches go on meanwhile)",
    )
    command(
        "stop",
        home.cmd_stop,
        "stop this home's daemon and wait for it to exit (it finishes the write in flight)",
    )

    p = command(
        "history", entries.cmd_history, "the supersede chain through an entry, oldest first"
    )
    p.add_argument("id", help="any entry of the chain")

    p = command("importance", entries.cmd_importance, "say how much an entry matters (1-10)")
    p.add_argument("id", help="the entry's id")
    p.add_argument("importance", type=int, help="1 (minor) to 10 (must not be missed)")
    p.add_argument("--note", help="why it matters")

    p = command(
        "gc",
        home.cmd_gc,
        "list dormant entries and archive long-idle ones (never deletes)",
        "List entries that went dormant (ranked lower) or have been idle past their "
        "type's archive threshold. Without --dry-run, show the archive commit it would "
        "make; with --confirm, make it (the files stay, marked archived).",
    )
    p.add_argument("--dry-run", action="store_true", help="only list, write nothing")
    p.add_argument("--confirm", action="store_true", help="archive the candidates (one commit)")

    p = command(
        "scrub",
        home.cmd_scrub,
        "redact what earlier versions stored (journal, usage events, inbox); list auto lessons",
        "Run today's redaction over everything captured so far: the journal (plain and "
        "gzipped files, rewritten crash-safely), the usage events and the gate's inbox, then "
        "rebuild the index so no old episode text stays searchable. Lists the lessons the gate "
        "wrote by itself (source: auto) with the command that archives each. Idempotent; the "
        "daemon runs it once at its first start after an upgrade.",
    )
    p.add_argument(
        "--no-rebuild", action="store_true", help="do not rebuild the index after the scrub"
    )

    p = command(
        "daemon",
        home.cmd_daemon,
        "run the resident daemon (normally the proxy starts it)",
        "Serve MCP on the Unix socket run/daemon.sock of the home: one model, one index "
        "and every write for all agent sessions. The proxy starts it when needed.",
    )
    p.add_argument("--preload", action="store_true", help="load the model now, not on first use")
    p.add_argument(
        "--idle-exit",
        type=float,
        help="exit after this many idle seconds (default: the idle_exit setting; 0 = never)",
    )
    p.add_argument("--foreground", action="store_true", help="also log to stderr")

    p = command(
        "reader",
        home.cmd_reader,
        "serve searches beside the daemon (the daemon starts it; see read_processes)",
        "A reader process (ADR 0028): it loads its own model, follows the daemon's index "
        "read-only and answers memory_search and memory_get on run/reader-SLOT.sock. The "
        "daemon starts `read_processes` of them, hands each its token on stdin and stops them "
        "by closing it; there is no reason to start one by hand.",
    )
    p.add_argument("--slot", type=int, default=0, help="which of the daemon's readers (0, 1, ...)")

    p = command(
        "ui",
        home.cmd_ui,
        "browse the memory in a web page on 127.0.0.1 (prints the URL with its token)",
        "Serve the memory browser: an overview, search with every ranking signal drawn, each "
        "entry with its history and git diffs, the captured sessions and the gate's inbox. "
        "Reads through the daemon, writes only through the gateway (preview, then confirm). "
        "Loopback only; the printed URL carries a random token (then a cookie). Ctrl-C stops.",
    )
    p.add_argument("--port", type=int, default=8780, help="TCP port (0: any free port)")

    p = command(
        "web",
        home.cmd_web,
        "the regulation Q&A web app (legal_web, a separate app on ragcore) on 127.0.0.1",
        "Serve the policy/regulation Q&A app: a page and a JSON API answering "
        "questions from knowledge bases of regulation documents, with cited passages. Prints "
        "the URL; Ctrl-C stops it.",
    )
    p.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port)")
    p.add_argument("--data", help="folder of knowledge bases (default: the bundled samples)")
    p.add_argument("--web-home", help="where its index lives (default: under ~/.cache/legal_web)")

    p = command(
        "hook",
        home.cmd_hook,
        "what an agent's hook runs: capture a turn, inject recall (always exits 0)",
        "Read a hook's JSON on stdin (Claude Code's format; Codex's is the same; the opencode "
        "plugin sends it too), write the turn to the journal (redacted), and for prompt and "
        "session-start print the memory to inject as hookSpecificOutput.additionalContext. "
        "Whatever fails, or past hook_budget_ms, it exits 0 with no output and logs to "
        "<home>/run/hooks.log. `memory-agent init` prints the settings that call it.",
    )
    p.add_argument(
        "event",
        nargs="?",
        help="session-start, prompt, tool, tool-failure, denied, stop or session-end "
        "(default: the input's hook_event_name)",
    )
    p.add_argument("--client", help="claude-code (default), codex or opencode")

    command(
        "proposals",
        entries.cmd_proposals,
        "lessons the ingest gate proposes (when gate = propose)",
    )
    p = command("accept", entries.cmd_accept, "write a proposed lesson into the knowledge base")
    p.add_argument("id", help="a proposal id from `memory-agent proposals`")
    p = command("reject", entries.cmd_reject, "drop a proposed lesson for good")
    p.add_argument("id", help="a proposal id from `memory-agent proposals`")
    p.add_argument("--reason", required=True, help="why it is wrong or not worth keeping")
    command(
        "gate",
        home.cmd_gate,
        "run the ingest gate now (it also runs after each agent turn)",
        "Look through the journal for failures that a change fixed, recurring across sessions, "
        "and promote (gate = auto) or propose (gate = propose) each such lesson once.",
    )

    command(
        "proxy",
        home.cmd_proxy,
        "the stdio MCP server an agent launches (forwards to the daemon)",
        "Speak MCP (JSON-RPC lines) on stdin/stdout and forward every message to the home's "
        "daemon, starting it if needed. This is what goes in your agent's MCP settings.",
    )

    p = command(
        "eval",
        evaluate.cmd_eval,
        "score retrieval on a benchmark folder (corpus.jsonl, queries.jsonl, qrels.tsv)",
        "Index BENCH_DIR/corpus.jsonl in a temporary home through the production "
        "indexing path, run BENCH_DIR/queries.jsonl through the search path of a tool call "
        "(the default filter, then the ranking with empty usage stats), and "
        "print Recall@5, Recall@10, MRR@10, nDCG@10, query latency p50/p95 and index time. "
        "Embeddings are cached in $MEMORY_AGENT_CACHE (default <home>/cache), so a second run "
        "of the same corpus embeds nothing.",
    )
    p.add_argument("bench_dir", metavar="BENCH_DIR", help="a folder in the bench format")
    p.add_argument("--embedder", choices=EMBEDDERS, help="embedding model (default: the config)")
    add_endpoint_flags(p)
    p.add_argument("--cache", help="embedding cache directory (default: $MEMORY_AGENT_CACHE)")
    p.add_argument("--run-out", metavar="FILE", help="write the ranking of every query as JSONL")
    p.add_argument("--max-queries", type=int, help="score only the first N queries")
    p.add_argument(
        "--by",
        metavar="FIELD",
        help="also print the metrics per value of this field of queries.jsonl "
        "(LoCoMo: --by category)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.epilog = "commands, by job:\n\n" + grouped(helps) + "\n" + EXIT_CODES
    return parser


def main(argv: list[str] | None = None) -> int:
    from memory_agent.errors import describe, for_cli

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hook"] and not {"-h", "--help"} & set(argv):
        from memory_agent.capture.hooks import main as hook_main  # the fast path: no parser, stdlib

        return hook_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"\nmemory-agent {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of ours
        from memory_agent.procs import stdout_closed

        return stdout_closed()
    except Exception as exc:
        info = describe(exc, log_hint="the traceback above")
        if info.code == "internal":
            import traceback

            traceback.print_exc()
        message, fix = for_cli(info.message), for_cli(info.fix)
        if getattr(args, "json", False):
            out = {"code": info.code, "message": message, "fix": fix}
            print(json.dumps({"error": out}, ensure_ascii=False))
        print(
            f"memory-agent {args.command}: {info.code}: {message}"
            + (f"\n  fix: {fix}" if fix else ""),
            file=sys.stderr,
        )
        return 1 if info.code == "internal" else 2


if __name__ == "__main__":
    sys.exit(main())
