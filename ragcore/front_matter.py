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
                    event = self.peek_event()
                    raise FrontMatterRefused(
                        f"it uses the YAML alias *{event.anchor} (line "
                        f"{event.start_mark.line + self.first_line}); aliases are not read, since a few "
                        "of them can stand for millions of values: write the value out"
                    )
                self.nodes += 1
                if self.nodes > self.max_nodes:
                    raise FrontMatterRefused(
                        f"it holds over {self.max_nodes} values; keep it short (long lists "
                        "belong in the body)"
                    )
                if time.monotonic() > self.deadline:
                    raise FrontMatterRefused("it took too long to read; keep it short")
                self.depth += 1
                try:
                    if self.depth > MAX_DEPTH:
                        raise FrontMatterRefused(
                            f"it nests lists or maps over {MAX_DEPTH} deep; flatten it"
                        )
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
    loader = _loader()(text)
    try:
        loader.bound(max_nodes, time.monotonic() + max_seconds, first_line)
        return loader.get_single_data()
    finally:
        loader.dispose()


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
