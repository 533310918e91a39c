"""The write gateway: the only way anything is written to the knowledge base.

    request replay -> recover -> dedup search -> validate -> checks on disk -> intent
    -> atomic write -> git commit (exactly those files) -> index refresh
    -> reply {status, id, path, commit, generation}

Nothing is deleted or rewritten in place: `supersede` writes a new entry and marks the old one
(both in one commit); `archive` marks an entry archived with a reason (the file stays). Both
return a preview and write nothing unless `confirm=True`.

Refused before anything is written:
- a file to be changed that holds an uncommitted edit (`conflict`: commit or revert it first);
- a path that is a symbolic link, or a folder that is one (`invalid`, naming the path);
- a supersede that changes nothing (`invalid`);
- a near-duplicate, unless `force=True` (recorded in the commit message);
- a request id reused for another call (`conflict`, naming the first write);
- a KB whose git is mid-rebase/merge/cherry-pick/revert/bisect, on a detached HEAD, or on
  another branch than memory-agent's (`conflict`, naming it and the git command that ends it):
  a commit made then would be lost when the user finishes.

The checks on a request and its files are `memory_agent.write.checks`, the duplicate search
`memory_agent.write.dedup`; a write's way from request to reply (a retried request, a killed
write finished, intent, commit, refresh) is `memory_agent.write.transaction`, over the redo log
and the request replies of `memory_agent.write.intents`.

One gateway writes one KB (`place`: the personal one by default, or one added with
`memory-agent kb add`, docs/adr/0017-team-kb.md): the same rules in every KB, each with its own
redo log; the ids it replies with name their KB (`team:<id>`), the files hold the bare ids. The
dedup search looks across every KB of the home.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_agent import limits
from memory_agent.clock import iso
from memory_agent.errors import Conflict, Invalid
from memory_agent.index.memory import Memory
from memory_agent.intake.secrets import ALLOW_FILE, ALLOW_HEADER, allow_line, allowed_in
from memory_agent.kb.entries import content_key, entry_path, render_entry
from memory_agent.kb.files import fanned_out
from memory_agent.kb.gitrepo import KBRepo
from memory_agent.kb.kbs import KbPlace
from memory_agent.kb.scopes import MAP_FILE, ScopeMap, resolve, search_scopes
from memory_agent.write.checks import (
    check_committed,
    check_target,
    clean_links,
    clean_tags,
    load_writable,
    new_entry,
)
from memory_agent.write.dedup import find_duplicate
from memory_agent.write.fanout import fan_out
from memory_agent.write.forks import fork_hint, resolve_fork, successors_of
from memory_agent.write.import_plan import plan_import
from memory_agent.write.imports import clean_sections
from memory_agent.write.transaction import Transactions

__all__ = ["Gateway"]


class Gateway:
    def __init__(self, memory: Memory, place: KbPlace | None = None):
        self.memory = memory
        self.place = place if place is not None else memory.kbs.personal()
        self.kb_dir = self.place.dir
        self.writes = Transactions(memory, self.place)
        self.redo = self.writes.redo  # the redo log and the request replies, by their names
        self.requests = self.writes.requests

    @property
    def repo(self) -> KBRepo:
        return KBRepo(self.kb_dir)

    def recover(self) -> list[dict[str, Any]]:
        """Finish every write a killed process left half done (`Transactions.recover`)."""
        return self.writes.recover()

    def _seen(
        self, name: str, new_map: str | None, scope: str | None, project: str | None
    ) -> tuple[str, ...] | None:
        """The scopes, as the index holds them, a new entry in scope `name` is compared with
        across every KB: global, the project's identity (another KB's entries carry it) and
        its name in the personal KB (None: a global entry is compared with every entry)."""
        if name == "global":
            return None
        identity = ScopeMap.read(self.kb_dir).identity_of(name)
        if identity is None and new_map is not None:  # the name is given by this very write
            identity = project if scope in (None, "", "project") else scope
        seen = set(search_scopes(identity, None, self.memory.kb_dir)) if identity else {"global"}
        seen.add(name if self.place.personal else self.place.qualify(name))
        return tuple(sorted(seen))

    # -- the tools --------------------------------------------------------------------------
    def add(
        self,
        title: str,
        body: str,
        type: str = "note",
        tags: Any = None,
        request_id: str | None = None,
        force: bool = False,
        source: str | None = None,
        episodes: list[str] | None = None,
        links: Any = None,
        scope: str | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """`source` and `episodes` are set by the ingest gate (`source: auto`, the episodes a
        lesson came from); the tools do not expose them. `links`: typed links to other
        entries ({kind: [id, ...]}, kinds in `kb.LINK_KINDS`). `scope`: None or "project"
        (the session's, whose identity is `project`; global without one), "global", a
        project's name or identity (`memory_agent.kb.scopes.resolve`)."""
        with self.memory.session():
            tags = clean_tags(tags)
            name, new_map = resolve(scope, project, self.kb_dir)
            args = {"title": title, "body": body, "type": type, "tags": tags, "force": force}
            if links:
                args["links"] = links
            if name != "global":
                args["scope"] = name
            if not self.place.personal:  # one request id is one call: in one KB
                args["kb"] = self.place.name
            replay, request = self.writes.begin(request_id, "memory_add", args)
            if replay is not None:
                return replay
            extra = {k: v for k, v in (("source", source), ("episodes", episodes)) if v}
            if links:
                extra["links"] = clean_links(self.memory, links, self.place)
            if name != "global":
                extra["scope"] = name
            entry = new_entry(self.memory, title, body, type, tags, kb_dir=self.kb_dir, **extra)
            duplicate = find_duplicate(
                self.memory,
                entry.title,
                entry.body,
                set(),
                name,
                scopes=self._seen(name, new_map, scope, project),
            )
            message = f"memory: add {entry.id}"
            if duplicate is not None:
                if not (force and duplicate["match"] == "near"):
                    reply = {"status": "duplicate", "id": duplicate["duplicate_of"], **duplicate}
                    reply["next"] = (
                        f"read {duplicate['duplicate_of']} with memory_get; memory_supersede "
                        f"{duplicate['duplicate_of']} if yours is better, or pass force=true if "
                        "yours is a different thing"
                        if duplicate["match"] == "near"
                        else f"{duplicate['duplicate_of']} says exactly this already: nothing "
                        f"to add; to change it, memory_supersede {duplicate['duplicate_of']}"
                    )
                    self.writes.remember(request, reply)
                    return reply
                message += (
                    f"\n\nForced past the near-duplicate {duplicate['duplicate_of']} "
                    f"(similarity {duplicate['score']})."
                )
            path = entry_path(self.kb_dir, entry.type, entry.id, fanned_out(self.kb_dir))
            reply: dict[str, Any] = {
                "status": "created",
                "id": self.place.qualify(entry.id),
                "path": str(path),
                "scope": name,
                "kb": self.place.name,
            }
            if force and duplicate is not None:
                reply["forced_past"] = duplicate["duplicate_of"]
            files = {path: render_entry(entry)}
            if new_map is not None:  # the project's first entry: its name, in the same commit
                files[self.kb_dir / MAP_FILE] = new_map
                check_committed(self.repo, self.kb_dir / MAP_FILE)
                message += f"\n\nNew scope {name} (kb/{MAP_FILE})."
            return self.writes.apply(files, message, request, reply)

    def supersede(
        self,
        old_id: str,
        title: str,
        body: str,
        type: str | None = None,
        tags: Any = None,
        confirm: bool = False,
        request_id: str | None = None,
        force: bool = False,
        links: Any = None,
        scope: str | None = None,
        project: str | None = None,
        source: str | None = None,
        episodes: list[str] | None = None,
    ) -> dict[str, Any]:
        """`links` replaces the old entry's typed links; None keeps them. `scope`: None keeps
        the old entry's (a replacement stays where the old one was seen); otherwise as in
        `add`. `source` and `episodes`: as in `add` (the gate's; not exposed by the tools)."""
        with self.memory.session():
            new_tags = clean_tags(tags) if tags is not None else None
            args = {
                "old_id": old_id,
                "title": title,
                "body": body,
                "type": type,
                "tags": new_tags,
                "force": force,
            }
            if links is not None:
                args["links"] = links
            if scope is not None:
                args["scope"] = scope
            if confirm:
                replay, request = self.writes.begin(request_id, "memory_supersede", args)
                if replay is not None:
                    return replay
            else:
                request = {}
                self.memory.refresh(force=True)
            old_path, old = load_writable(self.memory, old_id)
            if old.status == "superseded":
                later = ", ".join(self.place.qualify(x) for x in successors_of(old))
                fix = f"supersede {later} instead"
                if len(successors_of(old)) > 1:  # a fork a sync left: one command resolves it
                    fix = f"it is a fork: `memory-agent resolve {old_id} --keep ID` (or --merge)"
                raise Conflict(f"{old_id} is already superseded by {later}", fix)
            if old.status == "archived":
                raise Conflict(
                    f"{old_id} is archived ({old.extra.get('archive_reason')})",
                    "add a new entry with memory_add instead",
                )
            new_type = type or old.type
            new_tags = new_tags if new_tags is not None else list(old.tags)
            name, new_map = (
                (old.scope, None) if scope is None else resolve(scope, project, self.kb_dir)
            )
            if (
                isinstance(title, str)
                and isinstance(body, str)
                and content_key(title, body) == content_key(old.title, old.body)
                and new_type == old.type
                and sorted(new_tags) == sorted(old.tags)
                and name == old.scope
            ):
                raise Invalid(
                    f"nothing changed: the new title, body, type, tags and scope are those of "
                    f"{old_id}",
                    "change what is wrong in the title or body, or leave the entry as it is",
                )
            new_links = (
                clean_links(self.memory, links, self.place)
                if links is not None
                else old.extra.get("links")
            )
            if new_links:
                new_links = {k: [t for t in v if t != old.id] for k, v in new_links.items()}
                new_links = {k: v for k, v in new_links.items() if v} or None
            new = new_entry(
                self.memory,
                title,
                body,
                new_type,
                new_tags,
                self.writes.when("memory_supersede", args, confirm),
                kb_dir=self.kb_dir,
                supersedes=[old.id],
                **({"links": new_links} if new_links else {}),
                **({"scope": name} if name != "global" else {}),
                **{k: v for k, v in (("source", source), ("episodes", episodes)) if v},
            )
            old.status = "superseded"
            old.extra.update(superseded_by=new.id, superseded_at=new.created)
            new_path = entry_path(self.kb_dir, new.type, new.id, fanned_out(self.kb_dir))
            files = {new_path: render_entry(new), old_path: render_entry(old)}
            if new_map is not None:
                files[self.kb_dir / MAP_FILE] = new_map
                check_committed(self.repo, self.kb_dir / MAP_FILE)
            for path in files:
                check_target(self.kb_dir, path)
            check_committed(self.repo, old_path)
            # the preview runs the checks the confirm will: a preview never promises a write
            # that the confirm then refuses as a duplicate
            duplicate = find_duplicate(
                self.memory,
                new.title,
                new.body,
                {self.place.qualify(old.id)},
                name,
                scopes=self._seen(name, new_map, scope, project),
            )
            message = f"memory: supersede {old.id} with {new.id}"
            if duplicate is not None:
                if not (force and duplicate["match"] == "near"):
                    reply = {
                        "status": "duplicate",
                        "id": duplicate["duplicate_of"],
                        "old_id": self.place.qualify(old.id),
                        **duplicate,
                    }
                    hint = fork_hint(self, old, duplicate["duplicate_of"])
                    reply["next"] = hint or (
                        f"{duplicate['duplicate_of']} already says this: memory_archive "
                        f"{self.place.qualify(old.id)} if it is wrong, or memory_supersede "
                        f"{duplicate['duplicate_of']}"
                        + (", or pass force=true" if duplicate["match"] == "near" else "")
                    )
                    self.writes.remember(request, reply)
                    return reply
                message += (
                    f"\n\nForced past the near-duplicate {duplicate['duplicate_of']} "
                    f"(similarity {duplicate['score']})."
                )
            if not confirm:
                return {
                    "status": "preview",
                    "id": self.place.qualify(new.id),
                    "old_id": self.place.qualify(old.id),
                    "preview": {str(p): text for p, text in files.items()},
                    "next": "call again with confirm=true to write both files in one commit",
                    **({"forced_past": duplicate["duplicate_of"]} if duplicate else {}),
                }
            reply = {
                "status": "superseded",
                "id": self.place.qualify(new.id),
                "old_id": self.place.qualify(old.id),
                "path": str(new_path),
                "scope": name,
                "kb": self.place.name,
            }
            return self.writes.apply(files, message, request, reply)

    def archive(
        self, entry_id: str, reason: str, confirm: bool = False, request_id: str | None = None
    ) -> dict[str, Any]:
        with self.memory.session():
            if not isinstance(reason, str) or not reason.strip():
                raise Invalid("reason: missing", "say why the entry is retired")
            limits.check_text("reason", reason, limits.MAX_REASON)
            reason = " ".join(reason.split())
            limits.check_text("reason", reason, limits.MAX_REASON, one_line=True)
            if confirm:
                replay, request = self.writes.begin(
                    request_id, "memory_archive", {"id": entry_id, "reason": reason}
                )
                if replay is not None:
                    return replay
            else:
                request = {}
                self.memory.refresh(force=True)
            path, entry = load_writable(self.memory, entry_id)
            if entry.status == "archived":
                raise Conflict(
                    f"{entry_id} is already archived ({entry.extra.get('archived_at')}: "
                    f"{entry.extra.get('archive_reason')})",
                    "nothing to do",
                )
            if entry.status == "superseded":
                later = ", ".join(self.place.qualify(x) for x in successors_of(entry))
                raise Conflict(
                    f"{entry_id} is superseded by {later} and already out of search",
                    f"archive {later} if it is wrong"
                    if len(successors_of(entry)) < 2
                    else f"it is a fork: `memory-agent resolve {entry_id} --keep ID` (or --merge)",
                )
            entry.status = "archived"
            when = self.writes.when("memory_archive", {"id": entry_id, "reason": reason}, confirm)
            entry.extra.update(archived_at=iso(when), archive_reason=reason)
            text = render_entry(entry)
            check_target(self.kb_dir, path)
            check_committed(self.repo, path)
            if not confirm:
                return {
                    "status": "preview",
                    "id": self.place.qualify(entry.id),
                    "preview": {str(path): text},
                    "next": "call again with confirm=true to archive it (the file stays)",
                }
            reply = {
                "status": "archived",
                "id": self.place.qualify(entry.id),
                "path": str(path),
                "kb": self.place.name,
            }
            return self.writes.apply({path: text}, f"memory: archive {entry.id}", request, reply)

    def resolve_fork(self, entry_id: str, **request: Any) -> dict[str, Any]:
        """Bring a fork (two successors a sync left) back to one: keep one, or merge both
        into a new entry - a preview, then one commit (`memory_agent.write.forks`)."""
        with self.memory.session():
            return resolve_fork(
                self, lambda s: self._seen(s, None, None, None), entry_id, **request
            )

    def fan_out(self, confirm: bool = False) -> dict[str, Any]:
        """`memory-agent fanout`: a preview, or the KB's entries moved into 256 subfolders per
        type in one commit, then indexed (`memory_agent.write.fanout`). Call with the lock held."""
        with self.memory.session():
            if confirm:
                self.writes.begin(None, "fanout", {})  # writable, recovered, scanned
            reply = fan_out(self.kb_dir, self.repo, confirm)
            if reply.get("commit"):
                report = self.memory.refresh(force=True)  # a move keeps each entry's chunks
                reply["reindexed"] = len(report["added"]) + len(report["updated"])
                reply["generation"] = self.memory.index.generation
            return {**reply, "kb": self.place.name}

    def archive_many(self, ids: list[str], reason: str, confirm: bool = False) -> dict[str, Any]:
        """Archive several entries in ONE commit (used by gc). Preview unless `confirm`.
        Call with the home lock held (the daemon's service lock, or a session)."""
        files: dict[Path, str] = {}
        for entry_id in ids:
            path, entry = load_writable(self.memory, entry_id)
            if entry.status != "active":
                continue
            check_target(self.kb_dir, path)
            check_committed(self.repo, path)
            entry.status = "archived"
            entry.extra.update(archived_at=iso(self.memory.clock()), archive_reason=reason)
            files[path] = render_entry(entry)
        if not confirm or not files:
            return {
                "status": "preview",
                "ids": [p.stem for p in files],
                "preview": {str(p): text for p, text in files.items()},
                "next": "run again with confirm to archive them in one commit",
            }
        self.repo.check_writable()
        self.recover()
        reply = {"status": "archived", "ids": [p.stem for p in files]}
        return self.writes.apply(files, f"memory: gc archives {len(files)} idle entries", {}, reply)

    def allow_secret(self, fingerprint: str, reason: str) -> dict[str, Any]:
        """Release a finding of the secret check that is not a secret: its fingerprint and
        the reason added to the KB's allow-list (`kb/.memory-agent-allow`), in one commit
        like any write (docs/adr/0023). A person's act: the CLI offers it, no tool does.
        Call with the home lock held."""
        limits.check_text("fingerprint", fingerprint, 120, required=True, one_line=True)
        limits.check_text("reason", reason, limits.MAX_REASON, required=True)
        line = allow_line(fingerprint, reason)
        fp = line.split()[0]
        path = self.kb_dir / ALLOW_FILE
        reply: dict[str, Any] = {"fingerprint": fp, "path": str(path), "kb": self.place.name}
        with self.memory.session():
            self.repo.check_writable()
            self.recover()
            check_committed(self.repo, path)
            old = path.read_text(encoding="utf-8") if path.is_file() else ALLOW_HEADER
            if fp.rsplit(":", 1)[1] in allowed_in(old):
                return {"status": "unchanged", **reply, "commit": None}
            text = old + ("" if old.endswith("\n") else "\n") + line
            message = f"memory: allow secret finding {fp}\n\n{' '.join(reason.split())}"
            return self.writes.apply({path: text}, message, {}, {"status": "allowed", **reply})

    def import_entries(
        self,
        sections: Any,
        label: str,
        scope: str | None = None,
        project: str | None = None,
        confirm: bool = False,
    ) -> dict[str, Any]:
        """Import sections read by `memory_agent.write.imports.read_sources` (their secrets are
        redacted here, whatever the caller): each is new, supersedes the entry its origin
        wrote before, or is unchanged, a duplicate or skipped (`write.import_plan`). A preview
        unless `confirm`; then every file in ONE commit naming `label` (the source), through
        the same intent, atomic writes and refresh as every write. `scope`: as in `add` for
        new entries; a superseding entry keeps the old one's unless `scope` is given."""
        with self.memory.session():
            items = clean_sections(sections)
            limits.check_text("label", label, 500, required=True, one_line=True)
            if confirm:
                args = {
                    "label": label,
                    "scope": scope,
                    "project": project,
                    "sections": [s.as_json() for s in items],
                }
                _, request = self.writes.begin(None, "memory_import", args)
            else:
                request = {}
                self.memory.refresh(force=True)
            plan = plan_import(self.memory, self.repo, items, scope, project)
            if not confirm:
                reply = plan.reply("preview")
                reply["next"] = "run again with --confirm to write them in one commit"
                return reply
            if not plan.files:
                return {**plan.reply("unchanged"), "commit": None}
            return self.writes.apply(
                plan.files, plan.message(label), request, plan.reply("imported")
            )
