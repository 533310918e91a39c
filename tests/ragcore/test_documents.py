from pathlib import Path

import pytest

from ragcore import (
    Document,
    DocumentError,
    chunk_document,
    load_markdown,
    normalize_text,
    wikilinks,
)
from ragcore.documents import scan_markdown


def test_chunks_follow_headings_and_carry_title_and_heading_path():
    body = "Intro line.\n\n# Setup\n\nInstall it.\n\n## Linux\n\napt-get install x\n\n# Usage\n\nRun it."
    doc = Document("guide", "The guide", body)
    chunks = chunk_document(doc, max_chars=60)
    assert [c.id for c in chunks] == [f"guide#{n}" for n in range(len(chunks))]
    assert [c.heading for c in chunks] == ["", "Setup > Linux", "Usage"]
    # a short section joins its short neighbour and keeps its heading as text
    assert chunks[0].body == "Intro line.\n\nSetup\nInstall it."
    assert chunks[1].text == "The guide\nSetup > Linux\napt-get install x"
    assert all(c.text.startswith("The guide") for c in chunks)


def test_chunk_ids_are_stable_for_the_same_text():
    doc = Document("a", "A", "# One\n\n" + "word " * 800 + "\n\n# Two\n\nshort")
    first = [(c.id, c.text) for c in chunk_document(doc, max_chars=500)]
    second = [(c.id, c.text) for c in chunk_document(Document("a", "A", doc.body), max_chars=500)]
    assert first == second


def test_long_sections_are_cut_under_the_cap():
    text = ("A sentence of some length goes here. " * 200).strip()
    chunks = chunk_document(Document("long", "Long", text), max_chars=300)
    assert len(chunks) > 10
    assert all(len(c.body) <= 300 for c in chunks)
    # nothing lost: every sentence survives the cut
    assert sum(c.body.count("A sentence") for c in chunks) == 200


def test_chinese_text_is_cut_at_sentence_ends():
    text = "这是第一句话，讲的是记忆系统。" * 60
    chunks = chunk_document(Document("zh", "中文", text), max_chars=200)
    assert all(len(c.body) <= 200 for c in chunks)
    assert all(c.body.endswith("。") for c in chunks[:-1])


def test_headings_inside_code_fences_are_text():
    body = "# Real\n\n```bash\n# not a heading\necho hi\n```\n"
    chunks = chunk_document(Document("f", "F", body))
    assert len(chunks) == 1 and "# not a heading" in chunks[0].body


def test_empty_body_still_gives_one_chunk_with_the_title():
    chunks = chunk_document(Document("e", "Only a title", ""))
    assert len(chunks) == 1 and chunks[0].text == "Only a title"


def test_wikilinks_with_labels_and_anchors():
    assert wikilinks("see [[alpha]], [[beta|the beta]] and [[gamma#part]] and [[alpha]]") == [
        "alpha",
        "beta",
        "gamma",
    ]


def test_normalize_text_keeps_chinese_punctuation_and_indentation_as_written():
    text = "ＡＢＣ\u3000中文，标点。  \r\n\x07next\n```\ndef f():\n    return  1\n```"
    assert normalize_text(text) == (
        "ＡＢＣ\u3000中文，标点。\nnext\n```\ndef f():\n    return  1\n```"
    )
    assert normalize_text("cafe\u0301") == "caf\u00e9"  # one spelling per word (NFC)


def test_full_width_letters_match_their_ascii_form_in_the_tokenizer():
    from ragcore import Tokenizer

    assert Tokenizer()("ＱＤＲＡＮＴ　ｌｏｃａｌ") == Tokenizer()("qdrant local")


def test_load_markdown_reads_frontmatter_and_title(tmp_path: Path):
    p = tmp_path / "n.md"
    p.write_text("---\ntitle: Hello\ntype: decision\ntags: [a, b]\n---\n# Ignored\n\nBody text\n")
    doc = load_markdown(p, "n")
    assert (
        doc.title == "Hello" and doc.meta["type"] == "decision" and doc.meta["tags"] == ["a", "b"]
    )
    assert "Body text" in doc.body


def test_title_falls_back_to_first_heading_then_file_name(tmp_path: Path):
    (tmp_path / "a.md").write_text("# From heading\n\ntext")
    (tmp_path / "b-file.md").write_text("plain text")
    assert load_markdown(tmp_path / "a.md", "a").title == "From heading"
    assert load_markdown(tmp_path / "b-file.md", "b").title == "b-file"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff\xfe\x00b\x00i\x00n", "binary"),
        ("caf\u00e9".encode("latin-1"), "not UTF-8"),
        (b"---\ntitle: [unclosed\n---\nbody", "broken frontmatter"),
    ],
)
def test_bad_files_raise_a_document_error_naming_the_reason(tmp_path: Path, content, reason):
    p = tmp_path / "bad.md"
    p.write_bytes(content)
    with pytest.raises(DocumentError, match=reason):
        load_markdown(p, "bad")


def test_oversized_files_are_refused(tmp_path: Path):
    p = tmp_path / "big.md"
    p.write_text("x" * 2000)
    with pytest.raises(DocumentError, match="over the 1000-byte limit"):
        load_markdown(p, "big", max_bytes=1000)


def test_scan_skips_generated_folders_and_non_markdown(tmp_path: Path):
    for rel in [
        "docs/a.md",
        "README.md",
        "node_modules/x/readme.md",
        ".git/info.md",
        "outputs/gen.md",
        "src/code.py",
        "docs/drafts/b.md",
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    found = [rel for rel, _ in scan_markdown(tmp_path, exclude=["docs/drafts"])]
    assert found == ["README.md", "docs/a.md"]
