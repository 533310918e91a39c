"""Names in a text: the people, projects, tools, places, dates and codes it mentions - the entity
layer the index keeps per document (derived when a document is indexed, stored in its
generation, rebuilt with it; never written back into the Markdown).

No model ships offline for this, so the rules are plain and cheap:
- English: runs of Capitalised words ("Caroline", "New York", "Kubernetes CronJob"), except a
  lone capitalised word opening a sentence that is a common word ("The", "When", "Thanks");
  ALL-CAPS acronyms ("EKS", "LGBTQ"); code-like names with a digit, dot, slash or inner
  capital ("INC-0412", "asyncpg.Pool", "CamelCase").
- Dates: "8 May, 2023", "May 8th, 2023", "2023-05-08", "2023年5月8日" -> "2023-05-08".
- Chinese: jieba's part-of-speech tags for person (nr), place (ns), organisation (nt) and
  other proper names (nz) - only when the text has
  CJK characters (the tagger is the slow part); Latin words in it go through the English rules.
Entities are lower-cased, at most MAX_ENTITIES per document, in order of first mention.
"""

from __future__ import annotations

import re

__all__ = ["extract_entities", "query_entities"]

MAX_ENTITIES = 24
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SPAN = re.compile(r"(?<![\w.\-/])(?:[A-Z][\w'’-]*(?:\s+(?:of|de|the|and|&)?\s*[A-Z][\w'’-]*)*)")
_CODE = re.compile(r"\b(?:[A-Za-z]+[-_.:/][A-Za-z0-9]+(?:[-_.:/][A-Za-z0-9]+)*|[a-z]+[A-Z]\w*)\b")
_ACRONYM = re.compile(r"(?<![\w.\-/])[A-Z][A-Z0-9]{1,9}s?\b(?![-_.:/]\w)")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"“(\[]\s*)$")
# Capitalised only because they open a sentence (or are pronouns/fillers): never entities alone.
_COMMON = frozenset(
    """a about after again all also an and any are as at be because been before being both but
    by can could did do does doing done for from had has have having he her here hers him his
    how i if in into is it its just let like may me might my no nor not now of off oh ok okay
    on once only or our out over own please same she should so some such than thank thanks that
    the their them then there these they this those through to too under until up very was we
    well were what when where which while who whom why will with would wow yeah yes yet you
    your yours hey hi hello sure great awesome cool nice sounds sorry really good glad
    monday tuesday wednesday thursday friday saturday sunday
    january february march april june july august september october november december
    note use using see todo fix""".split()
)
_MONTHS = {
    m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)
}
_MONTH = r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_DATES = (  # (pattern, group order): day month year / month day year / ISO
    (re.compile(rf"\b(\d{{1,2}})\s+{_MONTH},?\s+(\d{{4}})\b"), "dmy"),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"), "mdy"),
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), "iso"),
    (re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日"), "iso"),
)
_ZH_TAGS = {"nr", "nrfg", "nrt", "ns", "nsf", "nt", "nz"}  # Latin words: the English rules


def _english(text: str) -> list[str]:
    found: list[str] = []
    for match in _SPAN.finditer(text):
        span = match.group(0).strip()
        words = span.split()
        opening = _SENTENCE_START.search(text[: match.start()]) is not None
        while words and words[0].lower() in _COMMON:  # "When Caroline" -> "Caroline"
            words = words[1:]
        while words and words[-1].lower() in ("of", "de", "the", "and", "&"):
            words = words[:-1]
        if not words:
            continue
        if len(words) == 1 and opening and words[0].lower() in _COMMON:
            continue
        name = " ".join(words).strip("'’-")
        if len(name) >= 2:
            found.append(name)
    found += [m.group(0) for m in _ACRONYM.finditer(text)]
    found += [m.group(0).rstrip(".:/") for m in _CODE.finditer(text)]
    return found


def _dates(text: str) -> list[str]:
    """Calendar dates, as ISO 8601 days ("8 May, 2023" -> "2023-05-08")."""
    out = []
    for pattern, order in _DATES:
        for m in pattern.finditer(text):
            if order == "dmy":
                day, month, year = int(m[1]), _MONTHS[m[2][:3].lower()], int(m[3])
            elif order == "mdy":
                month, day, year = _MONTHS[m[1][:3].lower()], int(m[2]), int(m[3])
            else:
                year, month, day = int(m[1]), int(m[2]), int(m[3])
            if 1 <= month <= 12 and 1 <= day <= 31:
                out.append(f"{year:04d}-{month:02d}-{day:02d}")
    return out


def _chinese(text: str) -> list[str]:
    import jieba.posseg as posseg

    return [
        word.strip()
        for word, flag in posseg.lcut(text)
        if flag in _ZH_TAGS and len(word.strip()) >= 2
    ]


def extract_entities(text: str, limit: int = MAX_ENTITIES) -> list[str]:
    """The names `text` mentions, lower-cased, first mention first, at most `limit`."""
    names = _dates(text) + _english(text)
    if _CJK.search(text):
        names += _chinese(text)
    out: list[str] = []
    seen: set[str] = set()
    for name in names:
        key = " ".join(name.lower().split())
        if key in seen or key in _COMMON or key.isdigit() or key in _MONTHS:
            continue
        seen.add(key)
        out.append(key)
        if len(out) >= limit:
            break
    return out


def query_entities(query: str) -> list[str]:
    """The names a query mentions (the same rules; a query's first word is rarely a name)."""
    return extract_entities(query)
