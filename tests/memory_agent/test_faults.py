"""The fault points (memory_agent.faults): the one seam through which tests stop or kill the
product. The product's own suites drive each point through real processes (a write killed
after its files, a rebuild held...); these keep the table of points true."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from memory_agent.faults import KILLS, PAUSES, Faults

ROOT = Path(__file__).resolve().parents[2]


def _reached() -> dict[str, list[str]]:
    """Every `<x>.reach("point")` in the product, by point."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "memory_agent").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "reach"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                where = f"{path.relative_to(ROOT).as_posix()}:{node.lineno}"
                found.setdefault(node.args[0].value, []).append(where)
    return found


def test_every_point_is_reached_exactly_once_in_the_product_and_nothing_else_is_called():
    reached = _reached()
    assert set(reached) == KILLS | PAUSES, reached
    assert all(len(places) == 1 for places in reached.values()), reached


def test_an_unknown_point_is_refused_so_a_typo_cannot_silently_never_fire():
    with pytest.raises(ValueError, match="no fault point 'after-writ'"):
        Faults("after-write").reach("after-writ")


def test_a_point_the_setting_does_not_name_does_nothing(tmp_path):
    Faults("pause-open", tmp_path).reach("after-write")  # (would kill this test)
    Faults("", tmp_path).reach("pause-rebuild")  # (would wait 60 s)
    assert list(tmp_path.iterdir()) == []


def test_a_pause_point_signals_it_is_reached_and_waits_for_continue(tmp_path):
    (tmp_path / "fault-continue").touch()  # already released: returns at once
    Faults("pause-rebuild", tmp_path).reach("pause-rebuild")
    assert (tmp_path / "fault-pause-rebuild").exists()


def test_a_kill_point_kills_the_process_with_no_cleanup(tmp_path):
    marker = tmp_path / "cleaned-up"
    code = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(lambda: pathlib.Path({str(marker)!r}).touch())\n"
        "from memory_agent.faults import Faults\n"
        "try:\n"
        "    Faults('after-commit').reach('after-commit')\n"
        "finally:\n"
        f"    pathlib.Path({str(marker)!r}).touch()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60)
    assert proc.returncode != 0
    assert not marker.exists()
