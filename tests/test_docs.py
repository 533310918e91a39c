"""Docs that cannot drift: every setting and every CLI command is in the README."""

import re
from pathlib import Path

from memory_agent.cli.main import build_parser
from memory_agent.config import SETTINGS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_documented_with_its_environment_variable():
    missing = [s.name for s in SETTINGS if f"`{s.env}`" not in README]
    assert missing == []


def test_every_cli_command_appears_in_the_readme():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    missing = [name for name in sub.choices if f"memory-agent {name}" not in README]
    assert missing == []


# -- every figure names its command (issue 18, item 17) ------------------------------------
# A figure is a measured number: a value in ms, MB or GB, seconds with a decimal (1.5 s), or a
# retrieval metric with its value (nDCG@10 0.555, MRR 0.9792, R@5 ...), in prose or a table.
# A bound is not a figure ("over 1 MB", "at most 40 ms", "<= 8 ms", a target).
# A command is a `benchmarks/*.py`, `memory-agent eval`, `experiments/<x>/<y>.py` or a test
# file that computes the figure, or a link to / mention of an experiments/<x> folder whose
# README names such a command - or the plain words "not reproducible from this repository".
# README.md and each ADR: every section (heading to the next heading) holding a figure names a
# command; an experiments/*/README.md names one somewhere.
ROOT = Path(__file__).resolve().parents[1]
FIGURE = re.compile(
    r"(?<!over )(?<!most )(?<!<= )(?<!up to )(?<!within )"
    r"\b\d[\d,]*(?:\.\d+)?\s?(?:ms|MB|GB)\b"
    r"|\b\d+\.\d+\s?s\b"
    r"|(?:nDCG|MRR|R@\d|Recall@)[^\n|]{0,40}?\d?\.\d{2,}"
)
COMMAND = re.compile(
    r"benchmarks/\w+\.py|memory-agent eval|experiments/[\w-]+/[\w-]+\.py|tests/[\w/]+\.py"
    r"|not reproducible from this repository"
)
EXPERIMENT = re.compile(r"experiments/([\w-]+)")


def _sections(text: str) -> list[tuple[str, str]]:
    out, head, lines, fence = [], "(top)", [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,6} ", line):
            out.append((head, "\n".join(lines)))
            head, lines = line, []
        else:
            lines.append(line)
    out.append((head, "\n".join(lines)))
    return out


def _names_a_command(text: str) -> bool:
    if COMMAND.search(text):
        return True
    for name in EXPERIMENT.findall(text):
        readme = ROOT / "experiments" / name / "README.md"
        if readme.is_file() and COMMAND.search(readme.read_text(encoding="utf-8")):
            return True
    return False


def test_the_figure_rule_sees_a_figure_without_its_command(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("## Speed\nA search takes 14.2 ms.\n\n## Limits\nA line over 1 MB fails.\n")
    assert _figures_without_command_rel(page, tmp_path) == ["page.md '## Speed': ['14.2 ms']"]
    page.write_text("## Speed\nA search takes 14.2 ms (`benchmarks/daemon.py`).\n")
    assert _figures_without_command_rel(page, tmp_path) == []


def _figures_without_command_rel(path: Path, root: Path) -> list[str]:
    bad = []
    for head, body in _sections(path.read_text(encoding="utf-8")):
        figures = FIGURE.findall(body)
        if figures and not _names_a_command(body):
            bad.append(f"{path.relative_to(root)} {head!r}: {figures[:4]}")
    return bad


def test_every_figure_in_the_readme_and_the_adrs_names_its_command():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "adr").glob("*.md"))]
    bad = [b for page in pages for b in _figures_without_command_rel(page, ROOT)]
    assert bad == []


def test_every_experiment_readme_names_its_command():
    bad = [
        str(readme.relative_to(ROOT))
        for readme in sorted((ROOT / "experiments").glob("*/README.md"))
        if FIGURE.search(readme.read_text(encoding="utf-8"))
        and not COMMAND.search(readme.read_text(encoding="utf-8"))
    ]
    assert bad == []
