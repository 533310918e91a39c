"""`Service`: what the daemon serves — one `Memory`, one model, all calls serialised.

- One lock serialises every call into the memory (qdrant-client's local mode is not
  thread-safe, and writes must be serialised anyway).
- The model loads in the background on first use (or at start with `preload`). While it
  loads, `search` answers from the lexical channel at once and says so (`degraded`); writes wait
  for the model *before* taking the lock, so they never hold searches up.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from memory_agent import __version__
from memory_agent.gateway import Gateway
from memory_agent.memory import Memory

__all__ = ["Service"]

log = logging.getLogger("memory_agent.service")


class Service:
    def __init__(self, memory: Memory):
        self.memory = memory
        self.gateway = Gateway(memory)
        self.lock = threading.RLock()
        self.started = time.time()
        self.last_used = time.monotonic()
        self._model_thread: threading.Thread | None = None
        self._model_error: str | None = None
        self._model_ready = threading.Event()

    # -- model loading -----------------------------------------------------------------
    @property
    def model_loaded(self) -> bool:
        return self._model_ready.is_set() and self._model_error is None

    def start_model_load(self) -> None:
        with self.lock:
            if self._model_thread is not None:
                return
            self._model_thread = threading.Thread(
                target=self._load_model, name="model-load", daemon=True
            )
            self._model_thread.start()

    def _load_model(self) -> None:
        t = time.perf_counter()
        try:
            self.memory.embedder.load()
            log.info(
                "model %s loaded in %.1f s", self.memory.embedder.model_id, time.perf_counter() - t
            )
            with self.lock:
                # Finish writes a killed process left behind (this builds a new home's first
                # index too), so the state is repaired before anyone asks.
                with self.memory.session():
                    if not self.memory.index.exists():
                        self.memory.sync()
                    done = self.gateway.recover()
                if done:
                    log.info(
                        "recovered %d unfinished write(s): %s",
                        len(done),
                        ", ".join(r["id"] for r in done),
                    )
        except Exception as exc:  # reported through health, status and every call
            self._model_error = f"{type(exc).__name__}: {exc}"
            log.error("model failed to load: %s", self._model_error)
        finally:
            self._model_ready.set()

    def wait_for_model(self) -> None:
        self.start_model_load()
        self._model_ready.wait()
        if self._model_error:
            from memory_agent.errors import NotReady

            raise NotReady(
                f"the embedding model could not be loaded ({self._model_error}); "
                "fix the model setting (see `memory-agent status`) and restart the "
                "daemon with `memory-agent stop`"
            )

    def touch(self) -> None:
        self.last_used = time.monotonic()

    # -- calls ----------------------------------------------------------------------------
    def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
        self.touch()
        if not self.model_loaded:
            self.start_model_load()
            if not self._model_ready.wait(timeout=0.05):
                with self.lock:
                    reply = self.memory.search(query, use_dense=False, **kwargs)
                reply["degraded"] = (
                    "model loading: lexical channel only; files changed on "
                    "disk are indexed once the model is ready"
                )
                return reply
            self.wait_for_model()
        with self.lock:
            return self.memory.search(query, **kwargs)

    def get(self, entry_id: str) -> dict[str, Any]:
        self.touch()
        with self.lock:
            return self.memory.get(entry_id)

    def _write(self, fn, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.touch()
        self.wait_for_model()
        with self.lock:
            return fn(*args, **kwargs)

    def add(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self.gateway.add, **kwargs)

    def supersede(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self.gateway.supersede, **kwargs)

    def archive(self, **kwargs: Any) -> dict[str, Any]:
        return self._write(self.gateway.archive, **kwargs)

    def status(self) -> dict[str, Any]:
        self.touch()
        if not self.model_loaded:
            self.start_model_load()
            with self.lock:
                reply = self.memory.status(sync=False)
            reply["degraded"] = "model loading: status is of the index as last refreshed"
            return reply
        with self.lock:
            return self.memory.status()

    def rebuild(self) -> dict[str, Any]:
        return self._write(self.memory.rebuild)

    def sync(self) -> dict[str, Any]:
        return self._write(self.memory.status)

    def health(self) -> dict[str, Any]:
        import os

        return {
            "status": "ok",
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started, 1),
            "home": str(self.memory.home),
            "model_loaded": self.model_loaded,
            "model_error": self._model_error,
            "model_loading": self._model_thread is not None and not self._model_ready.is_set(),
            "embedder": self.memory.cfg.embedder,
            "generation": self.memory.index.current(),
        }
