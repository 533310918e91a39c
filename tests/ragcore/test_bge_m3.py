"""BGEM3Embedder on a tiny random model, through the real FlagEmbedding code path (no mocks)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ragcore
from ragcore.bge_m3 import BGEM3Embedder
from ragcore.embedding import Embedding, make_embedder
from ragcore.errors import EmbedderError
from tests.fixtures.tiny_bge_m3 import HIDDEN_SIZE, build_tiny_bge_m3

ENGLISH = "The daemon embeds every document once and caches the vectors on disk."
CHINESE = "每个文档只需要计算一次向量，然后缓存在磁盘上。"
REPO_ROOT = Path(ragcore.__file__).resolve().parents[1]

# Prints {"dense": [[...]], "sparse": [{id: weight}]} for ENGLISH and CHINESE.
EMBED_SCRIPT = """
import json, sys
from ragcore.bge_m3 import BGEM3Embedder
out = BGEM3Embedder(sys.argv[1]).embed_documents(json.loads(sys.argv[2]))
print(json.dumps({"dense": [e.dense.tolist() for e in out], "sparse": [e.sparse for e in out]}))
"""

# Prints what an incomplete directory does to a fresh process.
REJECT_SCRIPT = """
import json, sys
from ragcore.bge_m3 import BGEM3Embedder
from ragcore.errors import EmbedderError
try:
    BGEM3Embedder(sys.argv[1])
    error = None
except EmbedderError as exc:
    error = str(exc)
heavy = sorted(m for m in ("torch", "transformers", "FlagEmbedding") if m in sys.modules)
print(json.dumps({"error": error, "heavy": heavy}))
"""


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict:
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1])


def _copy_without(model_dir: Path, tmp_path: Path, *names: str) -> Path:
    copy = Path(shutil.copytree(model_dir, tmp_path / "model"))
    for name in names:
        (copy / name).unlink()
    return copy


def _assert_same(a: list[Embedding], b: list[Embedding], atol: float = 1e-6) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.dense, y.dense, rtol=0, atol=atol)
        assert x.sparse is not None and y.sparse is not None
        assert x.sparse.keys() == y.sparse.keys()
        np.testing.assert_allclose(list(x.sparse.values()), list(y.sparse.values()), atol=atol)


@pytest.fixture(scope="module")
def embedder(tiny_bge_m3_dir: Path) -> BGEM3Embedder:
    return BGEM3Embedder(tiny_bge_m3_dir)


def test_model_id_and_dim_are_known_without_loading_the_model(tiny_bge_m3_dir: Path) -> None:
    emb = BGEM3Embedder(tiny_bge_m3_dir)
    assert emb.dim == HIDDEN_SIZE
    assert emb.has_sparse is True
    assert emb.model_id.startswith(f"bge-m3:{tiny_bge_m3_dir.name}:")
    assert emb.model_id.endswith("/max512")
    assert not emb.loaded


def test_two_instances_on_the_same_directory_share_a_model_id(tiny_bge_m3_dir: Path) -> None:
    first, second = BGEM3Embedder(tiny_bge_m3_dir), BGEM3Embedder(str(tiny_bge_m3_dir))
    assert first.model_id == second.model_id
    first.load()
    assert first.model_id == second.model_id
    assert BGEM3Embedder(tiny_bge_m3_dir, max_length=256).model_id != first.model_id


@pytest.mark.parametrize("text", [ENGLISH, CHINESE], ids=["english", "chinese"])
def test_documents_get_unit_dense_vectors_and_nonempty_integer_sparse_weights(
    embedder: BGEM3Embedder, text: str
) -> None:
    (emb,) = embedder.embed_documents([text])
    assert emb.dense.dtype == np.float32
    assert emb.dense.shape == (HIDDEN_SIZE,)
    assert abs(float(np.linalg.norm(emb.dense)) - 1.0) < 1e-5
    assert isinstance(emb.sparse, dict) and emb.sparse
    assert all(type(k) is int and type(v) is float and v > 0 for k, v in emb.sparse.items())
    assert embedder.loaded


def test_documents_keep_their_order_and_do_not_depend_on_their_batch(
    embedder: BGEM3Embedder,
) -> None:
    together = embedder.embed_documents([ENGLISH, CHINESE, "fox"])
    reversed_ = embedder.embed_documents(["fox", CHINESE, ENGLISH])[::-1]
    alone = [embedder.embed_documents([t])[0] for t in (ENGLISH, CHINESE, "fox")]
    _assert_same(together, reversed_, atol=1e-5)
    _assert_same(together, alone, atol=1e-5)
    assert embedder.embed_documents([]) == []


def test_a_query_is_embedded_like_a_document_of_the_same_text(embedder: BGEM3Embedder) -> None:
    query = embedder.embed_query(CHINESE)
    _assert_same([query], embedder.embed_documents([CHINESE]), atol=1e-5)


def test_a_fresh_process_embeds_the_same_texts_identically(
    embedder: BGEM3Embedder, tiny_bge_m3_dir: Path
) -> None:
    # The pytest process and a fresh one: random head weights or unseeded state would differ.
    proc = _python(EMBED_SCRIPT, str(tiny_bge_m3_dir), json.dumps([ENGLISH, CHINESE]))
    here = embedder.embed_documents([ENGLISH, CHINESE])
    there = _result(proc)
    fresh = [
        Embedding(np.asarray(d, dtype=np.float32), {int(k): v for k, v in s.items()})
        for d, s in zip(there["dense"], there["sparse"], strict=True)
    ]
    _assert_same(here, fresh, atol=1e-6)


def test_building_the_tiny_model_twice_gives_the_same_vectors(
    embedder: BGEM3Embedder, tmp_path: Path
) -> None:
    rebuilt = BGEM3Embedder(build_tiny_bge_m3(tmp_path / "again"))
    texts = [ENGLISH, CHINESE]
    _assert_same(rebuilt.embed_documents(texts), embedder.embed_documents(texts))


@pytest.mark.parametrize(
    ("removed", "named"),
    [
        (["sparse_linear.pt"], "sparse_linear.pt"),
        (["colbert_linear.pt"], "colbert_linear.pt"),
        (["model.safetensors"], "weights"),
        (["config.json"], "config.json"),
        (["tokenizer.json", "sentencepiece.bpe.model"], "tokenizer"),
    ],
)
def test_an_incomplete_directory_is_rejected_naming_the_missing_file(
    tiny_bge_m3_dir: Path, tmp_path: Path, removed: list[str], named: str
) -> None:
    broken = _copy_without(tiny_bge_m3_dir, tmp_path, *removed)
    with pytest.raises(EmbedderError) as info:
        BGEM3Embedder(broken)
    assert named in str(info.value)
    assert str(broken.resolve()) in str(info.value)
    with pytest.raises(EmbedderError, match=named):
        make_embedder("bge-m3", model_path=str(broken))


def test_missing_head_files_are_rejected_before_torch_or_flagembedding_is_imported(
    tiny_bge_m3_dir: Path, tmp_path: Path
) -> None:
    broken = _copy_without(tiny_bge_m3_dir, tmp_path, "sparse_linear.pt", "colbert_linear.pt")
    result = _result(_python(REJECT_SCRIPT, str(broken)))
    assert "sparse_linear.pt" in result["error"] and "colbert_linear.pt" in result["error"]
    assert result["heavy"] == []


def test_a_model_name_that_cannot_be_downloaded_points_to_minilm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emb = BGEM3Embedder("nonexistent-org/nonexistent-model")  # resolved lazily
    with pytest.raises(EmbedderError) as info:
        emb.load()
    assert "nonexistent-org/nonexistent-model" in info.value.message
    assert "minilm" in info.value.fix
    with pytest.raises(EmbedderError) as lazily:
        _ = BGEM3Embedder("nonexistent-org/nonexistent-model").model_id
    assert "minilm" in lazily.value.fix


def test_a_missing_local_path_is_reported_as_a_path_not_downloaded(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="no BGE-M3 model directory"):
        BGEM3Embedder(tmp_path / "does" / "not" / "exist")


def test_make_embedder_returns_a_working_bge_m3_embedder(tiny_bge_m3_dir: Path) -> None:
    emb = make_embedder("bge-m3", model_path=str(tiny_bge_m3_dir))
    assert isinstance(emb, BGEM3Embedder)
    (doc,) = emb.embed_documents([ENGLISH])
    assert doc.dense.shape == (emb.dim,) and doc.sparse
    assert emb.embed_query("vectors on disk").sparse
