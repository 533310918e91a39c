"""An int8 copy of the dense rows, for the exact scan below the graph's size: a shortlist by
int8 scores, which `ragcore.dense.search` rescores in float32.

The float32 scan reads the whole matrix at every search (15 MB at 10,000 entries, from memory,
not cache); the int8 copy is a quarter of it, scanned by ONNX Runtime's integer matrix product
(`MatMulInteger`: MLAS's u8 x s8 kernel, VNNI where the CPU has it). The copy has one scale per
dimension (the rows' largest magnitude there / 127) and is stored transposed, one column per
row (the layout MLAS's kernel reads fast). A query is multiplied by the scales and rounded to
int8 with its own scale; it goes in as uint8 (+128), and the rows' column sums take the offset
back out (the kernel's zero-point input costs a second pass over the rows).

The scores are a shortlist's, not answers: `ragcore.dense.search` rescores exactly the best
`shortlist(limit)`, widened to every slot whose int8 score is within MARGIN of the `limit`-th
best (near duplicates crowding a top: their order in int8 is noise), at most MOST
(experiments/int8-scan has how many it takes to keep the exact top 100). If ONNX Runtime
cannot build or run the product, the float32 scan answers (`scan_failed`).
"""

from __future__ import annotations

import logging
import threading

import numpy as np

__all__ = [
    "MARGIN",
    "MOST",
    "SCAN_FROM",
    "SCAN_UP_TO",
    "TAKE_BELOW",
    "Int8Rows",
    "available",
    "scan_failed",
    "shortlist",
]

log = logging.getLogger("ragcore.int8_scan")
SCAN_FROM = 8192  # fewer rows: float32 reads them from cache as fast
SCAN_UP_TO = 262_144  # more: the graph's size (the copy: about 100 MB at this size)
MARGIN = 0.01  # cosine; the int8 scores' largest error measured is 0.0023 (experiments/int8-scan)
MOST = 4096  # slots rescored at most (a crowd of near duplicates: ~1.5 ms of float32 rows)
TAKE_BELOW = 4096  # a filter allowing fewer slots: their float32 rows, taken, cost less
_BLOCK = 8192  # rows quantised at a time (a float32 temporary of 12 MB)

_session = None
_session_lock = threading.Lock()


def _scan_session():
    """ONNX Runtime's session for one `MatMulInteger` (None without onnxruntime)."""
    global _session
    if _session is None:
        with _session_lock:
            if _session is None:
                _session = _build_session() or False
    return _session or None


def scan_failed(exc: BaseException) -> None:
    """ONNX Runtime failed to run the product: log it once, and scan in float32 from now on."""
    global _session
    if _session is not False:
        log.warning("the int8 dense scan failed (%s); dense search scans float32 rows", exc)
    _session = False


def _build_session():
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    try:
        return _session_of(ort, TensorProto, helper)
    except Exception as exc:  # noqa: BLE001 - any failure: the float32 scan answers instead
        log.warning("the int8 dense scan is off: %s", exc)
        return None


def _session_of(ort, TensorProto, helper):  # noqa: N803 - onnx's own name
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["q", "rows"], ["y"])],
        "int8_scan",
        [
            helper.make_tensor_value_info("q", TensorProto.UINT8, [1, "dim"]),
            helper.make_tensor_value_info("rows", TensorProto.INT8, ["dim", "n"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, "n"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # read by every onnxruntime the package allows
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # a search runs on its caller's thread (as the query model)
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def available() -> bool:
    return _scan_session() is not None


def shortlist(limit: int) -> int:
    """How many slots the int8 scores pass on to be rescored for the best `limit`."""
    return 2 * limit + 100


class Int8Rows:
    """The int8 copy of float32 rows 0..n-1, given as consecutive blocks (`parts`)."""

    def __init__(self, parts: list[np.ndarray], dim: int):
        self.n = sum(int(p.shape[0]) for p in parts)
        peak = np.zeros(dim, dtype=np.float32)
        for block in _blocks(parts):  # fmax: a NaN row (a broken vector) sets no scale
            np.fmax(peak, np.nanmax(np.abs(block), axis=0, initial=0.0), out=peak)
        self.scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        inverse = (1.0 / self.scale).astype(np.float32)
        self.codes = np.empty((dim, self.n), dtype=np.int8)
        self.offsets = np.empty(self.n, dtype=np.int32)  # 128 x each row's column sum
        at = 0
        for block in _blocks(parts):
            scaled = np.nan_to_num(block * inverse, nan=0.0, posinf=127.0, neginf=-127.0)
            codes = np.clip(np.rint(scaled), -127, 127).astype(np.int8)
            self.codes[:, at : at + codes.shape[0]] = codes.T
            self.offsets[at : at + codes.shape[0]] = 128 * codes.sum(axis=1, dtype=np.int32)
            at += codes.shape[0]

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.offsets.nbytes

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """Approximate cosines of rows 0..n-1 with `vector` (float32; a shortlist's order)."""
        query = np.asarray(vector, dtype=np.float32) * self.scale
        peak = float(np.abs(query).max())
        step = peak / 127.0 if peak > 0 else 1.0
        q = (np.rint(query / step).astype(np.int16) + 128).astype(np.uint8)[None, :]
        session = _scan_session()
        if session is None:  # turned off since this copy was made (`scan_failed`)
            raise RuntimeError("the int8 dense scan is off")
        raw = session.run(None, {"q": q, "rows": self.codes})[0][0]
        return (raw - self.offsets).astype(np.float32) * np.float32(step)


def _blocks(parts: list[np.ndarray]):
    for part in parts:
        for start in range(0, part.shape[0], _BLOCK):
            yield np.asarray(part[start : start + _BLOCK], dtype=np.float32)
