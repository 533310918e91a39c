"""The ingest gate in the daemon (`capture.gate`): a run soon after a turn or a session ends,
once for a burst of hook events; one run, accept or reject at a time (`lock`). Its journal
parse and summarizer hold no other lock; each of its gateway writes embeds its text first
(no lock), then runs under the write lock (ADR 0011).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from memory_agent import limits
from memory_agent.capture.gate import Gate
from memory_agent.errors import describe
from memory_agent.index.memory import Memory
from memory_agent.serve.model import ModelLoader
from memory_agent.write.gateway import Gateway

__all__ = ["GATE_DELAY_S", "GateRuns"]

log = logging.getLogger("memory_agent.service")  # the daemon log's name for it, unchanged
GATE_DELAY_S = 2.0  # a run starts this long after the last of a burst of hook events

WRITES = ("add", "supersede", "archive", "archive_many")


class _LockedGateway:
    """The gateway as the gate sees it: each write embeds its text first (no lock), then runs
    under the write lock; everything else passes through."""

    def __init__(self, gateway: Gateway, write_lock: Any, pre_embed: Callable[[Any, Any], None]):
        self._gateway = gateway
        self._write_lock = write_lock
        self._pre_embed = pre_embed

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._gateway, name)
        if name not in WRITES:
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            self._pre_embed(
                kwargs.get("title", args[0] if args else None),
                kwargs.get("body", args[1] if len(args) > 1 else None),
            )
            with self._write_lock:
                return attr(*args, **kwargs)

        return locked


class GateRuns:
    """The gate over `memory`, writing through `gateway` under `write_lock`; `model` is waited
    for before a run or an accept, `pre_embed` embeds a write's text before it takes the lock,
    and `record` logs the gate's usage events."""

    def __init__(
        self,
        memory: Memory,
        gateway: Gateway,
        *,
        write_lock: Any,
        model: ModelLoader,
        pre_embed: Callable[[Any, Any], None],
        record: Callable[..., None],
    ):
        self._memory = memory
        self._write_lock = write_lock
        self._model = model
        self.lock = threading.Lock()  # one gate run (or accept, reject) at a time
        self.gate = Gate(memory, _LockedGateway(gateway, write_lock, pre_embed), events=record)
        self._timer_lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def schedule(self, run: Callable[[], dict[str, Any]]) -> None:
        """Run `run` in GATE_DELAY_S unless another event comes first (then from that one)."""
        if str(self._memory.cfg.gate) == "off":
            return
        with self._timer_lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(GATE_DELAY_S, self._in_background, args=(run,))
            self._timer.daemon = True
            self._timer.start()

    @staticmethod
    def _in_background(run: Callable[[], dict[str, Any]]) -> None:
        try:
            report = run()
            if report["promoted"] or report["proposed"]:
                log.info("gate: %s", report)
        except Exception as exc:  # noqa: BLE001 - logged; the next event tries again
            info = describe(exc)
            log.warning(
                "gate failed: %s", info.message, exc_info=exc if info.code == "internal" else None
            )

    def run(self) -> dict[str, Any]:
        self._model.wait()
        with self.lock:  # the journal parse and the summarizer run without the write lock
            return self.gate.run(write_lock=self._write_lock)

    def proposals(self) -> list[dict[str, Any]]:
        return self.gate.proposals()

    def accept(self, proposal_id: str) -> dict[str, Any]:
        self._model.wait()
        with self.lock:  # its gateway write takes the write lock
            return self.gate.accept(proposal_id)

    def reject(self, proposal_id: str, reason: str) -> dict[str, Any]:
        limits.check_text("reason", reason, limits.MAX_REASON, required=True)
        with self.lock:
            return self.gate.reject(proposal_id, " ".join(reason.split()))
