"""``com.microsoft`` QGemm and QLinearWhere as standard ONNX, with ONNX Runtime's integers:

- QGemm (``contrib_ops/cpu/quantization/quant_gemm.cc``): the exact int32 C + (A - zA)(B - zB)
  (MatMul on int32; transA/transB; per-column B zero points), then with y_zero_point the kernel's
  requantization (float32(acc) * (alpha * sA * sB[n] / sY), clamp, round half to even, + zero
  point), without it float32(acc) * (alpha * sA * sB[n] [/ sY]). The int32 sum is exact as ONNX
  Runtime's VNNI/AVX-512 kernels compute it (the AVX2-only u8s8 kernel's pairwise int16
  saturation is not imitated).
- QLinearWhere (``qlinear_where.cc``): X and Y requantized to Z's scale by the kernel's tables (or
  copied when their scale and zero point are Z's), then Where.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rewriter.convert.lowering.contrib_common import (
    COM, INT32, QTYPES, const_input, qtype, scale_input, zero_point_input)
from rewriter.convert.lowering.contrib_quant import gather_table, requantize_table
from rewriter.convert.lowering.contrib_quant_pool import requantize
from rewriter.convert.lowering.contrib_types import broadcast_dims, dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32
from rewriter.convert.lowering.registry import lowering

__all__ = []

U8, I8 = TensorProto.UINT8, TensorProto.INT8
EXACT = "exact: ONNX Runtime's integers (int32 accumulation, its requantization)"


def _optional(ctx, i: int) -> str | None:
    return ctx.node.input[i] if i < len(ctx.node.input) and ctx.node.input[i] else None


@output_types("QGemm")
def _qgemm_types(node, types):
    attrs = {a.name: a.i for a in node.attribute if a.type == 2}
    _, a = dims_of(types[node.input[0]])
    _, b = dims_of(types[node.input[3]])
    m = None if a is None else a[1 if attrs.get("transA") else 0]
    n = None if b is None else b[0 if attrs.get("transB") else 1]
    elem = dims_of(types[node.input[8]])[0] if len(node.input) > 8 and node.input[8] else TensorProto.FLOAT
    return [tensor_type(elem, [m, n])]


def _b_vector(ctx, i: int, what: str, dtype) -> np.ndarray:
    v = const_input(ctx, i, what)
    if v.ndim > 1 or v.dtype != dtype:
        ctx.block(f"{what} must be a scalar or a vector of {np.dtype(dtype).name} (got {v.dtype} of shape {v.shape})")
    return v.reshape(-1)


@lowering("QGemm", COM, exactness=EXACT)
def qgemm(ctx) -> None:
    ctx.known("alpha", "transA", "transB")
    elem_a = qtype(ctx, (U8, I8), zero_point=2)
    elem_b = qtype(ctx, (U8, I8), zero_point=5, i=3)
    sa, za = scale_input(ctx, 1, "a_scale"), zero_point_input(ctx, 2, elem_a, "a_zero_point")
    sb = _b_vector(ctx, 4, "b_scale", np.float32)
    zb = _b_vector(ctx, 5, "b_zero_point", QTYPES[elem_b])
    if not np.all(np.isfinite(sb)) or np.any(sb == 0):
        ctx.block("b_scale holds a non-finite or zero value")
    e = ctx.emit
    a = e.op("Sub", [e.cast(ctx.node.input[0], INT32), e.const(np.int32(za), hint="zp")])
    trans_b = bool(ctx.attr("transB", 0))
    zb_shape = ((-1, 1) if trans_b else (-1,)) if zb.size > 1 else ()  # per result column: B's rows if transposed
    b = e.op("Sub", [e.cast(ctx.node.input[3], INT32), e.const(zb.astype(np.int32).reshape(zb_shape), hint="zp")])
    if ctx.attr("transA", 0):
        a = e.op("Transpose", [a], perm=[1, 0])
    if trans_b:
        b = e.op("Transpose", [b], perm=[1, 0])
    acc = e.op("MatMul", [a, b])
    if _optional(ctx, 6):
        acc = e.op("Add", [ctx.node.input[6], acc])
    y_scale = _optional(ctx, 7)
    scales = np.float32(ctx.attr("alpha", 1.0)) * sa * sb  # (alpha * a_scale) * b_scale[n], float32
    if y_scale is not None:
        scales = scales / scale_input(ctx, 7, "y_scale")
    scales = scales.astype(np.float32)
    scaled = e.op("Mul", [e.cast(acc, F32), e.const(scales if scales.size > 1 else scales[0], hint="scale")])
    if _optional(ctx, 8) is None:
        e.identity(scaled, ctx.node.output[0])
        return
    elem_y = qtype(ctx, (U8, I8), zero_point=8, i=8)
    requantize(e, scaled, zero_point_input(ctx, 8, elem_y, "y_zero_point"), elem_y, ctx.node.output[0])


@output_types("QLinearWhere")
def _where_types(node, types):
    shapes = [dims_of(types[node.input[i]])[1] for i in (0, 1, 4)]
    return [tensor_type(dims_of(types[node.input[1]])[0], broadcast_dims(*shapes))]


@lowering("QLinearWhere", COM, exactness="exact: ONNX Runtime's tables, then Where")
def qlinear_where(ctx) -> None:
    ctx.known()
    elem = qtype(ctx, (U8, I8), zero_point=3, i=1)
    sz, zz = scale_input(ctx, 7, "z_scale"), zero_point_input(ctx, 8, elem, "z_zero_point")
    e, parts = ctx.emit, []
    for i in (1, 4):
        s, z = scale_input(ctx, i + 1, "scale"), zero_point_input(ctx, i + 2, elem, "zero point")
        if s == sz and z == zz:  # the kernel copies
            parts.append(ctx.node.input[i])
            continue
        part = e.fresh("requantized")
        gather_table(e, ctx.node.input[i], requantize_table(elem, s, z, sz, zz), part)
        parts.append(part)
    e.op("Where", [ctx.node.input[0], *parts], out=ctx.node.output[0])
