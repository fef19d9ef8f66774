"""``com.microsoft`` QLinearSoftmax and QLinearGlobalAveragePool as standard ONNX, with ONNX
Runtime's integers:

- QLinearSoftmax (``contrib_ops/cpu/quantization/qlinear_softmax.cc``): a 256-entry float table
  exp((i - 255 + shift) * x_scale) with shift = max(0, log(FLT_MAX / D) - 5) / x_scale, D the
  reduced length (built here as the kernel builds it when D is static, in double arithmetic in the
  graph otherwise); each element reads the table at 255 + x - max(x); the row's sum runs left to
  right in float (CumSum); y = round(t * (floor(1 / y_scale) / sum)) + y_zero_point (the kernel as
  compiled divides first: t * floor(1 / y_scale) alone may overflow), saturated to the type's
  maximum (1.32 measured: 127 for int8, never the wrapped values of the older source).
- QLinearAveragePool (``qlinear_pool.cc``): the dequantized input (padded with zeros), each window
  summed in float in the kernel's row-major order (one Add per kernel offset; a padded zero adds
  nothing), divided by the kernel size or the valid count, then round(y / y_scale + zero point)
  (the zero point added before rounding, as the kernel does), clamped. Static spatial dims.
- QLinearGlobalAveragePool (``MlasQLinearGlobalAveragePoolNchw/Nhwc``): the exact int32 sum minus
  x_zero_point * image size, times x_scale / (y_scale * image size) in float, requantized
  (``MlasRequantizeOutput``: clamp, round half to even, + y_zero_point).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from onnx import TensorProto

from rewriter.convert.lowering.contrib_common import (
    COM, INT32, QTYPES, qtype, scale_input, zero_point_input)
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32, F64, I64
from rewriter.convert.lowering.exact_divide import divide_rounded
from rewriter.convert.lowering.registry import lowering
from rewriter.graph.attributes import attribute_int

__all__ = ["softmax_table", "requantize"]

U8, I8 = TensorProto.UINT8, TensorProto.INT8
FLT_MAX = np.float32(np.finfo(np.float32).max)
TABLES_UP_TO = 256  # reduced lengths whose tables a dynamic one reads (256 KB)
SOFTMAX = ("exact: ONNX Runtime's table, sequential float sum and rounding (a dynamic reduced length "
           "builds the table in double in the graph: exp's last double bit may differ from glibc's)")


def softmax_table(x_scale: np.float32, d: int) -> np.ndarray:
    """``QlinearBuildLookupTableUint32`` with float entries, indexed by i = 255 + x - max(x)."""
    shift = max(0.0, math.log(float(np.float32(FLT_MAX / np.float32(d)))) - 5.0) / float(x_scale)
    return np.array([math.exp((float(i) - 255 + shift) * float(x_scale)) for i in range(256)], np.float32)


def _reduced_length(ctx, axis: int, opset: int) -> int | None:
    shape = ctx.input(0).shape
    if shape is None:
        return None
    dims = shape[axis:] if opset < 13 else [shape[axis]]
    return math.prod(dims) if all(isinstance(d, int) for d in dims) else None


def _runtime_table(e, x2, axis, sx):
    """The table for the run-time length D of ``x2``'s ``axis``: read from the tables of D = 1 ..
    TABLES_UP_TO built here, else in double as the kernel computes it (a runtime computing double in
    float32, OpenVINO, gets the first exactly: nudenet_320n_qop_pc's D = 16 was 252 entries off)."""
    d = e.op("Gather", [e.op("Shape", [x2]), e.const(np.int64(axis), hint="axis")], axis=0)
    tables = np.stack([softmax_table(sx, k) for k in range(1, TABLES_UP_TO + 1)]).reshape(-1)
    last = e.const(np.int64(TABLES_UP_TO), hint="last")
    row = e.op("Sub", [e.op("Min", [d, last]), e.const(np.int64(1), hint="one")])
    start = e.op("Mul", [row, e.const(np.int64(256), hint="row")])
    at = e.op("Range", [start, e.op("Add", [start, e.const(np.int64(256), hint="row")]), e.const(np.int64(1), hint="one")])
    built = e.op("Gather", [e.const(tables, hint="tables"), at], axis=0)
    inside = e.op("LessOrEqual", [d, last])
    return e.op("Where", [inside, built, _double_table(e, d, sx)])


def _double_table(e, d, sx):
    """The table for a run-time length ``d``, in double as the kernel computes it."""
    quotient = e.op("Div", [e.const(FLT_MAX, hint="flt_max"), e.cast(d, F32)])
    log = e.op("Sub", [e.op("Log", [e.cast(quotient, F64)]), e.const(np.float64(5.0), hint="reserve")])
    positive = e.op("Max", [log, e.const(np.float64(0.0), hint="zero")])
    shift = e.op("Div", [positive, e.const(np.float64(sx), hint="scale")])
    steps = e.const(np.arange(256, dtype=np.float64) - 255, hint="steps")
    arg = e.op("Mul", [e.op("Add", [steps, shift]), e.const(np.float64(sx), hint="scale")])
    return e.cast(e.op("Exp", [arg]), F32)


@lowering("QLinearSoftmax", COM, exactness=SOFTMAX)
def qlinear_softmax(ctx) -> None:
    ctx.known("axis", "opset")
    elem = qtype(ctx, (U8, I8), zero_point=4)
    opset = ctx.attr("opset")
    if opset is None:
        ctx.block("attribute opset is missing (ONNX Runtime refuses the node)")
    sx, sy = scale_input(ctx, 1, "X_scale"), scale_input(ctx, 3, "y_scale")
    zy = zero_point_input(ctx, 4, elem, "y_zero_point")
    y_scale = np.float32(np.floor(np.float32(1.0) / sy))
    if not y_scale < 2.0 ** 31:
        ctx.block(f"floor(1 / y_scale) = {y_scale} does not fit the kernel's int32 conversion")
    axis = int(ctx.attr("axis", 1 if opset < 13 else -1))
    e, x, y = ctx.emit, ctx.node.input[0], ctx.node.output[0]
    rank = ctx.input(0).rank
    if opset < 13:  # softmax over everything from axis on: [N, D]
        if axis < 0 and rank is None:
            ctx.block("a negative axis on an input of unknown rank")
        axis = axis % rank if axis < 0 else axis
        x2, work_axis = e.op("Flatten", [x], axis=axis), 1
    else:
        x2, work_axis = x, axis
    d = _reduced_length(ctx, axis, opset)
    table = e.const(softmax_table(sx, d), hint="table") if d else _runtime_table(e, x2, work_axis, sx)
    xi = e.cast(x2, I64)
    top = e.cast(e.reduce("ReduceMax", x2, [work_axis], keepdims=1), I64)
    index = e.op("Add", [e.op("Sub", [xi, top]), e.const(np.int64(255), hint="top")])
    t = e.op("Gather", [table, index], axis=0)
    total = e.op("Slice", [e.op("CumSum", [t, e.const(np.int64(work_axis), hint="axis")]), e.ints([-1]),
                           e.ints([np.iinfo(np.int64).max]), e.ints([work_axis])])
    q = e.op("Round", [e.op("Mul", [t, e.op("Div", [e.const(y_scale, hint="y_scale"), total])])])
    v = e.op("Add", [e.cast(q, INT32), e.const(np.int32(zy), hint="zp")])
    v = e.op("Min", [v, e.const(np.int32(np.iinfo(QTYPES[elem]).max), hint="qmax")])  # never below the minimum
    if opset < 13:
        e.op("Reshape", [e.cast(v, elem), e.op("Shape", [x])], out=y)
    else:
        e.cast(v, elem, out=y)


@output_types("QLinearGlobalAveragePool")
def _gap_types(node, types):
    elem, dims = dims_of(types[node.input[0]])
    last = attribute_int(node, "channels_last", 0)
    if dims is None:
        return [tensor_type(elem, None)]
    spatial = range(1, len(dims) - 1) if last else range(2, len(dims))
    return [tensor_type(elem, [1 if i in spatial else d for i, d in enumerate(dims)])]


@lowering("QLinearGlobalAveragePool", COM, exactness="exact: integer sum, then the kernel's float requantization")
def qlinear_global_average_pool(ctx) -> None:
    ctx.known("channels_last")
    elem = qtype(ctx, (U8, I8), zero_point=2)
    sx, zx = scale_input(ctx, 1, "x_scale"), zero_point_input(ctx, 2, elem, "x_zero_point")
    sy, zy = scale_input(ctx, 3, "y_scale"), zero_point_input(ctx, 4, elem, "y_zero_point")
    rank = ctx.input(0).rank
    if rank is None or rank < 3:
        ctx.block(f"input rank {rank}: the lowering needs a known rank >= 3")
    axes = list(range(1, rank - 1)) if ctx.attr("channels_last", 0) else list(range(2, rank))
    e, x = ctx.emit, ctx.node.input[0]
    spatial = [ctx.input(0).dim(a) for a in axes]
    if all(isinstance(d, int) for d in spatial):
        size = e.const(np.int32(math.prod(spatial)), hint="image_size")
        scale = e.const(np.float32(sx / np.float32(sy * np.float32(math.prod(spatial)))), hint="scale")
    else:
        size = e.cast(e.reduce("ReduceProd", e.op("Gather", [e.op("Shape", [x]), e.ints(axes)], axis=0), [0],
                               keepdims=0), INT32)
        denominator = e.op("Mul", [e.const(sy, hint="y_scale"), e.cast(size, F32)])
        scale = e.op("Div", [e.const(sx, hint="x_scale"), denominator])
    total = e.reduce("ReduceSum", e.cast(x, INT32), axes, keepdims=1)
    acc = e.op("Sub", [total, e.op("Mul", [e.const(np.int32(zx), hint="zp"), size])])
    requantize(e, e.op("Mul", [e.cast(acc, F32), scale]), zy, elem, ctx.node.output[0])


def requantize(e, v, zp, elem, out):
    """``MlasRequantizeOutput`` after the scaling: clamp to [min - zp, max - zp], round, + zp."""
    info = np.iinfo(QTYPES[elem])
    v = e.op("Clip", [v, e.const(np.float32(info.min - zp), hint="lo"), e.const(np.float32(info.max - zp), hint="hi")])
    e.cast(e.op("Add", [e.op("Round", [v]), e.const(np.float32(zp), hint="zp")]), elem, out=out)


def _pool_geometry(ctx, spatial, rank):
    """(kernel, strides, begin pads, end pads, output sizes) as ONNX Runtime's PoolAttributes sets them."""
    kernel = [int(k) for k in ctx.attr("kernel_shape", [])]
    n = len(spatial)
    if len(kernel) != n:
        ctx.block(f"kernel_shape {kernel} for {n} spatial dims")
    strides = [int(s) for s in ctx.attr("strides", [])] or [1] * n
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID"):
        ctx.block(f"auto_pad {auto_pad} is not lowered")
    pads = [int(p) for p in ctx.attr("pads", [])] if auto_pad == "NOTSET" else []
    pads = pads or [0] * (2 * n)
    ceil = bool(ctx.attr("ceil_mode", 0))
    out = []
    for d, k, s, b, t in zip(spatial, kernel, strides, pads[:n], pads[n:]):
        extent = d + b + t - k
        out.append((-(-extent // s) if ceil else extent // s) + 1)
    return kernel, strides, pads[:n], pads[n:], out


def _window_sum(e, x, axes, kernel, strides, out):
    """Sum over each window in row-major kernel order, one Add per kernel offset (the kernel's order)."""
    total = None
    for offsets in itertools.product(*(range(k) for k in kernel)):
        ends = [o + s * (n - 1) + 1 for o, s, n in zip(offsets, strides, out)]
        part = e.op("Slice", [x, e.ints(list(offsets)), e.ints(ends), e.ints(axes), e.ints(strides)])
        total = part if total is None else e.op("Add", [total, part])
    return total


@output_types("QLinearAveragePool")
def _avgpool_types(node, types):
    elem, dims = dims_of(types[node.input[0]])
    return [tensor_type(elem, None if dims is None else [None] * len(dims))]


@lowering("QLinearAveragePool", COM, exactness="exact: the kernel's float window sums in its order, then "
          "round(y / y_scale + zero point), both divisions correctly rounded with only a faithful Div "
          "(exact_divide)")
def qlinear_average_pool(ctx) -> None:
    ctx.known("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "count_include_pad", "channels_last")
    elem = qtype(ctx, (U8, I8), zero_point=2)
    sx, zx = scale_input(ctx, 1, "x_scale"), zero_point_input(ctx, 2, elem, "x_zero_point")
    sy, zy = scale_input(ctx, 3, "y_scale"), zero_point_input(ctx, 4, elem, "y_zero_point")
    shape, rank = ctx.input(0).shape, ctx.input(0).rank
    if rank is None or rank < 3:
        ctx.block(f"input rank {rank}: a known rank >= 3 is needed")
    axes = list(range(1, rank - 1)) if ctx.attr("channels_last", 0) else list(range(2, rank))
    spatial = [shape[a] for a in axes]
    if not all(isinstance(d, int) for d in spatial):
        ctx.block(f"spatial dims {spatial} are not static: the windows are written out")
    kernel, strides, begin, end, out = _pool_geometry(ctx, spatial, rank)
    # ceil mode: windows may run past the padded input; pad far enough that every slice exists
    end = [max(t, (o - 1) * s + k - d - b) for t, o, s, k, d, b in zip(end, out, strides, kernel, spatial, begin)]
    e = ctx.emit
    pads = [0] * (2 * rank)
    for a, b, t in zip(axes, begin, end):
        pads[a], pads[rank + a] = b, t
    x = e.op("Mul", [e.const(sx, hint="x_scale"),
                     e.cast(e.op("Sub", [e.cast(ctx.node.input[0], INT32), e.const(np.int32(zx), hint="zp")]), F32)])
    if any(pads):
        x = e.op("Pad", [x, e.ints(pads)])
    total = _window_sum(e, x, axes, kernel, strides, out)
    if ctx.attr("count_include_pad", 0):
        count = e.const(np.float32(math.prod(kernel)), hint="count")
    else:  # the valid elements of each window, summed the same way from a mask
        mask_shape = [1] * rank
        for a, d in zip(axes, spatial):
            mask_shape[a] = d
        mask = e.const(np.ones(mask_shape, np.float32), hint="ones")
        count = _window_sum(e, e.op("Pad", [mask, e.ints(pads)]) if any(pads) else mask, axes, kernel, strides, out)
    y = divide_rounded(e, total, count)  # (correctly rounded also where a runtime divides by a reciprocal)
    shifted = e.op("Add", [divide_rounded(e, y, e.const(sy, hint="y_scale")), e.const(np.float32(zy), hint="zp")])
    q = e.op("Round", [shifted])  # nearbyintf(y / y_scale + zero point): the zero point added before rounding
    info = np.iinfo(QTYPES[elem])
    q = e.op("Clip", [q, e.const(np.float32(info.min), hint="qmin"), e.const(np.float32(info.max), hint="qmax")])
    e.cast(q, elem, out=ctx.node.output[0])
