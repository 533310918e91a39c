"""The journal (layer L0): what agents did, turn by turn, one append-only file per session.

    journal/<session>.jsonl                      appended by `memory-agent hook`
    journal/<session>.jsonl.<size>-<mtime>.gz    a compacted part (the plain file of that
                                                 size and mtime, gzipped once it was idle a day)

    {"ts", "session", "event": "start"|"prompt"|"tool"|"stop"|"end", "client", "cwd", ...}
      prompt: "prompt"        tool: "tool", "input", "output", "ok", "error"
      stop:   "answer"        start/end: "source" / "reason"

Everything is redacted (`memory_agent.intake.redact`, on the structure: a key that names a secret
hides its whole value) and cut before it is written: a long text is cut with a margin, then
redacted, then cut exactly (a secret across the cut leaves no fragment; redaction never reads
the megabytes that are not kept); nesting stops at `MAX_DEPTH`; each field is bounded as a
whole (the tool's output `MAX_OUTPUT`, 2,000 characters, shared by all its strings; any other
field `MAX_FIELD`); a record's strings share one redaction budget (`REDACT_BUDGET`: many long
strings shrink the margin, then are cut before they are redacted); lone surrogates become
U+FFFD. Each record is one `write` of one line
(O_APPEND), so
concurrent hooks of a session never interleave inside a line. Lines are never rewritten or
dropped: compaction gzips a whole file crash-safely (`memory_agent.files.gzip_to`: a part gets
its name only when complete,
and names the size and mtime of what it holds, so a plain file left by a crash is recognised
and a session resumed later simply starts a new plain file), and retention only decides which
episodes are searchable.

Standard library only: the hook command writes here without the daemon.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from memory_agent.intake.redact import (
    pair_names_secret,
    redact,
    redact_items,
    secret_name,
    secret_value,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: a hook does not import typing
    from typing import Any

__all__ = [
    "parse_line",
    "MAX_OUTPUT",
    "append",
    "append_cleaned",
    "clean",
    "clean_record",
    "clean_text",
    "compact",
    "read_session",
    "session_name",
    "sessions",
]

MAX_OUTPUT = 2_000  # characters of a tool's output kept
MAX_FIELD = 4_000  # characters of any other text field (a prompt, an answer, an input)
_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def session_name(session_id: str) -> str:
    """A file-name-safe name for an agent's session id (UUIDs pass through unchanged)."""
    if _SAFE.match(session_id or ""):
        return session_id
    import hashlib  # here: the capture hook's start-up pays only for what it uses

    return "s-" + hashlib.sha256((session_id or "").encode("utf-8")).hexdigest()[:24]


MAX_DEPTH = 16  # levels of nesting kept in a tool's input or output
MAX_ITEMS = 50  # items of a list or an object kept
MARGIN = 4_096  # characters redacted beyond a cut, so a secret across it is seen whole
_SURROGATE = re.compile("[\ud800-\udfff]")


def _cut_exact(text: str, limit: int, total: int | None = None) -> str:
    """At most about `limit` characters of `text`: its head and tail around a marker saying
    how many of `total` (the original length) were cut."""
    total = len(text) if total is None else total
    if total <= limit and len(text) <= limit:
        return text
    head, tail = limit // 2, limit - limit // 2
    marker = f"\n[... {total - head - tail} characters cut ...]\n"
    if limit < 3 * len(marker):  # too small for a marker: the head only
        return text[:limit]
    return text[:head] + marker + text[len(text) - tail :]


def clean_text(text: str, limit: int, margin: int = MARGIN) -> str:
    """`text` redacted and cut to `limit`: cut with a margin first (redaction never reads a
    megabyte the journal would not keep), redact, then cut exactly - a secret across the cut
    is redacted whole before it is cut, so no matching fragment is left. Lone surrogates
    (which UTF-8 cannot encode) become U+FFFD."""
    total = len(text)
    if total <= limit + 2 * margin:
        text = _cut_exact(redact(text), limit, None)
    elif margin == 0:  # cut, then redact (the record's redaction budget is spent)
        text = redact(_cut_exact(text, limit))
    else:
        head, tail = limit // 2, limit - limit // 2
        first = redact(text[: head + margin])
        last = redact(text[total - tail - margin :])
        marker = f"\n[... {total - head - tail} characters cut ...]\n"
        text = (
            (first[:head] + marker + last[len(last) - tail :])
            if limit >= 3 * len(marker)
            else first[:limit]
        )
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


REDACT_BUDGET = 65_536  # characters a record's strings may send through `redact` with their
# margins; past it each string is cut first: a record redacts about this plus what it keeps
SMALL = 200  # what a mostly-structure field keeps of a string once the budget is spent


def _clean_string(text: str, limit: int, spare: list[int], floor: int | None = None) -> str:
    """`clean_text` within what is left of the record's redaction budget (`spare[0]`): the
    full margin while it lasts, then a smaller one, then none - and once it is spent the
    string is cut (to `floor` characters, if given) before it is redacted."""
    if spare[0] <= 0 and floor is not None:
        limit = min(limit, floor)
    margin = max(0, min(MARGIN, (spare[0] - limit) // 2))
    spare[0] -= min(len(text), limit + 2 * margin)
    return clean_text(text, limit, margin)


def _shape(value: Any, depth: int = 0) -> Any:
    """The structure that is kept (depth, items, key length), strings still whole."""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)) and depth >= MAX_DEPTH:
        return f"[cut: nested deeper than {MAX_DEPTH} levels]"
    if isinstance(value, dict):
        out = {}
        for n, (k, v) in enumerate(value.items()):
            if n == MAX_ITEMS:
                out["[cut]"] = f"{len(value) - MAX_ITEMS} more keys"
                break
            out[k if isinstance(k, str) else str(k)] = _shape(v, depth + 1)
        return out
    if isinstance(value, list):
        kept = [_shape(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept.append(f"[cut: {len(value) - MAX_ITEMS} more items]")
        return kept
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return str(value)


def _strings(value: Any, out: list[int]) -> int:
    """Collect the lengths of the strings of a shaped value; the characters of the rest."""
    if isinstance(value, str):
        out.append(len(value))
        return 2
    if isinstance(value, dict):
        return 2 + sum(len(k) + 4 + _strings(v, out) for k, v in value.items())
    if isinstance(value, list):
        return 2 + sum(2 + _strings(v, out) for v in value)
    return len(str(value))


def _cap(lengths: list[int], budget: int) -> int:
    """The largest per-string length that keeps the strings' total within `budget` (short
    strings stay whole, long ones share what is left)."""
    remaining, left = budget, len(lengths)
    for length in sorted(lengths):
        share = remaining // left
        if length > share:
            return share
        remaining -= length
        left -= 1
    return budget


def _clean(value: Any, limit: int, spare: list[int], floor: int | None = None) -> Any:
    if isinstance(value, str):
        return _clean_string(value, limit, spare, floor)
    if isinstance(value, dict):
        pair = pair_names_secret(value)
        out = {}
        for k, v in value.items():
            key = _clean_string(k, 100, spare)
            if secret_name(k) or (pair and k in ("value", "Value")):
                v = secret_value(k, v)
            out[key] = _clean(v, limit, spare, floor)
        return out
    if isinstance(value, list):
        return [_clean(v, limit, spare, floor) for v in redact_items(value)]
    return value


def clean(value: Any, budget: int, spare: list[int] | None = None) -> Any:
    """A field of a record as the journal keeps it: redacted on its structure (a key that
    names a secret hides its whole value; an argv's `--password X`) and its text, nesting cut
    at `MAX_DEPTH`, and at most about `budget` characters IN TOTAL (a Write's response
    carries its content, the original file and a patch: together they share the budget).
    `spare` (a one-item list, shared by a record's fields) bounds the characters redacted
    (`REDACT_BUDGET`): fifty long strings cost no more than one record's share."""
    spare = [REDACT_BUDGET] if spare is None else spare
    shaped = _shape(value)
    if isinstance(shaped, str):
        return _clean_string(shaped, budget, spare)
    lengths: list[int] = []
    skeleton = _strings(shaped, lengths)
    if skeleton > budget // 2:  # mostly structure: keep its JSON text, cut
        # each string may fill the budget, and there are many: once the record's redaction
        # budget is spent they are cut to SMALL first (the text is cut to `budget` anyway)
        text = json.dumps(_clean(shaped, budget, spare, SMALL), ensure_ascii=False)
        return clean_text(text, budget, 0)  # redacted already, on its structure
    # the strings' caps add up to the budget: once the redaction budget is spent, each is
    # still kept to its cap, cut before it is redacted (no margin)
    return _clean(shaped, max(_cap(lengths, budget - skeleton), 1), spare)


def append(folder: Path, session_id: str, record: dict[str, Any]) -> Path:
    """Append one redacted, cut record to the session's journal; its path."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{session_name(session_id)}.jsonl"
    data = (json.dumps(clean_record(record, session_id), ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def append_cleaned(folder: Path, session_id: str, records: list[dict[str, Any]]) -> Path:
    """Append records already `clean_record`ed (an import cleans them to count what was
    redacted) to the session's journal in one write: a turn's lines land together."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{session_name(session_id)}.jsonl"
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        view = memoryview(data)
        while view:  # a write may be short for a large turn: the rest follows
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return path


def clean_record(record: dict[str, Any], session_id: Any = None) -> dict[str, Any]:
    """A record as the journal keeps it: each field `clean`ed (the tool's output within
    `MAX_OUTPUT` characters in total, any other field within `MAX_FIELD`)."""
    spare = [REDACT_BUDGET]  # shared by the fields: the hook's time is bounded per record
    out = {
        k: clean(v, MAX_OUTPUT if k == "output" else MAX_FIELD, spare) for k, v in record.items()
    }
    session = record.get("session") if session_id is None else session_id
    if session is not None:
        session = session[:200] if isinstance(session, str) else str(session)
        out["session"] = _SURROGATE.sub("\ufffd", session)
    return out


_PART = re.compile(r"^(?P<session>.+)\.jsonl\.(?P<size>\d+)-(?P<mtime>\d+)\.gz$")


def sessions(folder: Path) -> dict[str, list[Path]]:
    """{session name: its files, oldest part first, the plain file last}."""
    out: dict[str, list[Path]] = {}
    if not folder.is_dir():
        return out
    parts = []
    for path in folder.iterdir():
        m = _PART.match(path.name)
        if m:
            parts.append((m.group("session"), int(m.group("mtime")), path))
    for name, _, path in sorted(parts):
        out.setdefault(name, []).append(path)
    for suffix in (".jsonl.compacting", ".jsonl"):  # aside (being compacted), then live
        for path in sorted(folder.glob("*" + suffix)):
            out.setdefault(path.name[: -len(suffix)], []).append(path)
    return out


def parse_line(line: str) -> dict[str, Any] | None:
    """One journal record, or None for a blank, torn or corrupt line (skipped, never fatal)."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def read_session(paths: list[Path]) -> Iterator[dict[str, Any]]:
    """The records of a session's files, in order; a torn or corrupt line is skipped."""
    import gzip

    for path in paths:
        opener = gzip.open if path.name.endswith(".gz") else open
        try:
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    record = parse_line(line)
                    if record is not None:
                        yield record
        except (OSError, EOFError, gzip.BadGzipFile):
            continue


def compact(folder: Path, *, idle_s: float = 86400.0, now: float | None = None) -> list[str]:
    """Gzip the plain files of sessions idle for `idle_s` into parts, crash-safely: the file
    is first renamed aside (a hook that appends meanwhile starts a new plain file), then
    gzipped to a temp name, synced and renamed to its part name, and only then removed."""
    done: list[str] = []
    if not folder.is_dir():
        return done
    now = time.time() if now is None else now
    _finish_asides(folder, done)  # a compaction that died: finish it before anything else
    for path in sorted(folder.glob("*.jsonl")):
        aside = path.with_name(path.name + ".compacting")
        try:
            if now - path.stat().st_mtime < idle_s or aside.exists():
                continue
            os.rename(path, aside)
        except FileNotFoundError:
            continue
    _finish_asides(folder, done)
    return done


def finish_asides(folder: Path, transform: Callable[[bytes], bytes] | None = None) -> list[str]:
    """Gzip the files left aside into parts (see `compact`); `transform`, if given, rewrites
    each line on the way (`memory_agent.serve.scrub` redacts with it). The sessions done."""
    done: list[str] = []
    _finish_asides(folder, done, transform)
    return done


def _finish_asides(folder: Path, done: list[str], transform=None) -> None:
    from memory_agent.files import gzip_to, temp_name

    for aside in sorted(folder.glob("*.jsonl.compacting")):
        st = aside.stat()
        plain = aside.name[: -len(".compacting")]
        part = aside.with_name(f"{plain}.{st.st_size}-{st.st_mtime_ns}.gz")
        if not part.exists():  # its temp name is hidden (`.<plain>.gz.tmp-...`): scrub cleans it
            tmp = aside.with_name("." + temp_name(f"{plain}.gz"))
            gzip_to(aside, part, tmp=tmp, transform=transform)
        aside.unlink()
        if plain not in done:
            done.append(plain)
