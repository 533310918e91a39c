"""Front matter (and any small YAML a person writes) read within bounds: the one YAML reader of
ragcore and of every caller that parses a file it did not write.

YAML's aliases let a few hundred bytes stand for billions of values (`b: [*a, *a, ...]`, nine
levels deep): the loader shares them, but whatever walks the result - a copy, a validation, a
JSON dump - expands them, and a 0.4 KB note kept `memory-agent import` running until memory
ran out. So the reader refuses:

- an alias (`*name`, and so a merge key `<<: *name`): the value is to be written out;
- a block over `max_bytes` (front matter: 128 KiB), more than `max_nodes` values, nesting
  deeper than MAX_DEPTH, or a parse longer than `max_seconds`.

A refusal is `FrontMatterRefused`, a `ValueError` saying which bound and the fix; YAML that
is not valid is yaml's own `YAMLError`, as before. PyYAML is imported when first used (the
hook and the proxy import ragcore without it).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = [
    "MAX_FRONT_MATTER_BYTES",
    "FrontMatterRefused",
    "load_yaml",
    "parse_front_matter",
]

MAX_FRONT_MATTER_BYTES = 128 * 1024  # (a hand-written hub of 4,000 typed links: ~100 KB)
MAX_NODES = 20_000  # values (scalars, lists, maps) in one block
MAX_DEPTH = 50  # lists and maps inside each other
MAX_SECONDS = 10.0  # a backstop: within the other bounds a read takes under 1 s here


class FrontMatterRefused(ValueError):
    """YAML the bounded reader will not read: an alias, or over a bound. Says which, and how
    to write it instead."""


_LOADER: Any = None
_TOO_LONG = "it took too long to read; keep it short"
_TOO_DEEP = f"it nests lists or maps over {MAX_DEPTH} deep; flatten it"


def _alias(event: Any, first_line: int) -> str:
    return (
        f"it uses the YAML alias *{event.anchor} (line {event.start_mark.line + first_line}); "
        "aliases are not read, since a few of them can stand for millions of values: write "
        "the value out"
    )


def _too_many(max_nodes: int) -> str:
    return f"it holds over {max_nodes} values; keep it short (long lists belong in the body)"


def _loader() -> Any:
    global _LOADER
    if _LOADER is None:
        import yaml
        from yaml.events import AliasEvent

        class BoundedLoader(yaml.SafeLoader):
            """yaml's safe loader, counting what it composes."""

            def bound(self, max_nodes: int, deadline: float, first_line: int) -> None:
                self.max_nodes, self.deadline, self.nodes, self.depth = max_nodes, deadline, 0, 0
                self.first_line = first_line

            def compose_node(self, parent: Any, index: Any) -> Any:
                if self.check_event(AliasEvent):
                    raise FrontMatterRefused(_alias(self.peek_event(), self.first_line))
                self.nodes += 1
                if self.nodes > self.max_nodes:
                    raise FrontMatterRefused(_too_many(self.max_nodes))
                if time.monotonic() > self.deadline:
                    raise FrontMatterRefused(_TOO_LONG)
                self.depth += 1
                try:
                    if self.depth > MAX_DEPTH:
                        raise FrontMatterRefused(_TOO_DEEP)
                    return super().compose_node(parent, index)
                finally:
                    self.depth -= 1

        _LOADER = BoundedLoader
    return _LOADER


def load_yaml(
    text: str,
    *,
    max_bytes: int = MAX_FRONT_MATTER_BYTES,
    max_nodes: int = MAX_NODES,
    max_seconds: float = MAX_SECONDS,
    first_line: int = 1,
) -> Any:
    """`yaml.safe_load(text)` within the bounds; `FrontMatterRefused` past one of them.
    `first_line`: the line of the file `text` starts at (for the line a refusal names)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise FrontMatterRefused(
            f"it is {size} bytes, over the {max_bytes}-byte limit; keep it short (long text "
            "belongs in the body)"
        )
    deadline = time.monotonic() + max_seconds
    fast = _c_loader()
    if fast is not None:
        try:
            _check_events(fast, text, max_nodes, deadline, first_line)
            return _yaml_load(text, fast)
        except UnicodeEncodeError:  # a lone surrogate: libyaml takes UTF-8 only
            pass
    loader = _loader()(text)
    try:
        loader.bound(max_nodes, deadline, first_line)
        return loader.get_single_data()
    finally:
        loader.dispose()


def _c_loader() -> Any:
    """yaml's safe loader on libyaml (C), None where PyYAML was built without it. It reads a
    typical front matter ~6x faster than the Python one (bounds included): at 1,000,000
    entries that is the larger part of a full scan (experiments/million)."""
    import yaml

    return getattr(yaml, "CSafeLoader", None) if yaml.__with_libyaml__ else None


def _yaml_load(text: str, loader: Any) -> Any:
    import yaml

    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader (CSafeLoader)


def _check_events(loader: Any, text: str, max_nodes: int, deadline: float, first: int) -> None:
    """The bounds of `BoundedLoader`, checked on libyaml's event stream before the C loader
    builds the values (its composer cannot be hooked): the same refusals, the same texts. The
    text is parsed twice (~15 us of ~50 for a typical block) so that an alias or a deep
    nesting is refused before libyaml's recursive composer meets it."""
    import yaml
    from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent

    nodes = depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, AliasEvent):
            raise FrontMatterRefused(_alias(event, first))
        if isinstance(event, CollectionEndEvent):
            depth -= 1
            continue
        if not isinstance(event, NodeEvent):
            continue
        nodes += 1
        if nodes > max_nodes:
            raise FrontMatterRefused(_too_many(max_nodes))
        if time.monotonic() > deadline:
            raise FrontMatterRefused(_TOO_LONG)
        if depth + 1 > MAX_DEPTH:  # this node inside `depth` lists or maps
            raise FrontMatterRefused(_TOO_DEEP)
        depth += isinstance(event, CollectionStartEvent)


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(metadata, content) of a document, as `frontmatter.loads` splits it (YAML between
    `---` lines, or the other formats python-frontmatter knows), the YAML read by
    `load_yaml`. No front matter: ({}, the text stripped). Raises `FrontMatterRefused` or
    yaml's `YAMLError`."""
    import frontmatter
    from frontmatter.default_handlers import YAMLHandler

    stripped = text.strip()
    handler = frontmatter.detect_format(stripped, frontmatter.handlers)
    if handler is None:
        return {}, stripped
    if not isinstance(handler, YAMLHandler):  # JSON (TOML): no aliases to expand
        post = frontmatter.loads(text, handler=handler)
        return dict(post.metadata), post.content
    try:
        block, content = handler.split(stripped)
    except ValueError:
        return {}, stripped
    data = load_yaml(block)
    meta = {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}
    return meta, content.strip()
