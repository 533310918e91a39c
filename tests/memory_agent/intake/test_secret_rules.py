"""The secret rules taken from a maintained source (issue 33, item 3): gitleaks' rules in one data
file shipped with the package, naming its origin, release, commit and licence; every rule linear
on adversarial input; and the common tokens the old patterns let through - PyPI, Vault, Docker
Hub, SendGrid, age, Twilio, Shopify, DigitalOcean, Databricks, Telegram - kept out of the journal
by the real hook command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib

import pytest

from memory_agent.intake import rules
from memory_agent.intake.redact import redact
from memory_agent.intake.secrets import found
from tests.memory_agent.intake.journal_hooks import hook, journal_of
from tests.memory_agent.mcp_helpers import ROOT

# fake values of the shapes issue 33 names (made for this test, well formed, never issued)
COMMON = {
    "pypi": "pypi-AgEIcHlwaS5vcmcCJDdmMzQ5YjZkLTFhNWMtNGQ3Yi04ZTFmLTJjOWE0YjZkOGUwZgACKlszLCJh",
    "twine": "twine upload -u __token__ -p "
    "pypi-AgEIcHlwaS5vcmcCJGE4YjBlZTcxLTk0ZDMtNGVhZS1iZmQ3LTE5ZjU2YzgwYjJmMwACKlszLCJi dist/*",
    "vault": "vault token: hvs.CAESIJ8kq2Lm9Np4Rs6Tv8Wy0Zb3Cd5Ef1Gh7Jk2MxYzQwRnpHpRGh4KHGh2cy5"
    "BYkNkRWZHaElqS2xNbk9wUXJTdFV2V3h5ego ok",
    "docker hub": "docker login -u ci --password-stdin <<< dckr_pat_2vQ7xK9mL4pN8rT1wY6zB3cF5hJ",
    "sendgrid": "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",
    "age": "AGE-SECRET-KEY-1QZ8RY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MU",
    "twilio": "twilio api key SK3f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d",
    "shopify": "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",
    "digitalocean": "dop_v1_3f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39f8e7d6c5b4a3f2e1d0c9b8a7",
    "databricks": "dapi3f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d",
    "telegram": "TELEGRAM_BOT_TOKEN=7351946820:AAH4kq2Lm9Np4Rs6Tv8Wy0Zb3Cd5Ef1Gh7J",
}
SECRET_PART = re.compile(
    r"pypi-\S+|hvs\.\S+|dckr_pat_\S+|SG\.\S+|AGE-SECRET-KEY-1\S+|SK[0-9a-f]{32}|shpat_\S+|"
    r"dop_v1_\S+|dapi\S+|\d{10}:AA\S+"
)


def data() -> dict:
    return json.loads(rules.DATA.read_text(encoding="utf-8"))


def test_the_rules_come_from_gitleaks_named_with_release_commit_and_licence():
    d = data()
    assert d["source"].startswith("https://github.com/gitleaks/gitleaks/blob/v")
    assert d["version"] in d["source"] and re.fullmatch(r"[0-9a-f]{40}", d["commit"])
    assert d["licence"] == "MIT" and "Copyright (c) 2019 Zachary Rice" in d["licence_text"]
    assert "scripts/secret_rules.py" in d["about"]
    assert len(d["rules"]) > 150
    for rule in d["rules"]:
        re.compile(rule["regex"], re.ASCII)
        assert rule["keywords"] and all(k == k.lower() for k in rule["keywords"]), rule["id"]
    for item in d["dropped"]:  # each rule left out says why
        assert item["reason"], item
    ours = [r for r in d["rules"] if "origin" in r]
    assert [r["id"] for r in ours] == ["docker-hub-pat"]  # the one shape gitleaks lacks


def test_the_data_file_is_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = config["tool"]["setuptools"]["package-data"]["memory_agent"]
    assert "intake/secret_rules.json" in shipped


def test_every_rule_is_linear_on_adversarial_input():
    """The conversion dropped the rules slower than 1 s a megabyte on adversarial input (each
    keyword repeated, followed by `=`, by a long run; long runs of letters, digits, hex, base64);
    here every kept rule meets a looser bound on a quarter of that, in a process a timeout
    ends (a rule that backtracks quadratically never finishes 256 KB)."""
    code = textwrap.dedent(
        """
        import json, re, sys, time
        sys.path.insert(0, "scripts")
        from secret_rules import adversarial
        from memory_agent.intake.rules import rules
        slow = {}
        for rule in rules():
            pattern = re.compile(rule.regex, re.ASCII)
            spent = 0.0
            for text in adversarial({"keywords": list(rule.keywords)}, 262_144).values():
                start = time.perf_counter()
                for _ in pattern.finditer(text):
                    pass
                spent += time.perf_counter() - start
            if spent > 2.0:
                slow[rule.id] = round(spent, 3)
        print(json.dumps(slow))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {}


@pytest.mark.parametrize("name", sorted(COMMON))
def test_a_common_token_is_redacted_and_found_by_the_push_check(name):
    text = COMMON[name]
    secret = SECRET_PART.search(text).group()
    assert secret not in redact(f"note: {text}\n"), name
    assert found(f"note: {text}\n"), name


def test_the_hook_keeps_the_common_tokens_out_of_the_journal(capture_home):
    """Through `memory-agent hook` as `init` prints it: before, each of these was journaled
    verbatim (the old patterns knew none of them)."""
    for name, text in sorted(COMMON.items()):
        payload = {"session_id": "s1", "cwd": "/tmp", "prompt": f"{name}: {text}"}
        proc = hook(capture_home, "prompt", json.dumps(payload).encode())
        assert proc.returncode == 0, proc.stderr
    kept = json.dumps(journal_of(capture_home, "s1"))
    assert len(journal_of(capture_home, "s1")) == len(COMMON)
    for text in COMMON.values():
        assert SECRET_PART.search(text).group() not in kept
