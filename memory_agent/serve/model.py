"""The embedding model's lifecycle in the daemon: loaded once, in the background, on first use
(or at start with `preload`); its state (`not loaded`, `loading`, `ready`, `failed`) and, when
it failed, the error and its fix, which health, status and every call that needs it report.

A caller that cannot wait (a search, the recall hook, status) starts the load and goes on
without the model; a caller that needs it (a write, the gate) waits, before it takes any lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memory_agent.errors import NotReady, describe
from memory_agent.index.memory import Memory

__all__ = ["ModelLoader"]

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
        """Start loading, once; later calls return at once."""
        with self._start_lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._load, name="model-load", daemon=True)
            self._thread.start()

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
            info = describe(exc)
            self._error = info.message
            self._fix = info.fix
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
