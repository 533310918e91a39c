"""git as a person has it configured: commits signed (`commit.gpgSign`, a throwaway gpg key in
the test session's own GNUPGHOME), signatures shown by every `git log` (`log.showSignature`),
`url.<base>.insteadOf` aliases (`gh:` for `git@github.com:`, `team:` for an ssh remote) and an
ssh command of their own (`core.sshCommand`: a wrapper that runs git's command on this machine
and leaves a mark, so `ssh://fake-host/<path>` reaches a bare repository on disk).

`PersonGit.make(folder)` writes the key and the file once a session (the memory_agent
conftest's `person_git`); a test takes it on with `use(monkeypatch)` (`GIT_CONFIG_GLOBAL`,
`GNUPGHOME`): the sync and kb tests do, through their conftest. `stop()` ends the gpg-agent
the signing started."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

NAME, EMAIL = "A Person", "person@example.org"


class PersonGit:
    def __init__(self, folder: Path, config: Path, gnupg: Path, key: str, ssh_log: Path):
        self.folder, self.config, self.gnupg, self.key = folder, config, gnupg, key
        self.ssh_log = ssh_log  # one line per run of the person's ssh command

    @classmethod
    def make(cls, folder: Path) -> PersonGit:
        if shutil.which("gpg") is None:
            raise RuntimeError("the git tests sign commits with gpg: apt-get install -y gnupg")
        folder.mkdir(parents=True, exist_ok=True)
        gnupg = folder / "gnupg"
        gnupg.mkdir(mode=0o700)
        env = {"GNUPGHOME": str(gnupg), "PATH": "/usr/bin:/bin"}
        subprocess.run(
            ["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
            + ["--quick-gen-key", f"{NAME} <{EMAIL}>", "ed25519", "sign", "never"],
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        listed = subprocess.run(
            ["gpg", "--batch", "--with-colons", "--list-secret-keys"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        key = next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))
        ssh_log = folder / "ssh-calls.log"
        ssh = folder / "my-ssh"
        ssh.write_text(
            f'#!/bin/sh\necho "$*" >> "{ssh_log}"\nfor last; do :; done\nexec sh -c "$last"\n'
        )
        ssh.chmod(0o755)
        config = folder / "gitconfig"
        config.write_text(
            f"[user]\n\tname = {NAME}\n\temail = {EMAIL}\n\tsigningkey = {key}\n"
            "[commit]\n\tgpgSign = true\n"
            "[tag]\n\tgpgSign = true\n"
            "[log]\n\tshowSignature = true\n"
            f"[core]\n\tsshCommand = {ssh}\n"
            '[url "git@github.com:"]\n\tinsteadOf = gh:\n'
            '[url "ssh://fake-host/"]\n\tinsteadOf = team:\n'
            "[init]\n\tdefaultBranch = main\n"
        )
        return cls(folder, config, gnupg, key, ssh_log)

    def use(self, monkeypatch) -> PersonGit:
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(self.config))
        monkeypatch.setenv("GNUPGHOME", str(self.gnupg))
        return self

    def signed(self, repo: Path, rev: str = "HEAD") -> bool:
        """Whether the commit `rev` carries a signature."""
        raw = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "commit", rev],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return "\ngpgsig " in raw.split("\n\n", 1)[0]

    def stop(self) -> None:
        subprocess.run(
            ["gpgconf", "--kill", "gpg-agent"],
            env={"GNUPGHOME": str(self.gnupg), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=30,
        )
