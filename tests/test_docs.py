"""Docs that cannot drift: every setting and every CLI command is in the README."""

from pathlib import Path

from memory_agent.cli import build_parser
from memory_agent.config import SETTINGS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_documented_with_its_environment_variable():
    missing = [s.name for s in SETTINGS if f"`{s.env}`" not in README]
    assert missing == []


def test_every_cli_command_appears_in_the_readme():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    missing = [name for name in sub.choices if f"memory-agent {name}" not in README]
    assert missing == []
