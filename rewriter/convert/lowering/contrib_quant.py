"""``com.microsoft`` QOperator ops (what onnxruntime.quantization's QOperator format writes) as
standard ONNX computing the integers ONNX Runtime's x86-64 kernels compute:

- QLinearAdd (``MlasQLinearAddKernelAvx2``): with rA = sA / sC and rB = sB / sC in float32 and the
  fixed part F = zC - fma(rA, zA, rB * zB), each element is fma(a, rA, fma(b, rB, F)), or with A and
  B exchanged when ONNX Runtime's broadcaster makes A the scalar of each span; then round half to
  even and saturate: computed here for the 65,536 pairs of codes, the graph reads the table (Gather).
- QLinearMul (``MlasQLinearMulKernel``, SSE2): float((a - zA)(b - zB)) * (sA * sB / sC) + zC.
- QLinearSigmoid, QLinearLeakyRelu, QLinearConcat: the kernels' 256-entry tables (built here as
  ONNX Runtime builds them) read with Gather.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rewriter.convert.lowering.contrib_common import (
    COM, INT32, QTYPES, const_input, fma32, qtype, quantize_values, saturate, scale_input, zero_point_input)
from rewriter.convert.lowering.contrib_mlas import logistic
from rewriter.convert.lowering.contrib_types import broadcast_dims, dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32, I64
from rewriter.convert.lowering.registry import lowering
from rewriter.graph.attributes import attribute_int

__all__ = ["add_table", "input0_is_span_scalar", "gather_table", "requantize_table"]

U8, I8 = TensorProto.UINT8, TensorProto.INT8
EXACT = "exact: the integers of ONNX Runtime's x86-64 (AVX2) kernel"
TABLE = "exact: ONNX Runtime's 256-entry table of the node, read with Gather"


def input0_is_span_scalar(a, b) -> bool | None:
    """ONNX Runtime's ``Broadcaster``: whether input 0 is the scalar of each span (``IsInput0Scalar``,
    which swaps the inputs of the MLAS call); None when unknown dims decide it."""
    if a is None or b is None:
        return None
    if not a:
        return True
    if not b:
        return None if not isinstance(a[-1], int) else a[-1] <= 1
    common = min(len(a), len(b))
    for k in range(1, common + 1):
        d0, d1 = a[-k], b[-k]
        last = k == common
        if isinstance(d0, int) and d0 > 1:
            return False
        if not isinstance(d0, int):
            return None
        if isinstance(d1, int) and d1 <= 1 and not last:  # both 1: ONNX Runtime skips the axis
            continue
        if isinstance(d1, int) or last:
            return True  # A is 1 where the span starts
        return None  # B's dim decides whether this axis starts the span
    return True


def _binary_params(ctx, allowed):
    elem = qtype(ctx, allowed, zero_point=2)
    sa, sb, sc = scale_input(ctx, 1, "A_scale"), scale_input(ctx, 4, "B_scale"), scale_input(ctx, 6, "C_scale")
    za, zb = zero_point_input(ctx, 2, elem, "A_zero_point"), zero_point_input(ctx, 5, elem, "B_zero_point")
    zc = zero_point_input(ctx, 7, elem, "C_zero_point")
    return elem, sa, za, sb, zb, sc, zc


@output_types("QLinearAdd", "QLinearMul")
def _binary_types(node, types):
    (ea, da), (_, db) = dims_of(types[node.input[0]]), dims_of(types[node.input[3]])
    return [tensor_type(ea, broadcast_dims(da, db))]


@lowering("QLinearAdd", COM, exactness=EXACT)
def qlinear_add(ctx) -> None:
    ctx.known()
    elem, sa, za, sb, zb, sc, zc = _binary_params(ctx, (U8, I8))
    e, a, b, y = ctx.emit, ctx.node.input[0], ctx.node.input[3], ctx.node.output[0]
    sa_, sb_ = ctx.input(0).shape, ctx.input(3).shape
    swapped = input0_is_span_scalar(sa_, sb_)
    if swapped is None and (sa_ is None or sb_ is None):
        ctx.block("the rank of A or B is unknown: which input ONNX Runtime's broadcaster takes as the scalar of each "
                  "span (the two orders round differently) cannot be decided, even at run time")
    ra, rb = np.float32(sa / sc), np.float32(sb / sc)
    info = np.iinfo(QTYPES[elem])
    # each output code a function of the two input codes: one Gather from ONNX Runtime's 65,536 codes
    # (a runtime that computes double in float32, OpenVINO, rounds the fused multiply-adds twice)
    index = e.op("Add", [e.op("Mul", [e.op("Sub", [e.cast(a, INT32), e.const(np.int32(info.min), hint="qmin")]),
                                      e.const(np.int32(256), hint="row")]),
                         e.op("Sub", [e.cast(b, INT32), e.const(np.int32(info.min), hint="qmin")])])
    index = e.cast(index, I64)
    orders = (False,) if swapped is False else (True,) if swapped else (False, True)
    tables = {order: add_table(elem, (ra, za), (rb, zb), zc, order) for order in orders}
    if len(tables) == 2 and np.array_equal(tables[True], tables[False]):  # both span orders round alike
        tables = {False: tables[False]}
    u = {order: e.op("Gather", [e.const(table, hint="table"), index], axis=0) for order, table in tables.items()}
    if len(u) == 2:
        u = {None: e.op("Where", [_runtime_swapped(e, a, b, len(sa_), len(sb_)), u[True], u[False]])}
    e.op("Identity", [next(iter(u.values()))], out=y)


def add_table(elem: int, a: tuple, b: tuple, zc: int, swapped: bool) -> np.ndarray:
    """QLinearAdd's code for every pair of input codes (row: A's code - qmin, column: B's), as the
    AVX2 kernel computes it: fma(x, rX, fma(w, rW, F)) with F = zC - fma(rX, zX, rW * zW), (x, rX, zX)
    the span's scalar input (B when ``swapped``), rounded half to even, saturated (|u| >= 2^31 and
    NaN: the minimum)."""
    info = np.iinfo(QTYPES[elem])
    codes = np.arange(info.min, info.max + 1, dtype=np.float32)
    av, bv = codes[:, None] * np.ones((1, 256), np.float32), codes[None, :] * np.ones((256, 1), np.float32)
    (x, (rx, zx)), (w, (rw, zw)) = ((bv, b), (av, a)) if swapped else ((av, a), (bv, b))
    fixed = np.float32(np.float32(zc) - fma32(rx, np.float32(zx), np.float32(rw * np.float32(zw))))
    u = fma32(x, rx, fma32(w, rw, fixed))
    inside = np.abs(u) < np.float32(2.0 ** 31)  # else (NaN too) x86's integer indefinite: the minimum
    return np.where(inside, np.clip(np.round(u), info.min, info.max), info.min).astype(QTYPES[elem]).reshape(-1)


def _runtime_swapped(e, a, b, rank_a: int, rank_b: int) -> str:
    """``input0_is_span_scalar`` on the run-time shapes (ranks known): the innermost common axis whose
    broadcast size is not 1, or the outermost common one; A is the span's scalar when its dim is 1."""
    one = e.const(np.int64(1), hint="one")
    if rank_b == 0:
        last = e.op("Gather", [e.op("Shape", [a]), e.const(np.int64(-1), hint="last")], axis=0)
        return e.op("LessOrEqual", [last, one])
    common = min(rank_a, rank_b)
    da = e.op("Gather", [e.op("Shape", [a]), e.ints([rank_a - 1 - k for k in range(common)])], axis=0)
    db = e.op("Gather", [e.op("Shape", [b]), e.ints([rank_b - 1 - k for k in range(common)])], axis=0)
    starts = e.op("Not", [e.op("Equal", [e.op("Max", [da, db]), one])])
    last = e.const(np.arange(common) == common - 1, hint="outermost")
    first = e.op("ArgMax", [e.cast(e.op("Or", [starts, last]), TensorProto.INT32)], axis=0, keepdims=0)
    return e.op("LessOrEqual", [e.op("Gather", [da, first], axis=0), one])


@lowering("QLinearMul", COM, exactness=EXACT)
def qlinear_mul(ctx) -> None:
    ctx.known()
    elem, sa, za, sb, zb, sc, zc = _binary_params(ctx, (U8, I8))
    e = ctx.emit
    da = e.op("Sub", [e.cast(ctx.node.input[0], INT32), e.const(np.int32(za), hint="zp")])
    db = e.op("Sub", [e.cast(ctx.node.input[3], INT32), e.const(np.int32(zb), hint="zp")])
    ratio = np.float32(np.float32(sa * sb) / sc)
    prod = e.op("Mul", [e.cast(e.op("Mul", [da, db]), F32), e.const(ratio, hint="ratio")])
    # Max with the lowest float32 is the identity here (prod is finite), but keeps OpenVINO's CPU plugin
    # from fusing this Mul and the Add of zc into one multiply-add (rounded once, not twice as ONNX
    # Runtime does): with static shapes it did, and the piper_tashkeel_qdq logits differed (docs/lowering.md)
    prod = e.op("Max", [prod, e.const(np.finfo(np.float32).min, hint="lowest")])
    u = e.op("Add", [prod, e.const(np.float32(zc), hint="zc")])
    saturate(e, u, elem, ctx.node.output[0], bound=65536.0 * float(ratio) + abs(zc) + 1)


# -- the 256-entry tables ------------------------------------------------------------------------------

def _dequantized_bytes(elem, scale, zero_point) -> np.ndarray:
    """X_scale * (x - zero_point) in float32 for x = each byte read as ``elem`` (the table's index)."""
    x = np.arange(256).astype(np.uint8).view(QTYPES[elem]).astype(np.int64)
    return (np.float32(scale) * (x - zero_point).astype(np.float32)).astype(np.float32)


def gather_table(e, x, table: np.ndarray, out: str) -> None:
    """y = table[byte of x]: a uint8 x indexes 0..255; an int8 x is -128..127, which Gather takes
    from the end (-1 -> 255), the same byte."""
    e.op("Gather", [e.const(table, hint="table"), e.cast(x, I64)], out=out, axis=0)


def _table_op(ctx, transform) -> None:
    elem = qtype(ctx, (U8, I8), zero_point=2)
    sx, zx = scale_input(ctx, 1, "X_scale"), zero_point_input(ctx, 2, elem, "X_zero_point")
    sy, zy = scale_input(ctx, 3, "Y_scale"), zero_point_input(ctx, 4, elem, "Y_zero_point")
    table = quantize_values(transform(_dequantized_bytes(elem, sx, zx)), sy, zy, elem)
    gather_table(ctx.emit, ctx.node.input[0], table, ctx.node.output[0])


def requantize_table(elem, sx, zx, sy, zy) -> np.ndarray:
    """The identity table of QLinearConcat / QLinearWhere: each byte from (sx, zx) to (sy, zy)."""
    return quantize_values(_dequantized_bytes(elem, sx, zx), sy, zy, elem)


@output_types("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax")
def _same_types(node, types):
    return [types[node.input[0]]]


@lowering("QLinearSigmoid", COM, exactness=TABLE + " (MLAS's FMA3 logistic)")
def qlinear_sigmoid(ctx) -> None:
    ctx.known()
    _table_op(ctx, logistic)


@lowering("QLinearLeakyRelu", COM, exactness=TABLE)
def qlinear_leaky_relu(ctx) -> None:
    ctx.known("alpha")
    alpha = np.float32(ctx.attr("alpha", 0.01))
    _table_op(ctx, lambda v: np.where(v >= 0, v, (alpha * v).astype(np.float32)).astype(np.float32))


@output_types("QLinearConcat")
def _concat_types(node, types):
    axis = attribute_int(node, "axis", 0)
    shapes = [dims_of(types[node.input[i]])[1] for i in range(2, len(node.input), 3)]
    elem = dims_of(types[node.input[1]])[0]
    if any(s is None for s in shapes):
        return [tensor_type(elem, None)]
    out = list(shapes[0])
    k = axis % len(out)
    sizes = [s[k] for s in shapes]
    out[k] = sum(sizes) if all(isinstance(d, int) for d in sizes) else None
    return [tensor_type(elem, out)]


@lowering("QLinearConcat", COM, exactness=TABLE + " per input whose scale or zero point differs from Y's")
def qlinear_concat(ctx) -> None:
    ctx.known("axis")
    n = len(ctx.node.input)
    if n < 5 or (n - 2) % 3:
        ctx.block("inputs must be Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples")
    axis = ctx.attr("axis")
    if axis is None:
        ctx.block("attribute axis is missing (ONNX Runtime refuses the node)")
    yz = const_input(ctx, 1, "Y_zero_point")
    elem = {np.dtype(np.uint8): U8, np.dtype(np.int8): I8}.get(yz.dtype)
    if elem is None or yz.size != 1:
        ctx.block(f"Y_zero_point must be one uint8 or int8 value (got {yz.dtype} of shape {yz.shape})")
    sy, zy, e, parts = scale_input(ctx, 0, "Y_scale"), int(yz.reshape(-1)[0]), ctx.emit, []
    for i in range(2, n, 3):
        sx, zx = scale_input(ctx, i + 1, "X_scale"), zero_point_input(ctx, i + 2, elem, "X_zero_point")
        if sx == sy and zx == zy:  # the kernel copies
            parts.append(ctx.node.input[i])
            continue
        part = e.fresh("requantized")
        gather_table(e, ctx.node.input[i], requantize_table(elem, sx, zx, sy, zy), part)
        parts.append(part)
    e.op("Concat", parts, out=ctx.node.output[0], axis=int(axis))
