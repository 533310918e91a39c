"""The usage event log: the fold is a pure function of the files, and nothing is counted twice."""

import gzip
import json
import os
import time

from memory_agent.recall.events import EventLog, compact, fold


def _write(folder, name, events, raw_lines=()):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "w") as fh:
        for e in events:
            fh.write(json.dumps(e) + "\n")
        for line in raw_lines:
            fh.write(line + "\n")
    return folder / name


def recall(entry, rank=1, ts=1.0):
    return {"kind": "recall", "qid": "q", "entry": entry, "rank": rank, "score": 1.0, "ts": ts}


def test_the_fold_counts_recalls_in_the_top_three_and_is_deterministic(tmp_path):
    _write(
        tmp_path,
        "a.jsonl",
        [
            recall("x", 1),
            recall("x", 3),
            recall("x", 4),
            recall("y", 2),
            {"kind": "get", "entry": "y", "ts": 5.0},
        ],
    )
    first, second = fold(tmp_path), fold(tmp_path)
    assert first.stats == second.stats
    assert first.stats["x"].recall_count == 2  # rank 4 was shown, not recalled
    assert first.stats["y"].recall_count == 1 and first.stats["y"].last_opened == 5.0


def test_importance_is_last_write_wins_by_time_across_files(tmp_path):
    _write(
        tmp_path,
        "b-later-file.jsonl",
        [{"kind": "importance", "entry": "x", "importance": 3, "ts": 10.0}],
    )
    _write(
        tmp_path,
        "a-earlier-file.jsonl",
        [{"kind": "importance", "entry": "x", "importance": 9, "ts": 20.0}],
    )
    assert fold(tmp_path).stats["x"].importance == 9


def test_corrupt_lines_are_skipped_and_counted(tmp_path):
    _write(
        tmp_path,
        "a.jsonl",
        [recall("x")],
        raw_lines=["{not json", "[1, 2]", '{"kind": "recall", "entry": "x"}'],
    )
    report = fold(tmp_path)
    assert report.stats["x"].recall_count == 1 and report.corrupt_lines == 3


def test_a_read_error_mid_file_keeps_what_was_read(tmp_path):
    data = gzip.compress(
        ("".join(json.dumps(recall("x", ts=i)) + "\n" for i in range(50))).encode()
    )
    (tmp_path / "a.jsonl.gz").write_bytes(data[: len(data) // 2])  # truncated archive
    report = fold(tmp_path)
    assert report.read_errors and 0 < report.stats["x"].recall_count < 50


def test_each_session_writes_its_own_file(tmp_path):
    a, b = EventLog(tmp_path), EventLog(tmp_path)
    a.append("recall", qid="1", entry="x", rank=1, score=1.0)
    b.append("recall", qid="2", entry="x", rank=1, score=1.0)
    a.close()
    b.close()
    assert a.path != b.path and len(list(tmp_path.glob("*.jsonl"))) == 2
    assert fold(tmp_path).stats["x"].recall_count == 2


def test_compaction_gzips_old_files_and_keeps_the_state(tmp_path):
    old = _write(tmp_path, "old.jsonl", [recall("x", ts=1.0), recall("x", ts=2.0)])
    live = _write(tmp_path, "live.jsonl", [recall("x", ts=3.0)])
    os.utime(old, (time.time() - 3 * 86400,) * 2)
    before = fold(tmp_path).stats
    assert compact(tmp_path, keep=live, older_than_s=86400) == ["old.jsonl"]
    assert not old.exists() and (tmp_path / "old.jsonl.gz").exists() and live.exists()
    assert fold(tmp_path).stats == before


def test_a_crash_that_leaves_both_plain_and_compressed_counts_once(tmp_path):
    plain = _write(tmp_path, "s.jsonl", [recall("x"), recall("x", ts=2.0)])
    with open(plain, "rb") as src, gzip.open(tmp_path / "s.jsonl.gz", "wb") as dst:
        dst.write(src.read())  # the rename happened, the unlink did not
    assert fold(tmp_path).stats["x"].recall_count == 2
    compact(tmp_path, older_than_s=10**9)
    assert not plain.exists() and fold(tmp_path).stats["x"].recall_count == 2


def test_a_crash_before_the_rename_leaves_a_temp_that_is_ignored_and_cleaned(tmp_path):
    plain = _write(tmp_path, "s.jsonl", [recall("x")])
    dead_pid = 2**22 + 12345  # above pid_max on Linux: no such process
    tmp = tmp_path / f"s.jsonl.gz.tmp-{dead_pid}-abcdef"
    tmp.write_bytes(b"partial gzip")
    assert fold(tmp_path).stats["x"].recall_count == 1
    compact(tmp_path, older_than_s=10**9)
    assert not tmp.exists() and plain.exists()


def test_a_tail_folds_what_other_processes_append_once_each_and_never_its_own(tmp_path):
    """A daemon and its readers (ADR 0028) fold each other's files as they grow: the fold at
    start and each catch-up take every complete line once; a line being written waits until
    it is whole; the process's own file is never read (its events are folded as logged)."""
    from memory_agent.recall.events import EventTail, apply_event

    other = _write(tmp_path, "other.jsonl", [recall("x"), recall("x")])
    _write(tmp_path, "own.jsonl", [recall("mine")])
    with open(other, "a") as fh:
        fh.write(json.dumps(recall("y"))[:20])  # torn: its writer is mid-line
    tail = EventTail(tmp_path, "own.jsonl")
    stats = fold(tmp_path, tail).stats
    assert stats["x"].recall_count == 2 and "mine" not in stats and "y" not in stats
    with open(other, "a") as fh:
        fh.write(json.dumps(recall("y"))[20:] + "\n")
    _write(tmp_path, "third.jsonl", [recall("z")])
    for event in tail.new_events():
        apply_event(stats, event)
    assert stats["y"].recall_count == 1 and stats["z"].recall_count == 1
    assert stats["x"].recall_count == 2  # the lines read at the fold are not read again
    assert tail.new_events() == []  # nothing new: nothing folded


def test_a_tail_splits_lines_at_newlines_only_and_skips_a_compacted_files_leftover(tmp_path):
    """A note may hold U+2028, U+2029 or U+0085 (written unescaped): the event is one line
    all the same. A plain file left beside its `.gz` twin (a compaction that crashed before
    removing it) is not read again by a catch-up, as the fold at start does not read it."""
    from memory_agent.recall.events import EventTail, apply_event

    log = EventLog(tmp_path / "events")
    log.append("importance", entry="x", importance=7, note="line\u2028separator\x85here")
    tail = EventTail(tmp_path / "events", "own.jsonl")
    stats = fold(tmp_path / "events", tail).stats
    assert stats["x"].importance == 7 and stats["x"].importance_note.endswith("here")
    folder = tmp_path / "events"
    _write(folder, "old.jsonl", [recall("y")])
    with gzip.open(folder / "old.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(recall("y")) + "\n")
    for event in tail.new_events():
        apply_event(stats, event)
    assert "y" not in stats  # its events are the .gz's (a fold reads that one)
