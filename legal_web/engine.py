"""The question-answering engine: knowledge bases of regulation documents on ragcore.

A data folder holds one sub-folder per knowledge base (Markdown documents plus `_kb.json` with
its title). All knowledge bases share one ragcore index in the engine's home, told apart by
`source`; a question searches one knowledge base. The answer is extractive: the sentences of the
best passages that share the most words with the question, each cited by passage number. No
language model is needed; an optional hook (`LEGAL_WEB_LLM_HOOK=module:function`) can write the
answer from the same passages instead.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragcore import (
    CachedEmbedder,
    Document,
    DocumentError,
    EmbeddingCache,
    Filter,
    Index,
    RagcoreError,
    Tokenizer,
    load_markdown,
    make_embedder,
    scan_markdown,
    search,
)

__all__ = ["KnowledgeBase", "LegalEngine", "Passage", "default_data_dir"]

_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])|\n+")


def default_data_dir() -> Path:
    return Path(__file__).parent / "data"


@dataclass(frozen=True)
class KnowledgeBase:
    name: str
    title: str
    language: str
    description: str
    docs: int


@dataclass(frozen=True)
class Passage:
    doc: str
    title: str
    heading: str
    snippet: str
    score: float

    def as_json(self) -> dict[str, Any]:
        return {
            "doc": self.doc,
            "title": self.title,
            "heading": self.heading,
            "snippet": self.snippet,
            "score": round(self.score, 4),
        }


class UnknownKnowledgeBase(RagcoreError):
    """A question named a knowledge base the engine does not have."""

    code = "not_found"


class LegalEngine:
    def __init__(self, data_dir: Path, home: Path, *, embedder: str = "minilm"):
        self.data_dir = Path(data_dir)
        self.home = Path(home)
        self.tokenizer = Tokenizer()
        inner = make_embedder(embedder)
        self.embedder = CachedEmbedder(inner, EmbeddingCache(self.home / "cache"))
        self.index = Index(self.home / "index", self.embedder)
        self.kbs: dict[str, KnowledgeBase] = {}
        self.skipped: list[str] = []
        self.llm_hook = _load_hook(os.environ.get("LEGAL_WEB_LLM_HOOK", ""))

    def load(self) -> None:
        """Read every knowledge base and bring the index up to date (a first run builds it)."""
        if not self.data_dir.is_dir():
            raise FileNotFoundError(f"no data folder at {self.data_dir}: pass --data DIR")
        docs: list[Document] = []
        for folder in sorted(p for p in self.data_dir.iterdir() if p.is_dir()):
            meta_file = folder / "_kb.json"
            if not meta_file.is_file():
                continue
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            kb_docs = []
            for rel, full in scan_markdown(folder):
                if rel.startswith("_"):
                    continue
                try:
                    kb_docs.append(load_markdown(full, f"{folder.name}/{rel}", source=folder.name))
                except DocumentError as exc:
                    self.skipped.append(str(exc))
            self.kbs[folder.name] = KnowledgeBase(
                folder.name,
                meta.get("title", folder.name),
                meta.get("language", ""),
                meta.get("description", ""),
                len(kb_docs),
            )
            docs.extend(kb_docs)
        if not self.kbs:
            raise FileNotFoundError(
                f"{self.data_dir} holds no knowledge base (a folder with "
                "_kb.json and Markdown documents)"
            )
        if self.index.exists():
            self.index.refresh(docs)
        else:
            self.index.build(docs)

    def close(self) -> None:
        self.index.close()
        if self.embedder.cache is not None:
            self.embedder.cache.close()

    def list_kbs(self) -> list[dict[str, Any]]:
        return [
            {
                "name": kb.name,
                "title": kb.title,
                "docs": kb.docs,
                "language": kb.language,
                "description": kb.description,
            }
            for kb in self.kbs.values()
        ]

    def retrieve(self, kb: str, question: str, limit: int = 5) -> list[Passage]:
        if kb not in self.kbs:
            raise UnknownKnowledgeBase(
                f"no knowledge base {kb!r}", f"choose one of {', '.join(self.kbs)}"
            )
        result = search(self.index, question, limit=limit, flt=Filter(sources=(kb,)))
        return [
            Passage(
                h.doc_id.split("/", 1)[1], h.title, h.heading, h.payload.get("text", ""), h.score
            )
            for h in result.hits
        ]

    def ask(self, kb: str, question: str, limit: int = 5) -> dict[str, Any]:
        passages = self.retrieve(kb, question, limit)
        if self.llm_hook is not None:
            answer = self.llm_hook(question, [p.as_json() for p in passages])
        else:
            answer = self.extract_answer(question, passages)
        out = [p.as_json() for p in passages]
        for p in out:
            p["snippet"] = _shorten(re.sub(r"\*\*|__|`", "", p["snippet"]), 600)
        return {"answer": answer, "passages": out}

    def extract_answer(self, question: str, passages: list[Passage], sentences: int = 3) -> str:
        """The sentences of the top passages that share most (IDF-weighted) words with the
        question, in passage order, each followed by its citation [n]."""
        if not passages:
            return "No passage in this knowledge base matches the question."
        q_terms = set(self.tokenizer(question))
        scored = []
        for n, passage in enumerate(passages[:3], start=1):
            for i, sentence in enumerate(s.strip() for s in _SENTENCE.split(passage.snippet)):
                if len(sentence) < 8 or sentence.startswith("#"):
                    continue
                terms = set(self.tokenizer(sentence))
                overlap = sum(self.index.token_idf(t) for t in q_terms & terms)
                # Earlier passages and earlier sentences win ties.
                scored.append((overlap / (1 + 0.15 * (n - 1)), -n, -i, n, sentence))
        best = sorted(scored, reverse=True)[:sentences]
        best = [b for b in best if b[0] > 0] or best[:1]
        best.sort(key=lambda b: (b[3], -b[2]))
        return " ".join(f"{_plain(sentence)} [{n}]" for *_, n, sentence in best)


def _plain(sentence: str) -> str:
    """A sentence without Markdown emphasis, code ticks or list markers."""
    sentence = re.sub(r"\*\*|__|`", "", sentence)
    return re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", sentence).strip()


def _shorten(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _load_hook(spec: str) -> Callable[[str, list[dict[str, Any]]], str] | None:
    """`module:function` taking (question, passages) and returning the answer text."""
    if not spec:
        return None
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"LEGAL_WEB_LLM_HOOK={spec!r}: use module:function")
    return getattr(importlib.import_module(module), name)
