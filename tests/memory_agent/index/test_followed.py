"""A home's memory as a reader process sees it (`index.followed`): the daemon's index followed
read-only - every search, dense or lexical alone, answers from the owner's state as of its
last reply, and nothing is written."""

from __future__ import annotations

import pytest

from memory_agent import config
from memory_agent.index.followed import FollowingMemory, ReadOnlyProcess
from memory_agent.recall.reads import search


def test_a_followed_memory_sees_the_owners_writes_in_dense_and_lexical_searches(
    memory, gateway, minilm_model
):
    following = FollowingMemory(config.load({"home": str(memory.home)}), embedder=minilm_model)
    try:
        assert search(following, "release process", use_dense=False)["hits"]  # opened here
        added = gateway.add(
            "Quokka marker for the follower",
            "A zebrafish-shaped marker that only this entry holds.",
            type="fact",
        )
        # lexical alone (the model not answering): the owner's write is there all the same
        lexical = search(following, "zebrafish-shaped marker", use_dense=False)["hits"]
        assert lexical and lexical[0]["id"] == added["id"], lexical
        dense = search(following, "zebrafish-shaped marker quokka")["hits"]
        assert dense and dense[0]["id"] == added["id"], dense
        with pytest.raises(ReadOnlyProcess):
            following.refresh(force=True)  # the files are the owner's to index
    finally:
        following.close()
