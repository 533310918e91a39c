"""The deterministic write-path suite: a scripted sequence of cases against a copy of the demo
KB, run twice from scratch. Each case pins its own outcome; both runs must give identical replies
and files (timestamps and commit hashes aside), and the shipped demo KB must be byte-for-byte
unchanged."""

import hashlib
import json
import re
import shutil
from pathlib import Path

from memory_agent.errors import MemoryAgentError
from memory_agent.index.memory import DEMO_KB
from memory_agent.recall import reads
from memory_agent.write.gateway import Gateway
from tests.memory_agent.helpers import git, make_memory

REWORDINGS = (
    Path(__file__).resolve().parents[3] / "experiments" / "dedup-threshold" / "rewordings.jsonl"
)
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
SHA = re.compile(r"\b[0-9a-f]{40}\b")


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _normal(value, home: Path):
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = text.replace(str(home), "<home>").replace(str(home.parent), "<work>")
    return json.loads(SHA.sub("<sha>", TIME.sub("<time>", text)))


def run_suite(work: Path, model) -> tuple[list[tuple[str, object]], dict[str, str]]:
    home = work / "home"
    corpus = work / "project-docs"
    (corpus / "docs").mkdir(parents=True)
    (corpus / "docs" / "runbook.md").write_text(
        "# Runbook\n\nTo restart the ingestion pipeline, drain the queue first.\n"
    )
    memory = make_memory(home, model)
    memory.init(demo=True, embedder="minilm")
    (home / "repos.json").write_text(json.dumps([{"label": "project-docs", "path": str(corpus)}]))
    gw = Gateway(memory)
    light = next(
        json.loads(x)
        for x in REWORDINGS.read_text().splitlines()
        if json.loads(x)["kind"] == "light"
    )
    results: list[tuple[str, object]] = []

    def case(name, fn, expect):
        try:
            reply = fn()
        except MemoryAgentError as exc:
            reply = exc.as_json()
        results.append((name, _normal(reply, home)))
        expect(reply)

    def status_is(s):
        return lambda r: _check(r.get("status") == s, r)

    def error_is(code, words=""):
        return lambda r: _check(
            r.get("code") == code and words in r.get("message", "") + r.get("fix", ""), r
        )

    commits = lambda: int(git(memory.kb_dir, "rev-list", "--count", "HEAD"))  # noqa: E731
    body = "Run `kctl cache purge --tenant <id>` after changing a tenant's synonym list."

    case(
        "add",
        lambda: gw.add("Purge the cache after editing synonyms", body, "process", ["search"]),
        status_is("created"),
    )
    case(
        "exact duplicate",
        lambda: gw.add("Purge the cache after editing synonyms", body, "process"),
        status_is("duplicate"),
    )
    case(
        "near duplicate of a demo entry",
        lambda: gw.add(light["title"], light["body"]),
        lambda r: _check(r["status"] == "duplicate" and r["duplicate_of"] == light["source"], r),
    )
    case("invalid type", lambda: gw.add("T", "b", "idea"), error_is("invalid", "type"))
    case("empty body", lambda: gw.add("Title only", "  "), error_is("invalid", "body: empty"))
    case("multi-line title", lambda: gw.add("one\ntwo", "b"), error_is("invalid", "one line"))
    case(
        "tag with a space",
        lambda: gw.add("Tagged", "body text", tags=["two words"]),
        error_is("invalid", "tags"),
    )
    case("empty title", lambda: gw.add("", "body"), error_is("invalid", "title: missing"))
    case(
        "title that is a path",
        lambda: gw.add("../../etc/passwd", "A title shaped like a path."),
        lambda r: _check(r["id"] == "etc-passwd" and "/kb/note/etc-passwd.md" in r["path"], r),
    )
    case("get a path", lambda: reads.get(memory, "../kb/note/etc-passwd"), error_is("not_found"))
    case(
        "archive an absolute path",
        lambda: gw.archive("/etc/passwd", "x", confirm=True),
        error_is("not_found"),
    )
    n = commits()
    case(
        "supersede preview",
        lambda: gw.supersede(
            "use-uv-for-locking",
            "Lock with uv, check with uv lock --check",
            "CI runs `uv lock --check`; a stale lock fails the build.",
        ),
        status_is("preview"),
    )
    _check(commits() == n, "a preview wrote a commit")
    case(
        "supersede confirm",
        lambda: gw.supersede(
            "use-uv-for-locking",
            "Lock with uv, check with uv lock --check",
            "CI runs `uv lock --check`; a stale lock fails the build.",
            confirm=True,
        ),
        status_is("superseded"),
    )
    case(
        "supersede twice",
        lambda: gw.supersede("use-uv-for-locking", "Again", "b", confirm=True),
        error_is("conflict", "already superseded by lock-with-uv-check-with-uv-lock-check"),
    )
    case(
        "search after supersede",
        lambda: reads.search(memory, "how do we lock dependencies", limit=5),
        lambda r: _check("use-uv-for-locking" not in [h["id"] for h in r["hits"]], r),
    )
    case(
        "archive preview",
        lambda: gw.archive("legacy-jenkins-url", "again"),
        error_is("conflict", "already archived"),
    )
    case(
        "archive preview of an active entry",
        lambda: gw.archive("branch-naming", "moved"),
        status_is("preview"),
    )
    case(
        "archive confirm",
        lambda: gw.archive("branch-naming", "moved to the wiki", confirm=True),
        status_is("archived"),
    )
    case(
        "archive twice",
        lambda: gw.archive("branch-naming", "again", confirm=True),
        error_is("conflict", "already archived"),
    )
    case(
        "archive a superseded entry",
        lambda: gw.archive("use-uv-for-locking", "x", confirm=True),
        error_is("conflict", "superseded"),
    )
    case(
        "add with a request id",
        lambda: gw.add(
            "Staging has 2 replicas",
            "Staging runs two API replicas, production six.",
            "fact",
            request_id="r1",
        ),
        status_is("created"),
    )
    first = results[-1][1]
    case(
        "retry with the same request id",
        lambda: gw.add(
            "Staging has 2 replicas",
            "Staging runs two API replicas, production six.",
            "fact",
            request_id="r1",
        ),
        lambda r: _check(_normal(r, home) == first, r),
    )
    case(
        "the same request id for another write",
        lambda: gw.add("Something else", "Another body.", request_id="r1"),
        error_is("conflict", "staging-has-2-replicas"),
    )
    case(
        "read-only entry found",
        lambda: reads.search(memory, "restart the ingestion pipeline", limit=1),
        lambda r: _check(
            r["hits"][0]["id"] == "project-docs/docs/runbook.md"
            and r["hits"][0]["writable"] is False,
            r,
        ),
    )
    case(
        "archive read-only",
        lambda: gw.archive("project-docs/docs/runbook.md", "x", confirm=True),
        error_is("read_only"),
    )
    case(
        "supersede read-only",
        lambda: gw.supersede("project-docs/docs/runbook.md", "t", "b", confirm=True),
        error_is("read_only"),
    )
    (memory.kb_dir / "fact" / "vpn-port.md").write_text(
        "---\nid: vpn-port\ntitle: The office VPN listens on UDP 51820\ntype: fact\n"
        "status: active\ncreated: 2026-11-02T08:00:00Z\n---\nWireGuard, UDP 51820.\n"
    )
    case(
        "external add picked up",
        lambda: reads.search(memory, "what UDP port does the office VPN listen on", limit=1),
        lambda r: _check(r["hits"][0]["id"] == "vpn-port", r),
    )
    (memory.kb_dir / "note" / "broken.md").write_text("---\nid: broken\ntype: [\n---\nbody\n")
    case(
        "external broken file reported",
        lambda: memory.status(),
        lambda r: _check(
            r["consistent"] and any("broken.md" in p for p in r["sources"][0].get("problems", [])),
            r,
        ),
    )
    shutil.move(corpus, work / "moved")
    case(
        "missing corpus root",
        lambda: memory.status(),
        lambda r: _check(
            [s for s in r["sources"] if s["label"] == "project-docs"][0]["available"] is False
            and r["consistent"],
            r,
        ),
    )
    case(
        "missing corpus still searchable",
        lambda: reads.search(memory, "restart the ingestion pipeline", limit=1),
        lambda r: _check(r["hits"][0]["id"] == "project-docs/docs/runbook.md", r),
    )
    case("unknown id", lambda: reads.get(memory, "no-such-entry"), error_is("not_found"))
    case(
        "final status",
        lambda: memory.status(),
        lambda r: _check(r["consistent"] and r["pending"] == 0, r),
    )
    files = {
        k: TIME.sub("<time>", (memory.kb_dir / k).read_text())
        for k in _tree_digest(memory.kb_dir)
        if not k.startswith(".git/")
    }
    memory.close()
    return results, files


def _check(ok, detail):
    assert ok, detail


def test_the_write_path_suite_is_deterministic_and_leaves_the_source_kb_alone(
    tmp_path, minilm_model
):
    source_before = _tree_digest(DEMO_KB)
    first, files_first = run_suite(tmp_path / "run1", minilm_model)
    second, files_second = run_suite(tmp_path / "run2", minilm_model)
    assert len(first) >= 25
    assert [name for name, _ in first] == [name for name, _ in second]
    for (name, a), (_, b) in zip(first, second, strict=True):
        assert a == b, name
    assert files_first == files_second
    assert _tree_digest(DEMO_KB) == source_before
