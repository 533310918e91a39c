"""The ONNX graph of a BERT encoder (all-MiniLM-L6-v2) built straight from its
`model.safetensors` with numpy and the `onnx` package: no torch, no transformers.

The graph is the transformer without pooling, exactly as `torch.onnx.export` of the
transformers `BertModel` gives it: embeddings (word + token type + absolute position, then
LayerNorm), then per layer self-attention (12 heads; padding masked with float32's minimum, as
transformers does) with a residual LayerNorm, and the feed-forward block with exact (erf) GELU
and a residual LayerNorm. Output `last_hidden_state` [batch, tokens, 384]; inputs `input_ids`,
`attention_mask`, `token_type_ids` (int64). Against the torch export, on the demo KB and
queries: cosine >= 0.9999999, largest difference 1.3e-7 (docs/adr/0010). The safetensors file is
read by hand (an 8-byte header length, a JSON header, raw little-endian arrays).

`python -m ragcore.minilm_graph MODEL_DIR TARGET` writes TARGET atomically; ragcore.onnx_minilm
runs it once in a subprocess, so the serving process never holds `onnx` or the build's copies.
`python -m ragcore.minilm_graph --int8 GRAPH TARGET` writes the query's graph: GRAPH with each
MatMul weight in int8, one scale per output channel (`quantize`; experiments/int8-query).
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np

from ragcore.atomic import atomic_write

__all__ = ["build", "quantize", "read_safetensors"]

DTYPES = {"F32": np.float32, "I64": np.int64, "F16": np.float16}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, as read-only numpy arrays over one read of it."""
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
        data = fh.read()
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=DTYPES[spec["dtype"]]).reshape(
            spec["shape"]
        )
    return out


def build(model_dir: Path, target: Path) -> None:
    """Write the ONNX graph of the BERT weights in `model_dir` to `target`, atomically."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    config = json.loads((model_dir / "config.json").read_text())
    w = read_safetensors(model_dir / "model.safetensors")
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(config["layer_norm_eps"])
    nodes, inits = [], []
    counter = [0]

    def name(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def const(array: np.ndarray, prefix: str = "c") -> str:
        n = name(prefix)
        inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def node(op: str, inputs: list[str], **attrs) -> str:
        out = name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        weight = const(np.ascontiguousarray(w[prefix + ".weight"].T), "w")
        return node("Add", [node("MatMul", [x, weight]), const(w[prefix + ".bias"], "b")])

    def layer_norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [x, const(w[prefix + ".weight"], "g"), const(w[prefix + ".bias"], "b")],
            axis=-1,
            epsilon=eps,
        )

    # embeddings
    words = node("Gather", [const(w["embeddings.word_embeddings.weight"], "we"), "input_ids"])
    types = node(
        "Gather", [const(w["embeddings.token_type_embeddings.weight"], "te"), "token_type_ids"]
    )
    length = node(
        "Gather", [node("Shape", ["input_ids"]), const(np.array(1, dtype=np.int64))], axis=0
    )
    positions = node(
        "Range", [const(np.array(0, dtype=np.int64)), length, const(np.array(1, dtype=np.int64))]
    )
    pos = node("Gather", [const(w["embeddings.position_embeddings.weight"], "pe"), positions])
    x = layer_norm(node("Add", [node("Add", [words, types]), pos]), "embeddings.LayerNorm")

    # attention bias: 0 for real tokens, a large negative number for padding, [B, 1, 1, T]
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inverted = node("Sub", [const(np.array(1.0, dtype=np.float32)), mask])
    bias = node("Mul", [inverted, const(np.array(np.finfo(np.float32).min, dtype=np.float32))])
    bias = node("Unsqueeze", [bias, const(np.array([1, 2], dtype=np.int64))])
    split = const(np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = const(np.array([0, 0, hidden], dtype=np.int64))
    scale = const(np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"

        def heads_of(t: str) -> str:
            return node("Transpose", [node("Reshape", [t, split])], perm=[0, 2, 1, 3])

        q = heads_of(linear(x, f"{p}.attention.self.query"))
        k = heads_of(linear(x, f"{p}.attention.self.key"))
        v = heads_of(linear(x, f"{p}.attention.self.value"))
        scores = node(
            "Mul", [node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])]), scale]
        )
        probs = node("Softmax", [node("Add", [scores, bias])], axis=-1)
        context = node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        context = node("Reshape", [context, merge])
        attn = layer_norm(
            node("Add", [linear(context, f"{p}.attention.output.dense"), x]),
            f"{p}.attention.output.LayerNorm",
        )
        inner = linear(attn, f"{p}.intermediate.dense")
        # exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
        erf = node("Erf", [node("Div", [inner, const(np.array(np.sqrt(2.0), dtype=np.float32))])])
        gelu = node(
            "Mul",
            [
                node("Mul", [inner, const(np.array(0.5, dtype=np.float32))]),
                node("Add", [erf, const(np.array(1.0, dtype=np.float32))]),
            ],
        )
        x = layer_norm(
            node("Add", [linear(gelu, f"{p}.output.dense"), attn]), f"{p}.output.LayerNorm"
        )

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [
        helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", hidden]
        )
    ]
    graph = helper.make_graph(nodes, "minilm", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    atomic_write(target, model.SerializeToString())


def quantize(graph: Path, target: Path) -> None:
    """`graph` with its MatMul weights in int8, one scale per output channel, and activations
    quantised per run (ONNX Runtime's dynamic quantisation): a query's vector keeps cosine
    >= 0.979 to the float one on the benchmarks' queries, its run 41-61 % less CPU in one
    process (experiments/int8-query). Written atomically; the embeddings and the LayerNorms stay float."""
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        quantize_dynamic(
            str(graph),
            str(out),
            per_channel=True,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
        )
        atomic_write(target, out.read_bytes())


if __name__ == "__main__":  # python -m ragcore.minilm_graph [--int8] SOURCE TARGET
    if sys.argv[1] == "--int8":
        quantize(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        build(Path(sys.argv[1]), Path(sys.argv[2]))
