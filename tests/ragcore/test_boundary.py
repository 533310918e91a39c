"""ragcore is the reusable core: it must not depend on the product or on web/MCP libraries."""

import ast
import subprocess
import sys
from pathlib import Path

import ragcore

# Web frameworks and servers, and the product. (qdrant-client brings the HTTP client httpx along
# for its server mode; an HTTP client is not a web library in this sense, and ragcore itself
# never imports it.)
FORBIDDEN = (
    "memory_agent",
    "legal_web",
    "mcp",
    "starlette",
    "uvicorn",
    "fastapi",
    "flask",
    "sse_starlette",
    "aiohttp",
    "django",
)
RAGCORE = Path(ragcore.__file__).parent


def test_no_ragcore_module_imports_the_product_or_web_libraries():
    offenders = []
    for path in sorted(RAGCORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] in (*FORBIDDEN, "httpx", "requests")
            ]
    assert offenders == []


def test_using_ragcore_loads_none_of_them_at_run_time(tmp_path):
    code = (
        "import sys, ragcore\n"
        "from ragcore import Document, Index, CachedEmbedder, search\n"
        "from ragcore.embedding import Embedding\n"
        "import numpy as np\n"
        "class Tiny:\n"
        "    model_id, dim, has_sparse = 'tiny', 4, False\n"
        "    def embed_documents(self, texts):\n"
        "        return [Embedding(np.array([1, len(t), 0, 1], 'float32') / np.linalg.norm([1, len(t), 0, 1])) for t in texts]\n"
        "    def embed_query(self, text):\n"
        "        return self.embed_documents([text])[0]\n"
        f"idx = Index({str(tmp_path / 'i')!r}, CachedEmbedder(Tiny(), None))\n"
        "idx.build([Document('a', 'A', 'alpha text'), Document('b', 'B', 'beta words')])\n"
        "assert search(idx, 'alpha').hits[0].doc_id == 'a'\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(bad)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_public_surface_is_declared_once():
    exported = set(ragcore.__all__)
    assert all(hasattr(ragcore, name) for name in exported)
    public = {
        n
        for n in dir(ragcore)
        if not n.startswith("_") and not isinstance(getattr(ragcore, n), type(ragcore))
    }
    assert public == exported


def test_the_contract_leaves_the_machinery_private():
    for name in ("BM25Index", "QdrantStore", "Prepared", "Chunk"):
        assert name not in ragcore.__all__ and not hasattr(ragcore, name)
