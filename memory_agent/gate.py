"""The ingest gate: only verified lessons reach the knowledge base ("False > Stale >
Imperfect": a missing lesson costs less than a wrong one).

What counts as evidence - a *verified outcome* inside one episode: a command failed (an error
signature), then a file was changed, then the same command succeeded. One such episode is an
observation, not a lesson. A lesson qualifies when the same failure -> fix (the same command,
the same error signature) was observed in at least `gate_min_episodes` episodes of at least
`gate_min_sessions` sessions (settings; 3 and 2).

What happens to a qualified lesson (setting `gate`):
- `auto`: it is written through the gateway like any write (dedup, validation, one commit) as
  a `pitfall` with `source: auto` and the ids of the episodes it came from; if the gateway
  says an entry already holds it, that entry is reinforced instead (a usage event);
- `propose`: it waits in the inbox (`run/../inbox/`), listed by `memory_proposals`, written
  by `memory_accept`, dropped for good by `memory_reject` (the rejection is remembered, so
  the same lesson is never proposed again);
- `off`: nothing.
A lesson is promoted (or proposed) once; the state lives in `<home>/inbox/state.json`.

An optional summarising model (an OpenAI-compatible chat endpoint, `summarizer_url`) may
rewrite the lesson's text. It never decides: the evidence above does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_agent.episodes import Episode, command_key, load_session
from memory_agent.errors import Conflict, NotFound
from memory_agent.journal import sessions
from ragcore import atomic_write

__all__ = ["Gate", "Lesson", "observations", "read_state"]

log = logging.getLogger("memory_agent.gate")
_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)*|(/[\w.@-]+)+", re.I)


def _normal(error: str) -> str:
    """An error line without what varies between runs (numbers, paths, addresses)."""
    return " ".join(_VOLATILE.sub("#", error.lower()).split())


_WHERE = re.compile(r"\s+(at|in)\s+\S*/\S+$|(\s|\()(/[\w.@-]+)+(:\d+)*\)?")


def _display(error: str) -> str:
    """An error line for a person: without the machine's paths (`/w/app/x.js:12`)."""
    return " ".join(_WHERE.sub("", error).split()) or error


@dataclass
class Observation:
    key: str
    command: str
    error: str
    files: list[str]
    episode: str
    session: str


@dataclass
class Lesson:
    key: str
    command: str
    error: str
    files: list[str] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)

    def title(self) -> str:
        error = _display(self.error)
        error = error if len(error) <= 110 else error[:109] + "…"
        return f"`{self.command}` fails with: {error}"

    def body(self) -> str:
        names = dict.fromkeys(Path(f).name for f in self.files if f)
        files = ", ".join(f"`{f}`" for f in list(names)[:5]) or "the code"
        return (
            f"**Symptom.** `{self.command}` failed with:\n\n    {_display(self.error)}\n\n"
            f"**What fixed it.** In {len(self.episodes)} episodes of {len(self.sessions)} "
            f"sessions the same command succeeded again after changing {files}.\n\n"
            "Learned from verified outcomes (a failure, a change, then the same command "
            "succeeding), not from a model's guess; the episodes hold the details."
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.key,
            "title": self.title(),
            "body": self.body(),
            "type": "pitfall",
            "episodes": self.episodes,
            "sessions": self.sessions,
            "files": self.files,
        }


def _fixes(episode: Episode) -> list[tuple[str, str, list[str]]]:
    """(command, error, files changed) for each failure in the episode that a change fixed."""
    out = []
    for i, step in enumerate(episode.steps):
        if step.ok or step.is_edit or not step.error:
            continue
        key = command_key(step.target)
        edits: list[str] = []
        for later in episode.steps[i + 1 :]:
            if later.is_edit:
                edits.append(later.target)
            elif edits and later.tool == step.tool and command_key(later.target) == key:
                if later.ok:
                    out.append((key, step.error, list(dict.fromkeys(edits))))
                break
    return out


def observations(folder: Path) -> list[Observation]:
    """Every verified failure -> fix in the journal."""
    found = []
    for name, paths in sessions(folder).items():
        for episode in load_session(paths, name):
            for command, error, files in _fixes(episode):
                key = hashlib.sha256(f"{command}|{_normal(error)}".encode()).hexdigest()[:16]
                found.append(Observation(key, command, error, files, episode.id, name))
    return found


def read_state(home: Path) -> dict[str, Any]:
    """The gate's memory of what it promoted, proposed and was told to reject."""
    try:
        state = json.loads((home / "inbox" / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    for key in ("promoted", "rejected", "proposed"):
        state.setdefault(key, {})
    return state


class Gate:
    def __init__(self, memory, gateway, events=None):
        self.memory = memory
        self.gateway = gateway
        self.events = events
        self.folder = memory.home / "inbox"
        self.state_file = self.folder / "state.json"

    # -- state ---------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return read_state(self.memory.home)

    def _save(self, state: dict[str, Any]) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self.state_file, json.dumps(state, ensure_ascii=False, indent=1), mode=0o600)

    # -- deciding ------------------------------------------------------------------------
    def lessons(self) -> list[Lesson]:
        """Every lesson the journal's evidence qualifies, best supported first."""
        cfg = self.memory.cfg
        grouped: dict[str, Lesson] = {}
        for obs in observations(self.memory.place.journal_dir):
            lesson = grouped.setdefault(obs.key, Lesson(obs.key, obs.command, obs.error))
            if obs.episode not in lesson.episodes:
                lesson.episodes.append(obs.episode)
            if obs.session not in lesson.sessions:
                lesson.sessions.append(obs.session)
            lesson.files = list(dict.fromkeys([*lesson.files, *obs.files]))
        return sorted(
            (
                lesson
                for lesson in grouped.values()
                if len(lesson.episodes) >= int(cfg.gate_min_episodes)
                and len(lesson.sessions) >= int(cfg.gate_min_sessions)
            ),
            key=lambda lesson: (-len(lesson.episodes), lesson.key),
        )

    def run(self) -> dict[str, Any]:
        """Promote or propose every newly qualified lesson (each once)."""
        mode = str(self.memory.cfg.gate)
        state = self._state()
        report: dict[str, Any] = {"mode": mode, "promoted": [], "proposed": [], "reinforced": []}
        if mode == "off":
            return report
        for lesson in self.lessons():
            if lesson.key in state["rejected"]:
                continue
            if lesson.key in state["promoted"]:
                self._reinforce(state, lesson)
                continue
            if mode == "propose":
                if lesson.key not in state["proposed"]:
                    state["proposed"][lesson.key] = {**lesson.as_json(), "at": self.memory.clock()}
                    report["proposed"].append(lesson.key)
                else:  # more evidence since: keep the proposal current
                    state["proposed"][lesson.key].update(lesson.as_json())
                continue
            reply = self._write(lesson)
            state["promoted"][lesson.key] = {"entry": reply["id"], "episodes": lesson.episodes}
            report["reinforced" if reply["status"] == "duplicate" else "promoted"].append(
                reply["id"]
            )
        self._save(state)
        return report

    def _reinforce(self, state: dict[str, Any], lesson: Lesson) -> None:
        """Seen again after promotion: reinforce the entry once per new episode."""
        known = state["promoted"][lesson.key]
        new = [e for e in lesson.episodes if e not in known.get("episodes", [])]
        if new and self.events is not None:
            for _ in new:
                self.events("reinforce", entry=known["entry"], lesson=lesson.key)
        known["episodes"] = lesson.episodes

    def _write(self, lesson: Lesson) -> dict[str, Any]:
        body = summarize(self.memory.cfg, lesson) or lesson.body()
        reply = self.gateway.add(
            lesson.title(),
            body,
            type="pitfall",
            tags=["auto"],
            request_id=f"gate-{lesson.key}",
            source="auto",
            episodes=lesson.episodes[:20],
        )
        if reply["status"] == "duplicate" and self.events is not None:
            self.events("reinforce", entry=reply["duplicate_of"], lesson=lesson.key)
        return reply

    # -- the inbox ------------------------------------------------------------------------
    def proposals(self) -> list[dict[str, Any]]:
        return list(self._state()["proposed"].values())

    def accept(self, key: str) -> dict[str, Any]:
        state = self._state()
        proposal = state["proposed"].get(key)
        if proposal is None:
            raise NotFound(f"no proposal {key!r}", "list them with memory_proposals")
        lesson = Lesson(key, "", "", proposal.get("files", []), proposal.get("episodes", []),
                        proposal.get("sessions", []))  # fmt: skip
        reply = self.gateway.add(
            proposal["title"],
            proposal["body"],
            type=proposal.get("type", "pitfall"),
            tags=["auto"],
            request_id=f"gate-{key}",
            source="auto",
            episodes=lesson.episodes[:20],
        )
        state["promoted"][key] = {"entry": reply["id"], "episodes": lesson.episodes}
        del state["proposed"][key]
        self._save(state)
        return reply

    def reject(self, key: str, reason: str) -> dict[str, Any]:
        state = self._state()
        if key in state["rejected"]:
            raise Conflict(f"proposal {key!r} was already rejected", "nothing to do")
        proposal = state["proposed"].pop(key, None)
        if proposal is None:
            raise NotFound(f"no proposal {key!r}", "list them with memory_proposals")
        state["rejected"][key] = {"reason": reason, "title": proposal.get("title"),
                                  "at": self.memory.clock()}  # fmt: skip
        self._save(state)
        return {"id": key, "status": "rejected", "reason": reason}


def summarize(cfg, lesson: Lesson) -> str | None:
    """The lesson's text rewritten by the configured chat model, or None (no model, or it
    failed: the heuristic text is used, and the decision was made already)."""
    url = str(cfg.summarizer_url or "").rstrip("/")
    if not url:
        return None
    prompt = (
        "Rewrite this lesson learned by a coding agent as a short, self-contained knowledge-base "
        "entry in Markdown: the symptom, the cause if the evidence shows it, the fix. Do not "
        f"invent facts.\n\nTitle: {lesson.title()}\n\n{lesson.body()}"
    )
    payload = json.dumps(
        {
            "model": cfg.summarizer_model or "default",
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
        }
    ).encode()
    request = urllib.request.Request(
        f"{url}/chat/completions", payload, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            data = json.loads(response.read())
        text = data["choices"][0]["message"]["content"].strip()
    except Exception as exc:  # noqa: BLE001 - the heuristic text is always there
        log.warning("summarizer at %s failed (%s); using the heuristic text", url, exc)
        return None
    return text or None
