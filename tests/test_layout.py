"""The folders tell the architecture (issues 19 and 27, docs/adr/0013-layout-by-job.md,
docs/adr/0018-packages-by-job.md, docs/layout.md).

Every module of `memory_agent/` and `ragcore/` sits in one layer; an import points into its own
layer or one below, never up; and no module reaches itself again through its imports, directly
or round a longer circle. Every import counts - at module level, inside a function, under
`if TYPE_CHECKING:`, `importlib.import_module("literal")` - because each is a dependency a
reader has to follow and a circle at run time. The one exemption from the order: a package's
`__init__` importing its own submodules to re-export them (ragcore's public surface). A cycle
through an `__init__` is still a cycle (it is one at import time) and still fails.

Packages are held to the same rule one level up: collapsed to its package (`memory_agent.write`,
`memory_agent.cli`, a top-level module as itself), the import graph has no circle, so no two
packages import each other even inside one layer.

The same order is drawn in the README's "Architecture" section and in docs/layout.md; tests
check that the drawing names the same layers in the same order and that docs/layout.md gives
every module a line.

The tests follow the same map (docs/layout.md, "Where the tests are"): no test file is named
after an issue, and no two test files share a name.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

# Top to bottom. A name is a package (everything under it) or one module; `pkg.__init__` is the
# package's own file. A module may import its own layer and the layers below it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "serving and the CLI",
        (
            "memory_agent.__main__",
            "memory_agent.entry",
            "memory_agent.cli",
            "memory_agent.proxy",
            "memory_agent.hookrun",
            "memory_agent.serve",
            "memory_agent.ui",
        ),
    ),
    ("the write path", ("memory_agent.write",)),
    ("recall", ("memory_agent.recall",)),
    ("sync", ("memory_agent.sync",)),
    ("the index", ("memory_agent.index",)),
    ("capture", ("memory_agent.capture",)),
    ("the KB on disk", ("memory_agent.kb",)),
    ("intake", ("memory_agent.intake",)),
    (
        "shared basics",
        (
            "memory_agent.__init__",
            "memory_agent.errors",
            "memory_agent.config",
            "memory_agent.limits",
            "memory_agent.clock",
            "memory_agent.procs",
            "memory_agent.files",
            "memory_agent.faults",
            "memory_agent.endpoint",
            "memory_agent.client",
        ),
    ),
    ("the retrieval core", ("ragcore",)),
)
PACKAGES = ("memory_agent", "ragcore")
MAX_TOP_LEVEL = 14  # memory_agent/*.py: the entry points and the shared basics


class Arrow(NamedTuple):
    source: str  # importing module, e.g. "memory_agent.recall.reads"
    target: str  # imported module
    where: str  # "memory_agent/recall/reads.py:22"


# -- the checker ---------------------------------------------------------------------------------
def modules_of(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """{dotted name: file} of every module under `packages`; a package's own file is
    `pkg.__init__`."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[".".join(path.relative_to(root).with_suffix("").parts)] = path
    return found


def _module(name: str, modules: dict[str, Path]) -> str | None:
    """The module an import of `name` loads last: the module itself, the package's __init__,
    or the nearest enclosing one we know (None: not ours)."""
    parts = name.split(".")
    while parts:
        dotted = ".".join(parts)
        for candidate in (dotted, dotted + ".__init__"):
            if candidate in modules:
                return candidate
        parts.pop()
    return None


def arrows_of(root: Path, packages: Iterable[str]) -> tuple[dict[str, Path], list[Arrow]]:
    """Every module under `packages` and every import between two of them."""
    modules = modules_of(root, packages)
    arrows = []
    for source, path in modules.items():
        package = source.rsplit(".", 1)[0]  # a module's package; for pkg.__init__, pkg
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):  # functions, TYPE_CHECKING blocks and try/except too
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [_module(a.name, modules) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: level 1 is this module's own package
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    sub = f"{base}.{alias.name}"
                    known = sub in modules or sub + ".__init__" in modules
                    targets.append(_module(sub if known else base, modules))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                targets = [_module(node.args[0].value, modules)]
            where = f"{path.relative_to(root).as_posix()}:{getattr(node, 'lineno', 0)}"
            arrows += [Arrow(source, t, where) for t in targets if t and t != source]
    return modules, arrows


def _matches(module: str, name: str) -> bool:
    return module == name or module.startswith(name + ".")


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]]) -> int | None:
    """The index of the layer `module` belongs to (0 is the top), by its longest name."""
    best: tuple[int, int] | None = None
    for rank, (_, names) in enumerate(layers):
        for name in names:
            if _matches(module, name) and (best is None or len(name) > best[1]):
                best = (rank, len(name))
    return None if best is None else best[0]


def _reexport(arrow: Arrow) -> bool:
    """A package's __init__ importing one of its own submodules (to re-export it)."""
    if not arrow.source.endswith(".__init__"):
        return False
    return arrow.target.startswith(arrow.source.removesuffix("__init__"))


def unplaced(modules: Iterable[str], layers: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    return sorted(m for m in modules if layer_of(m, layers) is None)


def against_the_order(
    arrows: Iterable[Arrow], layers: Sequence[tuple[str, Sequence[str]]]
) -> list[str]:
    """One readable line per import that points to a layer above its own."""
    order = " -> ".join(title for title, _ in layers)
    found = []
    for arrow in arrows:
        src, dst = layer_of(arrow.source, layers), layer_of(arrow.target, layers)
        if src is None or dst is None or dst >= src or _reexport(arrow):
            continue
        found.append(
            f"{arrow.where}: {arrow.source} ({layers[src][0]}) imports {arrow.target} "
            f"({layers[dst][0]}), a layer above it; the order is {order}"
        )
    return sorted(found)


def cycles(arrows: Iterable[Arrow], noun: str = "modules") -> list[str]:
    """One readable line per group of modules that import each other (a strongly connected
    component of the import graph), naming one circle through it with the file and line of
    each import."""
    graph: dict[str, dict[str, str]] = {}
    for arrow in arrows:
        graph.setdefault(arrow.source, {}).setdefault(arrow.target, arrow.where)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graphs here are small
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    found = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}  # breadth first, inside the group, back to the start
        queue = [start]
        circle: list[str] = []
        while queue and not circle:
            node = queue.pop(0)
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    circle = paths[node] + [start]
                    break
                if nxt in group and nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    queue.append(nxt)
        steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(circle, circle[1:], strict=False)]
        found.append(f"cycle of {len(group)} {noun}: " + "; ".join(steps))
    return sorted(found)


# -- the layout of this repository ---------------------------------------------------------------
@functools.cache
def _repository() -> tuple[dict[str, Path], tuple[Arrow, ...]]:
    modules, arrows = arrows_of(ROOT, PACKAGES)
    return modules, tuple(arrows)


def test_every_module_sits_in_a_declared_layer():
    modules, _ = _repository()
    missing = unplaced(modules, LAYERS)
    assert not missing, (
        f"in no layer: {', '.join(missing)}. Place a new module: add it (or its package) to "
        "LAYERS here, to the README's Architecture drawing and to docs/layout.md"
    )


def test_no_import_points_to_a_layer_above():
    _, arrows = _repository()
    report = against_the_order(arrows, LAYERS)
    assert not report, "\n".join(["imports against the order:", *report])


def test_no_modules_import_each_other():
    _, arrows = _repository()
    report = cycles(arrows)
    assert not report, "\n".join(["modules that import each other:", *report])


def package_of(module: str) -> str:
    """The package a module belongs to, one level below the root (`memory_agent.write` for
    `memory_agent.write.gateway`); a top-level module is its own (`memory_agent.proxy`), and so
    is the root's own file (`memory_agent.__init__`)."""
    parts = module.split(".")
    if parts[0] == "ragcore":
        return "ragcore"
    if len(parts) > 2:
        return ".".join(parts[:2])
    return module


def package_arrows(arrows: Iterable[Arrow]) -> list[Arrow]:
    """The import graph collapsed to packages: one arrow per import between two of them."""
    found = []
    for arrow in arrows:
        source, target = package_of(arrow.source), package_of(arrow.target)
        if source != target:
            found.append(Arrow(source, target, arrow.where))
    return found


def test_no_packages_import_each_other():
    """Package level, every import counted (lazy and TYPE_CHECKING ones too): `write` may use
    `index`, `index` never `write`, even where both sit in one layer."""
    _, arrows = _repository()
    report = cycles(package_arrows(arrows), "packages")
    assert not report, "\n".join(["packages that import each other:", *report])


def test_the_top_level_keeps_only_the_entry_points_and_the_shared_basics():
    top = sorted(p.stem for p in (ROOT / "memory_agent").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} modules at the top of memory_agent/: {top}"


MAX_MODULE_LINES = 500  # a module past this is doing more than one job: split it by job


def test_no_module_is_longer_than_500_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules past {MAX_MODULE_LINES} lines (split them by job): {long}"


def test_the_packs_package_files_import_nothing():
    """The hook command imports `memory_agent` and `memory_agent.capture` on every agent event:
    a package's __init__ that re-exported a module would load it there too."""
    heavy = {}
    for init in sorted((ROOT / "memory_agent").rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        names = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        if names:
            heavy[init.relative_to(ROOT).as_posix()] = [ast.unparse(n) for n in names]
    assert heavy == {}


def _drawing() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1].splitlines()


def _label(name: str) -> str:
    """How the drawing writes a layer's member: `serve/` for a package, `cli` for a module."""
    package = ROOT / Path(*name.split("."))
    return name.rsplit(".", 1)[-1] + ("/" if package.is_dir() else "")


def test_the_readme_draws_the_same_layers_in_the_same_order():
    lines = _drawing()
    rows = []
    for title, names in LAYERS:
        labels = [_label(n) for n in names if n != "memory_agent.__init__"]  # (the version)
        where = {
            label: sorted(
                {
                    i
                    for i, line in enumerate(lines)
                    if re.search(rf"(?<![\w/.]){re.escape(label)}(?![\w/])", line)
                }
            )
            for label in labels
        }
        rows_of_layer = {i for found in where.values() for i in found}
        assert len(rows_of_layer) == 1 and all(where.values()), (
            f"the layer {title!r} should be one line of the README's Architecture drawing, "
            f"naming each of its members on that line only; found {where}"
        )
        rows.append(rows_of_layer.pop())
    assert rows == sorted(rows), "the README's drawing lists the layers in another order"
    drawn = {m.group(0) for line in lines for m in re.finditer(r"\b\w+/", line)}
    declared = {_label(n) for _, names in LAYERS for n in names}
    assert drawn <= declared, f"the drawing names packages no layer declares: {drawn - declared}"


def test_the_layout_page_says_each_modules_job():
    """docs/layout.md has a line for every module of the pack (`write.gateway`, `cli`, ...)."""
    adr = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `([\w.]+)` \|", adr, re.M))
    modules, _ = arrows_of(ROOT, ["memory_agent"])
    pack = {m.removeprefix("memory_agent.") for m in modules if not m.endswith(".__init__")}
    pack.add("__init__")
    assert sorted(pack - named) == [], "modules with no line in docs/layout.md"
    assert sorted(n for n in named - pack if "." in n) == [], "lines for modules that are gone"


def test_the_shared_basics_import_only_the_standard_library():
    """The proxy and the hook command load them (tests/memory_agent/test_light_entries.py checks
    the real processes); this names the line where such an import is written. Imports within
    the pack are the order's business."""
    basics = dict(LAYERS)["shared basics"]
    outside = []
    for module, path in modules_of(ROOT, ["memory_agent"]).items():
        if module not in basics:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            outside += [
                f"{module}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] not in sys.stdlib_module_names
                and name.split(".")[0] != "memory_agent"
            ]
    assert outside == []


# -- the checker fails when it should ------------------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


SYNTHETIC_LAYERS = (("top", ("app.top",)), ("low", ("app.low", "app.__init__")))


def test_the_checker_reports_an_import_against_the_order(tmp_path):
    root = _tree(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/top/__init__.py": "",
            "app/top/serve.py": "from app.low import store\n",  # down: fine
            "app/low/__init__.py": "",
            "app/low/store.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ..top.serve import Thing\n"  # relative, under TYPE_CHECKING: counted
            ),
            "app/low/other.py": "def f():\n    import app.top.serve\n",  # inside a function
        },
    )
    modules, arrows = arrows_of(root, ["app"])
    assert unplaced(modules, SYNTHETIC_LAYERS) == []
    report = against_the_order(arrows, SYNTHETIC_LAYERS)
    assert len(report) == 2, report
    assert report[0].startswith("app/low/other.py:2: app.low.other (low) imports app.top.serve")
    assert report[1].startswith("app/low/store.py:3: app.low.store (low) imports app.top.serve")
    assert "the order is top -> low" in report[0]


def test_the_checker_reports_a_cycle_with_its_path(tmp_path):
    root = _tree(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/low/__init__.py": "",
            "app/low/a.py": "from app.low import b\n",
            "app/low/b.py": "from . import c\n",
            "app/low/c.py": "def f():\n    from app.low.a import x\n",
            "app/low/d.py": "import importlib\nimportlib.import_module('app.low.d2')\n",
            "app/low/d2.py": "from app.low import d\n",
        },
    )
    _, arrows = arrows_of(root, ["app"])
    assert against_the_order(arrows, SYNTHETIC_LAYERS) == []  # one layer: only the cycles
    assert cycles(arrows) == [
        "cycle of 2 modules: app.low.d -> app.low.d2 (app/low/d.py:2); "
        "app.low.d2 -> app.low.d (app/low/d2.py:1)",
        "cycle of 3 modules: app.low.a -> app.low.b (app/low/a.py:1); "
        "app.low.b -> app.low.c (app/low/b.py:1); app.low.c -> app.low.a (app/low/c.py:2)",
    ]


def test_the_checker_reports_two_packages_that_import_each_other_without_a_module_cycle(
    tmp_path,
):
    """kb/ and index/ once did this: no module reached itself again, yet each package used the
    other (`kb.gateway` -> `index.memory` -> `kb.files`)."""
    root = _tree(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/kb/__init__.py": "",
            "app/kb/gateway.py": "from app.index.memory import Memory\n",
            "app/kb/files.py": "",
            "app/index/__init__.py": "",
            "app/index/memory.py": "def f():\n    from app.kb import files\n",
        },
    )
    _, arrows = arrows_of(root, ["app"])
    assert cycles(arrows) == []
    assert cycles(package_arrows(arrows), "packages") == [
        "cycle of 2 packages: app.index -> app.kb (app/index/memory.py:2); "
        "app.kb -> app.index (app/kb/gateway.py:1)"
    ]


def test_a_package_init_may_reexport_its_own_submodules_but_not_close_a_circle(tmp_path):
    layers = (("top", ("app.top",)), ("low", ("app.__init__", "app.low")))
    root = _tree(
        tmp_path,
        {
            "app/__init__.py": "from app.top.serve import run\n",  # re-export from above
            "app/top/__init__.py": "",
            "app/top/serve.py": "run = 1\n",
            "app/low/__init__.py": "",
            "app/low/store.py": "x = 1\n",
            "app/new.py": "",  # in no layer
        },
    )
    modules, arrows = arrows_of(root, ["app"])
    assert against_the_order(arrows, layers) == []
    assert cycles(arrows) == []
    assert unplaced(modules, layers) == ["app.new"]
    (root / "app/top/serve.py").write_text("import app\nrun = 1\n", encoding="utf-8")
    _, arrows = arrows_of(root, ["app"])
    assert cycles(arrows) == [
        "cycle of 2 modules: app.__init__ -> app.top.serve (app/__init__.py:1); "
        "app.top.serve -> app.__init__ (app/top/serve.py:1)"
    ]


# -- where the tests are (docs/layout.md, "Where the tests are") -----------------------------
TESTS = ROOT / "tests"


def _tracked(paths: Iterable[Path]) -> list[str]:
    """The paths under tests/, leaving out what Python caches beside them."""
    return sorted(str(p.relative_to(ROOT)) for p in paths if "__pycache__" not in p.parts)


def test_no_test_file_is_named_after_an_issue():
    """A test is filed by what it tests, beside the code (`tests/memory_agent/sync/
    test_replay.py`), never by the issue it came from (`tests/issues/test_21_sync.py`): the issue
    goes in its docstring."""
    numbered = _tracked(TESTS.rglob("test_[0-9]*"))
    assert numbered == [], "name these by what they test (docs/layout.md, 'Where the tests are')"
    issues = _tracked(p for p in (TESTS / "issues").rglob("*") if p.is_file())
    assert not issues, f"file these beside the code they test, not in tests/issues/: {issues}"


def test_no_two_test_files_share_a_name():
    """pytest imports a test file by its name alone (these folders have no `__init__.py`): a
    second `test_gateway.py` anywhere under tests/ would collide with the first."""
    where: dict[str, list[str]] = {}
    for path in _tracked(TESTS.rglob("test_*.py")):
        where.setdefault(Path(path).name, []).append(path)
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
