"""QuantizeLinear as a table of thresholds, for a runtime that divides otherwise than ONNX Runtime
(OpenVINO: x * (1 / s) instead of a correctly rounded x / s, ties rounded otherwise, doubles demoted
to float): only comparisons, Gather, Where, Clip and Cast decide the code.

With a constant scale s and zero point zp, ONNX Runtime's code saturate(round_half_even(fl(x / s))
+ zp) is a non-decreasing step function of x (NaN aside, which gives qmin). For each code c,
T[c] is the smallest float32 x whose code is >= c (found by bisection over the float32 bit
patterns, with numpy's correctly rounded float32 division as the oracle); T[qmin] = -inf and one
more entry +inf closes each row. The graph takes an approximate code a = clip(round(x * (1 / s))
+ zp) (within one code of the truth: one product rounding off the division), then corrects it:
a - 1 when x < T[a], a + 1 when x >= T[a + 1], else a; clipped to [qmin, qmax]; NaN -> qmin.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rewriter.graph.constants import constant_value
from rewriter.graph.traversal import definition

__all__ = ["REDUCTIONS", "float_reduction", "nan_free", "onnx_runtime_codes", "quantized_constant", "thresholds",
           "write_threshold_table"]
_NP = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8}
_F32, _I64 = TensorProto.FLOAT, TensorProto.INT64
# scales whose thresholds and reciprocal are normal floats (a runtime flushing subnormals to zero
# compares them as ONNX Runtime does) and whose x * (1 / s) stays within one code of x / s
SCALE_RANGE = (2.0 ** -100, 2.0 ** 100)
_SUM = ("ONNX Runtime computes as an integer kernel (default) or sums in float in its own order "
        "(ORT_DISABLE_ALL), and OpenVINO in another: ")
# the float ops whose output codes the table cannot make ONNX Runtime's (measured, OpenVINO 2026.4
# and 2024.6, threshold table on: the first QuantizeLinear whose codes differ follows one of these)
REDUCTIONS = {
    "Conv": _SUM + "nudenet_320n_qdq's first Conv, 2 of 409,600 codes, output rel. L2 0.0078 / 0.0085 from ONNX "
                   "Runtime's two results",
    "ConvTranspose": _SUM + "as Conv (ppocr_v4_det_qdq)",
    "MatMul": _SUM + "magika_qdq 0.996 in 2024.6; piper_tashkeel_qdq 0.031",
    "Gemm": _SUM + "as MatMul",
}


def onnx_runtime_codes(x: np.ndarray, scale, zp, elem: int) -> np.ndarray:
    """ONNX Runtime's QuantizeLinear codes (int64) of float32 ``x`` with ``scale`` / ``zp`` broadcast
    to it: x / s in float32 (correctly rounded), clamped, rounded half to even, + zp; NaN -> qmin."""
    info = np.iinfo(_NP[elem])
    zp = np.asarray(zp, np.int64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        v = np.asarray(x, np.float32) / np.asarray(scale, np.float32)
        v = np.clip(v, (info.min - zp).astype(np.float32), (info.max - zp).astype(np.float32))
        codes = np.round(v).astype(np.float64) + zp
    return np.where(np.isnan(v), info.min, codes).astype(np.int64)


def _key_to_float(k: np.ndarray) -> np.ndarray:
    """Monotone integer keys (-0.0 -> -1, +0.0 -> 0) back to float32."""
    bits = np.where(k >= 0, k, (-k - 1) | 0x80000000).astype(np.uint32)
    return bits.view(np.float32)


def thresholds(scale: np.ndarray, zp: np.ndarray, elem: int) -> np.ndarray:
    """[channels, levels + 1] float32: row i, entry j = the smallest float32 x whose code with
    (scale[i], zp[i]) is >= qmin + j; entry 0 is -inf (every x), the last +inf (closes the row)."""
    info = np.iinfo(_NP[elem])
    scale = np.asarray(scale, np.float32).reshape(-1, 1)
    zp = np.asarray(zp, np.int64).reshape(-1, 1)
    want = np.arange(info.min + 1, info.max + 1, dtype=np.int64)[None, :]
    shape = np.broadcast_shapes(scale.shape, want.shape, zp.shape)
    lo = np.full(shape, -(0x7F800000) - 1, np.int64)  # -inf: code qmin < want
    hi = np.full(shape, 0x7F800000, np.int64)  # +inf: code qmax >= want
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // 2
        up = onnx_runtime_codes(_key_to_float(mid), scale, zp, elem) >= want
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
    rows = np.full((shape[0], info.max - info.min + 2), np.inf, np.float32)
    rows[:, 0] = -np.inf
    rows[:, 1:-1] = _key_to_float(hi)
    return rows


def write_threshold_table(w, x: str, scale: np.ndarray, zp: np.ndarray, elem: int, out: str, shape: tuple) -> None:
    """The table form of QuantizeLinear(x, scale, zp) -> ``out`` written with ``w`` (quant_explicit's
    writer); ``scale`` / ``zp`` are flat, ``shape`` their broadcast shape against x (() per tensor)."""
    info = np.iinfo(_NP[elem])
    if np.any(scale < SCALE_RANGE[0]) or np.any(scale > SCALE_RANGE[1]):
        raise ValueError(f"a scale outside [2^-100, 2^100] (the table form's range, positive): "
                         f"{scale.min()}..{scale.max()}")
    scale, zp = np.broadcast_arrays(scale.astype(np.float32), zp.astype(np.int64))
    table = thresholds(scale, zp, elem)
    row = (np.arange(scale.size, dtype=np.float32) * table.shape[1] - np.float32(info.min))
    zpf = zp.astype(np.float32)

    def shaped(v):
        return v.reshape(shape) if shape else v.reshape(())

    nan = w.op("IsNaN", [x])
    xs = w.op("Where", [nan, w.const(np.float32(0), "zero"), x])  # NaN: any index (masked at the end)
    near = w.op("Round", [w.op("Mul", [xs, w.const(shaped((np.float32(1) / scale).astype(np.float32)), "reciprocal")])])
    near = w.op("Min", [w.op("Max", [near, w.const(shaped(np.float32(info.min) - zpf), "lo")]),
                        w.const(shaped(np.float32(info.max) - zpf), "hi")])
    a = w.op("Add", [near, w.const(shaped(zpf), "zp")])  # qmin..qmax, within one code of the truth
    at = w.op("Cast", [w.op("Add", [a, w.const(shaped(row), "row")])], to=_I64)  # row * (levels + 1) + a - qmin
    flat = w.const(table.reshape(-1), "thresholds")
    below = w.op("Less", [xs, w.op("Gather", [flat, at], axis=0)])
    above = w.op("Not", [w.op("Less", [xs, w.op("Gather", [flat, w.op("Add", [at, w.const(np.int64(1), "one")])], axis=0)])])
    one = w.const(np.float32(1), "step")
    code = w.op("Where", [below, w.op("Sub", [a, one]), w.op("Where", [above, w.op("Add", [a, one]), a])])
    code = w.op("Clip", [code, w.const(np.float32(info.min), "qmin_f"), w.const(np.float32(info.max), "qmax_f")])
    q = w.op("Cast", [code], to=elem)
    w.op("Where", [nan, w.const(np.array(info.min, _NP[elem]), "qmin"), q], out)


def quantized_constant(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, elem: int, shape: tuple) -> np.ndarray:
    """ONNX Runtime's codes of a constant float32 ``x`` (a QuantizeLinear of constant weights, which
    onnxruntime.quantization writes when the weights are Constant nodes), as ``elem``'s type:
    computed here once, for every runtime alike; ``shape`` as in :func:`write_threshold_table`."""
    scale, zp = scale.reshape(shape or ()), zp.reshape(shape or ())
    return onnx_runtime_codes(x, scale, zp, elem).astype(_NP[elem])


def float_reduction(x: str, scope, upstream: bool = False) -> None:
    """Raises ValueError when ``x`` (a QuantizeLinear's input, seen from ``scope``) is a QDQ group's
    float Conv / MatMul / Gemm of DequantizeLinear outputs: the table gives ONNX Runtime's codes of
    the runtime's x, and the runtime's x differs there (:data:`REDUCTIONS`). ``upstream``: also when
    such a reduction is further up, through float ops, before any DequantizeLinear (tract 0.23)."""
    seen, todo = set(), [(x, scope)]
    while todo and len(seen) < _UPSTREAM_LIMIT:
        name, at = todo.pop()
        kind, producer, where = definition(name, at)
        if kind != "node" or name in seen or producer.domain not in ("", "ai.onnx"):
            continue
        seen.add(name)
        if producer.op_type in REDUCTIONS:
            for i in producer.input:
                k, p, _ = definition(i, where) if i else (None, None, None)
                if k == "node" and p.op_type == "DequantizeLinear":
                    via = "" if name == x else " (through the float ops after it)"
                    raise ValueError(f"x is a QDQ group's float {producer.op_type} ('{producer.name or name}'){via} "
                                     f"of DequantizeLinear outputs, which {REDUCTIONS[producer.op_type]}")
        if upstream and producer.op_type not in ("DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear"):
            todo.extend((i, where) for i in producer.input if i)


_UPSTREAM_LIMIT = 4096  # values walked back from one QuantizeLinear


_INTEGERS = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
                       TensorProto.INT32, TensorProto.UINT32, TensorProto.INT64, TensorProto.UINT64})


def nan_free(x: str, scope, types: dict, read) -> bool:
    """Whether ``x`` (seen from ``scope``) holds no NaN by construction: a Cast of an integer, or a
    Range of such Casts and finite constants (a detection head's anchor grid: Range(0, Cast(a dim),
    1)). ``types``: name -> (element type, rank) from shape inference. Then the NaN's Where of a
    QuantizeLinear form is not written (LiteRT refused it over a Range whose length onnx2tf does not
    know: SELECT's "has_low_rank_input_condition")."""
    def cast_of_integer(name: str, where) -> bool:
        kind, producer, _ = definition(name, where)
        return (kind == "node" and producer.op_type == "Cast" and producer.domain in ("", "ai.onnx")
                and types.get(producer.input[0], (None, None))[0] in _INTEGERS)

    def finite(name: str, where) -> bool:
        value = constant_value(name, where, read)
        return value is not None and value.dtype.kind == "f" and bool(np.all(np.isfinite(value)))

    kind, producer, where = definition(x, scope)
    if kind == "node" and producer.op_type == "Range" and producer.domain in ("", "ai.onnx"):
        return all(cast_of_integer(i, where) or finite(i, where) for i in producer.input)
    return cast_of_integer(x, scope)
