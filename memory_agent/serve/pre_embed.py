"""Embedding before the write lock: a write's chunks, or a sync's incoming entries, embedded
into the embedding cache with no lock held, so the write (its dedup and its index refresh) or
the round's refresh then finds them cached, and seconds of embedding hold up neither searches
nor other writes. An optimisation only: a failure is logged, and the write embeds anyway."""

from __future__ import annotations

import logging
from typing import Any

from memory_agent import limits
from memory_agent.index.memory import Memory
from memory_agent.serve.model import ModelLoader
from ragcore import Document, chunk_document

__all__ = ["PreEmbed"]

log = logging.getLogger("memory_agent.service")  # the daemon log's name for it, unchanged


class PreEmbed:
    """The service's pre-embedding, with its memory (the embedder, `max_chars`) and model."""

    def __init__(self, memory: Memory, model: ModelLoader):
        self.memory = memory
        self.model = model

    def write(self, title: Any, body: Any) -> None:
        """A write's title and body, when the model is loaded (a write waits for it anyway)
        and the text is within the bounds the gateway checks."""
        if not (isinstance(title, str) and isinstance(body, str)) or not self.model.loaded:
            return
        if len(body) > limits.MAX_BODY or len(title) > limits.MAX_TITLE:
            return  # refused by the gateway anyway
        try:
            doc = Document("pre-embed", title.strip(), body.strip())
            chunks = chunk_document(doc, int(self.memory.cfg.max_chars))
            self.memory.embedder.embed_documents([c.text for c in chunks])
        except Exception as exc:  # noqa: BLE001 - an optimisation: the write embeds anyway
            log.debug("pre-embedding failed: %s", exc)

    def entries(self, files: list[tuple[str, str]]) -> None:
        """A sync's incoming entries ((path, text), read from git before the branch moves),
        in one batch, so the round holds the write lock only to move the files and switch the
        index."""
        from memory_agent.kb.entries import ValidationError, parse_entry

        self.model.wait()  # (a background round, too: the refresh after the move needs it)
        texts = []
        for name, text in files:
            try:
                entry = parse_entry(text, name)
            except ValidationError:
                continue  # the scan reports it after the move
            doc = Document(entry.id, entry.title, entry.body)
            texts += [c.text for c in chunk_document(doc, int(self.memory.cfg.max_chars))]
        try:
            self.memory.embedder.embed_documents(texts)
        except Exception as exc:  # noqa: BLE001 - an optimisation: the refresh embeds anyway
            log.warning("pre-embedding a sync's entries failed: %s", exc)
