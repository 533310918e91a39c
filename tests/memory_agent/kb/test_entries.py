"""The entry format: ids are safe slugs, an entry round-trips through its file text, and validation
names the field, the problem and the fix."""

import pytest

from memory_agent.kb.entries import (
    Entry,
    ValidationError,
    entry_path,
    make_id,
    parse_entry,
    render_entry,
    validate,
)

GOOD = {
    "id": "use-uv",
    "title": "Use uv",
    "type": "decision",
    "status": "active",
    "created": "2026-11-30T09:00:00Z",
}


def test_ids_are_slugs_unique_and_safe():
    assert make_id("Use uv for locking!") == "use-uv-for-locking"
    assert make_id("Use uv for locking", {"use-uv-for-locking"}) == "use-uv-for-locking-2"
    assert make_id("../../etc/passwd") == "etc-passwd"
    assert make_id("数据库迁移规范").startswith("entry-")
    assert make_id("Café résumé") == "cafe-resume"


@pytest.mark.parametrize("bad", ["../x", "a/b", "/abs", "..", "a\x00b", "UPPER", "x", "a\\b"])
def test_path_tricks_are_refused_as_ids(tmp_path, bad):
    with pytest.raises(ValidationError):
        entry_path(tmp_path, "note", bad)


def test_a_valid_entry_round_trips_through_its_file_text():
    entry = Entry(
        "use-uv",
        "Use uv",
        "decision",
        "active",
        "2026-11-30T09:00:00Z",
        "Body with 中文 and `code`.",
        ["python"],
        {"supersedes": ["use-pip-tools"]},
    )
    text = render_entry(entry)
    assert text.startswith("---\nid: use-uv\ntitle: Use uv\ntype: decision\n")
    again = parse_entry(text)
    assert again.meta == entry.meta and again.body == entry.body


@pytest.mark.parametrize(
    ("change", "field", "fix"),
    [
        ({"type": "idea"}, "type", "use one of principle"),
        ({"status": "done"}, "status", "use one of active"),
        ({"created": "yesterday"}, "created", "ISO 8601"),
        ({"title": ""}, "title", "required"),
        ({"tags": "python"}, "tags", "list of words"),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"status": "superseded"}, "status", "memory-agent supersede"),
        ({"id": "../evil"}, "id", "not an id"),
    ],
)
def test_validation_names_the_field_the_problem_and_the_fix(change, field, fix):
    problems = validate({**GOOD, **change}, "body")
    assert any(p.startswith(field) and fix in p for p in problems), problems


def test_empty_body_is_refused():
    assert validate(GOOD, "  \n") == ["body: empty; say what should be remembered"]


def test_broken_yaml_is_reported_not_raised_as_a_crash():
    with pytest.raises(ValidationError, match="frontmatter: not valid YAML"):
        parse_entry("---\ntitle: [unclosed\n---\nbody")
