"""Front matter read within bounds (issue 32, item 4): a 0.4 KB note whose YAML expands by
aliases (nine levels of nine) is refused in a millisecond with the fix, by the one reader every
path that parses YAML uses (`ragcore.load_yaml`, `ragcore.parse_front_matter`: entries, imports,
the project map, corpus documents); so are a block over the size bound, too many values, too deep
a nesting. Ordinary front matter reads exactly as python-frontmatter read it. Every test runs
on both readers: libyaml's (C, the bounds checked on its event stream) and PyYAML's own (where
libyaml is missing, or for a lone surrogate)."""

from __future__ import annotations

import time

import frontmatter
import pytest
import yaml

from ragcore import (
    DocumentError,
    FrontMatterRefused,
    front_matter,
    load_markdown,
    load_yaml,
    parse_front_matter,
)


@pytest.fixture(autouse=True, params=["libyaml", "python"])
def reader(request, monkeypatch):
    if request.param == "libyaml":
        assert front_matter._c_loader() is not None, (
            "PyYAML without libyaml: the C path is untested"
        )
    else:
        monkeypatch.setattr(front_matter, "_c_loader", lambda: None)
    return request.param


def alias_bomb() -> str:
    lines = ["---", "title: bomb", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
        previous = name
    return "\n".join(lines + ["---", "## Notes", "text"]) + "\n"


def test_an_alias_bomb_is_refused_at_once_naming_the_alias_and_its_line():
    text = alias_bomb()
    assert len(text) < 500
    started = time.monotonic()
    with pytest.raises(FrontMatterRefused) as caught:
        parse_front_matter(text)
    assert time.monotonic() - started < 1.0
    assert "alias *a (line 4)" in str(caught.value) and "write the value out" in str(caught.value)
    with pytest.raises(FrontMatterRefused):
        load_yaml("base: &b {x: 1}\nother:\n  <<: *b\n")  # a merge key is an alias too


def test_a_corpus_document_with_an_alias_bomb_is_a_document_error(tmp_path):
    path = tmp_path / "bomb.md"
    path.write_text(alias_bomb())
    with pytest.raises(DocumentError, match="alias"):
        load_markdown(path, "bomb")  # (its metadata went to the index, expanded there)


def test_a_block_over_a_bound_is_refused():
    with pytest.raises(FrontMatterRefused, match="over the 131072-byte limit"):
        load_yaml("body: " + "x" * 140_000)
    with pytest.raises(FrontMatterRefused, match="over 20000 values"):
        load_yaml("tags: [" + ",".join("t" for _ in range(25_000)) + "]")
    with pytest.raises(FrontMatterRefused, match="over 50 deep"):
        load_yaml("x: " + "[" * 60 + "]" * 60)
    assert load_yaml("x: " + "[" * 40 + "]" * 40)  # (deep enough for anything real)
    assert load_yaml("x: " + "[" * 49 + "]" * 49)  # the map and 49 lists: 50 deep, the bound
    with pytest.raises(FrontMatterRefused, match="over 50 deep"):
        load_yaml("x: " + "[" * 49 + "1" + "]" * 49)  # a value in there is the 51st level
    with pytest.raises(FrontMatterRefused, match="over the 3-byte limit"):
        load_yaml("a: 1", max_bytes=3)  # (the project map passes bounds of its own)


def test_a_broken_block_is_still_yamls_own_error():
    with pytest.raises(yaml.YAMLError):
        parse_front_matter("---\ntitle: [unclosed\n---\nbody\n")
    with pytest.raises(yaml.YAMLError):  # libyaml takes no lone surrogate: PyYAML refuses it
        load_yaml("title: a\udcff")


@pytest.mark.parametrize(
    "text",
    [
        "---\ntitle: Plain\ntags: [a, b]\ncreated: 2026-11-01T00:00:00Z\n---\nThe body.\n",
        "---\nid: x\ndate: 2026-11-01\nnested: {k: [1, 2]}\n---\n\n# Heading\n\ntext\n",
        "No front matter at all.\n",
        "---\nonly an opening line\n",
        "---\n- a list, not a map\n---\nbody\n",
        "  \n---\ntitle: after blank lines\n---\nbody\n",
        '{\n"title": "JSON front matter"\n}\nbody\n',
        "---\n---\nempty block\n",
    ],
)
def test_ordinary_front_matter_reads_as_python_frontmatter_read_it(text):
    post = frontmatter.loads(text)
    assert parse_front_matter(text) == (dict(post.metadata), post.content)
