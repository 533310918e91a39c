"""Search and get: the filters a search takes are validated, and both serve a corpus file by one
rule - exactly the files a scan reads. (Issue 9.)"""

import json

import pytest

from memory_agent.errors import Invalid
from memory_agent.recall import reads
from tests.memory_agent.helpers import make_memory


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"types": ["bogus"]}, "types: 'bogus' is not a type"),
        ({"limit": 0}, "limit: 0 is out of range"),
        ({"limit": -1}, "limit: -1 is out of range"),
        ({"limit": 100000}, "limit: 100000 is out of range"),
        ({"limit": True}, "limit: True is not a whole number"),
    ],
)
def test_search_filters_are_validated(memory, kwargs, words):
    with pytest.raises(Invalid) as refused:
        reads.search(memory, "how do we lock dependencies", **kwargs)
    assert words in refused.value.message


def test_search_and_get_use_one_rule_for_corpus_files(env_home, minilm_model, tmp_path):
    repo = tmp_path / "proj"
    files = {
        "README.md": "# Readme\n\nThe gizmo service readme.",
        ".github/CONTRIBUTING.md": "# Contributing\n\nThe gizmo contribution guide.",
        "docs/guide.md": "# Guide\n\nThe gizmo user guide.",
        "docs/deep/inner.md": "# Inner\n\nThe gizmo inner notes.",
        "notes/plan.md": "# Plan\n\nThe gizmo plan.",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    memory = make_memory(env_home, minilm_model)
    memory.init(embedder="minilm")
    (env_home / "repos.json").write_text(
        json.dumps([{"label": "proj", "path": str(repo), "include": ["docs/*.md", "README.md"]}])
    )
    found = {h["id"] for h in reads.search(memory, "gizmo", limit=20)["hits"]}
    assert found == {"proj/README.md", "proj/docs/guide.md"}
    for rel in files:
        entry_id = f"proj/{rel}"
        try:
            reads.get(memory, entry_id)
            served = True
        except Exception:
            served = False
        assert served == (entry_id in found), entry_id
