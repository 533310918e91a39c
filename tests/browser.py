"""Debian's headless Chromium for the browser tests (legal_web's page, the memory browser)."""

import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on this machine: apt-get install chromium (.ci/run installs it)",
)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch(pw):
    """A headless Chromium that talks to nothing but the pages a test opens."""
    return pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
