"""How close an int8 query's vector stays to the float one on this machine's CPU, for three ways
of quantising MiniLM's query graph (experiments/int8-query/README.md, "On another CPU").

    .venv/bin/python experiments/int8-query/variants.py [--cache DIR] [--queries 300]
    .venv/bin/python experiments/int8-query/variants.py --tiny   # 5 queries (CI)

The cache is `--cache`, else MEMORY_AGENT_CACHE, else a temporary folder (the float graph is
then exported first).

ONNX Runtime's int8 matrix products differ by CPU (on x86 without VNNI, an unsigned-by-signed
product can saturate). For each variant - signed weights (what `ragcore.minilm_graph.quantize`
writes), signed weights with `reduce_range`, unsigned weights - the query graph is written to
a temporary folder and the benchmark's queries are embedded on it and on the float graph:
printed, the cosine of each query's two vectors (min, p1, mean) and the CPU of a query's run
(thread time, mean). Documents are not touched: they stay float in every variant.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments" / "concurrency"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from inprocess import queries  # noqa: E402

from ragcore.embedding import MiniLMEmbedder  # noqa: E402
from ragcore.onnx_minilm import OnnxMiniLM, ensure_export  # noqa: E402

VARIANTS = {
    "signed weights (the product's)": {"weight_type": "QInt8"},
    "signed weights, reduce_range": {"weight_type": "QInt8", "reduce_range": True},
    "unsigned weights": {"weight_type": "QUInt8"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="the embedding cache folder (its onnx/)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--tiny", action="store_true", help="5 queries")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env_cache = os.environ.get("MEMORY_AGENT_CACHE")
        cache = args.cache or (Path(env_cache) if env_cache else Path(tmp) / "cache")
        qs = queries()[: 5 if args.tiny else args.queries]
        weights = MiniLMEmbedder(work_dir=cache, runtime="onnx")._weights_dir()
        graph = ensure_export(weights, cache / "onnx")
        base, cpu = embed(weights, graph, None, qs)
        print(f"float graph: {cpu:.2f} ms CPU per query ({len(qs)} queries)", flush=True)
        for name, options in VARIANTS.items():
            query_graph = Path(tmp) / f"{len(options)}-{options['weight_type']}.onnx"
            quantize(graph, query_graph, **options)
            vectors, cpu = embed(weights, graph, query_graph, qs)
            cos = (vectors * base).sum(1) / np.linalg.norm(vectors, axis=1)
            cos /= np.linalg.norm(base, axis=1)
            print(
                f"{name}: cosine to float min {cos.min():.4f} / p1 "
                f"{np.percentile(cos, 1):.4f} / mean {cos.mean():.4f}; "
                f"{cpu:.2f} ms CPU per query ({len(qs)} queries)",
                flush=True,
            )


def quantize(graph: Path, target: Path, weight_type: str, reduce_range: bool = False) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(graph),
        str(target),
        per_channel=True,
        reduce_range=reduce_range,
        weight_type=getattr(QuantType, weight_type),
        op_types_to_quantize=["MatMul"],
    )


def embed(
    weights: Path, graph: Path, query_graph: Path | None, qs: list[str]
) -> tuple[np.ndarray, float]:
    """Each query's vector on `query_graph` (None: the float `graph`), with MiniLM's tokenizer
    and pooling as the product runs a query, and the mean thread CPU of a run."""
    runner = OnnxMiniLM(weights, graph, query_graph)
    for q in qs[:5]:
        runner.query(q + " (warm)")
    started = time.thread_time()
    vectors = np.array([runner.query(q) for q in qs])
    return vectors, (time.thread_time() - started) / len(qs) * 1000


if __name__ == "__main__":
    main()
