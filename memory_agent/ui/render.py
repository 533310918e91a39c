"""HTML for the memory browser: Jinja2 templates (autoescaped), Markdown rendered with raw HTML
escaped and unsafe links dropped, and charts drawn as inline SVG (no script, no style
attribute: the page's Content-Security-Policy allows neither)."""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from memory_agent.errors import ErrorInfo

__all__ = ["Pages", "for_page", "markdown", "plain"]

TEMPLATES = Path(__file__).parent / "templates"
SIGNALS = ("reinforcement", "importance", "recency", "dormancy", "links")
_md = None
_WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:[#|][^\[\]\n]*)?\]\]")


def _parser():
    global _md
    if _md is None:
        from markdown_it import MarkdownIt

        _md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
        _md.add_render_rule("image", _image_as_link)
    return _md


def _image_as_link(self, tokens, idx, options, env) -> str:
    """An image is never fetched: a page that loads a URL from an entry tells that URL who
    read the entry and when. It is shown as a link (a safe URL) or as its text."""
    token = tokens[idx]
    alt = escape(self.renderInlineAsText(token.children or [], options, env) or "image")
    src = token.attrGet("src") or ""
    if not src or not _parser().validateLink(src):
        return f'<span class="image">[image: {alt}]</span>'
    return f'<a class="image" href="{escape(src)}" rel="noreferrer">[image: {alt}]</a>'


def markdown(text: str) -> Markup:
    """Untrusted Markdown as safe HTML: raw HTML is shown as text, `javascript:` and other
    unsafe links are not links, images are links and are never loaded."""
    linked = _WIKILINK.sub(
        lambda m: f"[{m.group(1)}](/entry?{urllib.parse.urlencode({'id': m.group(1).strip()})})",
        text or "",
    )
    return Markup(_parser().render(linked))


def plain(text: str) -> str:
    """The words of a Markdown snippet without its markup (`**x**` -> x, `[a](u)` -> a,
    headings and list markers dropped), on one line: what a search hit shows."""
    words: list[str] = []
    for token in _parser().parse(_WIKILINK.sub(lambda m: m.group(1), text or "")):
        if token.type == "inline":
            for child in token.children or []:
                if child.type in ("text", "code_inline"):
                    words.append(child.content)
                elif child.type == "image":
                    words.append(child.content)
                elif child.type in ("softbreak", "hardbreak"):
                    words.append(" ")
            words.append(" ")
        elif token.type in ("fence", "code_block"):
            words.append(token.content.strip() + " ")
    return re.sub(r"\s+", " ", "".join(words)).strip()


# An error's words for a person at this browser, not for an agent: the tools it names become
# the pages and buttons that do the same (as `errors.for_cli` names commands for the CLI).
_PAGE_WORDS = (
    ("find ids with memory_search", "search for it on the Search page, or browse Entries"),
    ("memory_search", "the Search page"),
    ("memory_get", "the entry's page"),
    ("memory_add", "the Add page"),
    ("memory_supersede", "Supersede on the entry's page"),
    ("memory_archive", "Archive on the entry's page"),
    ("memory_resolve_fork", "Resolve the fork on the entry's page"),
    ("memory_index_status", "the Overview"),
    ("confirm=true", "Confirm"),
)


def for_page(info: ErrorInfo) -> ErrorInfo:
    """An `ErrorInfo` whose message and fix speak of this browser's pages."""

    def words(text: str) -> str:
        for tool, page in _PAGE_WORDS:
            text = text.replace(tool, page)
        return text

    return ErrorInfo(info.code, words(info.message), words(info.fix))


def bar(value: float, scale: float, *, width: int = 160, negative: bool = False) -> Markup:
    """A horizontal bar as SVG (value relative to `scale`)."""
    frac = 0.0 if scale <= 0 else max(0.0, min(1.0, abs(value) / scale))
    cls = "neg" if negative or value < 0 else "pos"
    w = round(frac * width, 1)
    return Markup(
        f'<svg class="bar" width="{width}" height="10" viewBox="0 0 {width} 10" role="img" '
        f'aria-label="{escape(f"{value:+.4f}")}"><rect class="track" width="{width}" '
        f'height="10"/><rect class="{cls}" width="{w}" height="10"/></svg>'
    )


def columns(points: list[tuple[str, int]], *, width: int = 600, height: int = 90) -> Markup:
    """Recall activity per day as SVG columns, each with its count above it (days without a
    recall have no column and no number)."""
    top = max([n for _, n in points] or [0]) or 1
    step = width / max(len(points), 1)
    plot = height - 26  # room for a number above the tallest column and the dates below
    rects = []
    for i, (day, n) in enumerate(points):
        h = round(n / top * plot, 1)
        x = round(i * step + 1, 1)
        y = round(height - 12 - h, 1)
        rects.append(
            f'<rect class="col" x="{x}" y="{y}" width="{round(step - 2, 1)}" height="{h}">'
            f"<title>{escape(day)}: {n}</title></rect>"
        )
        if n:
            rects.append(
                f'<text class="count" x="{round(x + (step - 2) / 2, 1)}" y="{round(y - 2, 1)}" '
                f'text-anchor="middle">{n}</text>'
            )
    first, last = (points[0][0], points[-1][0]) if points else ("", "")
    total = sum(n for _, n in points)
    return Markup(
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="recalls per day: {total} in {len(points)} days">'
        f"{''.join(rects)}"
        f'<text x="0" y="{height - 1}">{escape(first)}</text>'
        f'<text x="{width}" y="{height - 1}" text-anchor="end">{escape(last)}</text></svg>'
    )


def when(value: Any) -> str:
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%d %H:%M")
    return str(value or "")[:16].replace("T", " ")


def entry_url(entry_id: str) -> str:
    return "/entry?" + urllib.parse.urlencode({"id": entry_id})


class Pages:
    def __init__(self, csrf: str):
        self.env = Environment(
            loader=FileSystemLoader(str(TEMPLATES)),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(
            csrf=csrf,
            bar=bar,
            columns=columns,
            markdown=markdown,
            when=when,
            entry_url=entry_url,
            SIGNALS=SIGNALS,
            plain=plain,
        )
        self.env.filters["urlencode_id"] = lambda v: urllib.parse.quote(str(v), safe="")

    def _render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    def overview(self, status, counts, writes, activity, health, remote=()) -> str:
        return self._render(
            "overview.html",
            status=status,
            counts=counts,
            writes=writes,
            activity=activity,
            health=health,
            remote=remote,
            nav="overview",
        )

    def search(self, q, reply, types, error=None) -> str:
        hits = (reply or {}).get("hits", [])
        scale = max([h["score"] for h in hits] + [0.001])
        signal_scale = max(
            [abs(v) for h in hits for v in (h.get("why", {}).get("signals") or {}).values()]
            + [0.05]
        )
        return self._render(
            "search.html",
            q=q,
            reply=reply,
            hits=hits,
            types=types,
            scale=scale,
            signal_scale=signal_scale,
            error=error,
            sources=q.getlist("source") or ["kb", "docs"],
            chosen_types=q.getlist("type"),
            nav="search",
        )

    def entries(self, listing, filters, number, total_pages, types) -> str:
        return self._render(
            "entries.html",
            listing=listing,
            filters=filters,
            number=number,
            total_pages=total_pages,
            types=types,
            nav="entries",
        )

    def entry(self, got, context, history, commits, activity, successors=()) -> str:
        return self._render(
            "entry.html",
            e=got,
            successors=list(successors),
            context=context,
            history=history,
            commits=commits,
            activity=activity,
            nav="entries",
        )

    def add(self, kbs, types) -> str:
        return self._render("add.html", kbs=kbs, types=types, nav="add")

    def write_result(self, action, form, reply) -> str:
        return self._render("write.html", action=action, form=form, reply=reply, nav="entries")

    def sessions(self, total, rows, number, total_pages) -> str:
        return self._render(
            "sessions.html",
            total=total,
            rows=rows,
            number=number,
            total_pages=total_pages,
            nav="episodes",
        )

    def session(self, name, turns, state) -> str:
        lessons = [
            {"key": k, **v}
            for k, v in (state.get("promoted") or {}).items()
            if any(e.startswith(f"episodes/{name}/") for e in v.get("episodes", []))
        ]
        return self._render("session.html", name=name, turns=turns, lessons=lessons, nav="episodes")

    def inbox(self, proposals, state) -> str:
        return self._render(
            "inbox.html", proposals=proposals, rejected=(state.get("rejected") or {}), nav="inbox"
        )

    def error(self, info) -> str:
        return self._render("error.html", info=info, nav="")
