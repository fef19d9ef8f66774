"""``com.microsoft`` activations as standard ONNX (``contrib_ops/cpu/activations.*``,
``bert/bias_gelu.cc``, ``bert/fast_gelu.cc``): Gelu and BiasGelu (erf), FastGelu (tanh form, optional
bias), QuickGelu (x * sigmoid(alpha * x)), BiasAdd (x + bias + skip), BiasSplitGelu (x + bias split
in halves along the last axis: left * gelu(right)). Gelu-20 where the opset has it, else its
decomposition; half inputs in float32 as ONNX Runtime computes them. Within float32 rounding: the
kernels' erf, tanh and exp are MLAS polynomials (tolerance in docs/lowering.md)."""

from __future__ import annotations

import math

import numpy as np
from rewriter.convert.lowering.contrib_common import COM
from rewriter.convert.lowering.contrib_norm import FLOATS, as_float
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32, F64
from rewriter.convert.lowering.registry import lowering

__all__ = ["gelu"]

NEAR = "within float32 rounding of ONNX Runtime's kernel (its erf/tanh/exp approximations)"
ACT_TYPES = {**FLOATS, F64: "double"}


def gelu(e, x: str, *, tanh: bool = False, out: str | None = None, dtype=np.float32) -> str:
    """Gelu of float32 (or ``dtype``) ``x``: the erf form, or the tanh approximation."""
    if e.final_opset >= 20:
        return e.op("Gelu", [x], out=out, approximate="tanh" if tanh else "none")
    half, one = e.const(dtype(0.5), hint="half"), e.const(dtype(1.0), hint="one")
    if tanh:
        cube = e.op("Mul", [e.op("Mul", [x, x]), x])
        inner = e.op("Add", [x, e.op("Mul", [cube, e.const(dtype(0.044715), hint="c")])])
        t = e.op("Tanh", [e.op("Mul", [inner, e.const(dtype(math.sqrt(2 / math.pi)), hint="k")])])
    else:
        t = e.op("Erf", [e.op("Mul", [x, e.const(dtype(1 / math.sqrt(2)), hint="rsqrt2")])])
    return e.op("Mul", [e.op("Mul", [x, half]), e.op("Add", [t, one])], out=out)


def _unary(ctx, body, *inputs_used: int) -> None:
    """``body(e, *xs, out=, dtype=)`` on the inputs ``inputs_used``: float32 and double as they are,
    half types cast to float32 and the result back (ONNX Runtime computes them in float32)."""
    elem = ctx.input_elem(ACT_TYPES)
    e, y = ctx.emit, ctx.node.output[0]
    dtype = np.float64 if elem == F64 else np.float32
    xs = [ctx.node.input[i] if elem == F64 else as_float(e, ctx.node.input[i], elem) for i in inputs_used]
    if elem in (F32, F64):
        body(e, *xs, out=y, dtype=dtype)
    else:
        e.cast(body(e, *xs, dtype=dtype), elem, out=y)


@output_types("Gelu", "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd")
def _same_types(node, types):
    return [types[node.input[0]]]


@lowering("Gelu", COM, exactness=NEAR)
def gelu_op(ctx) -> None:
    ctx.known()
    _unary(ctx, lambda e, x, out=None, dtype=np.float32: gelu(e, x, out=out, dtype=dtype), 0)


@lowering("BiasGelu", COM, exactness=NEAR)
def bias_gelu(ctx) -> None:
    ctx.known()
    _unary(ctx, lambda e, a, b, out=None, dtype=np.float32: gelu(e, e.op("Add", [a, b]), out=out, dtype=dtype), 0, 1)


@lowering("FastGelu", COM, exactness=NEAR)
def fast_gelu(ctx) -> None:
    ctx.known()
    has_bias = len(ctx.node.input) > 1 and ctx.node.input[1]

    def body(e, x, *bias, out=None, dtype=np.float32):
        return gelu(e, e.op("Add", [x, bias[0]]) if bias else x, tanh=True, out=out, dtype=dtype)

    _unary(ctx, body, *((0, 1) if has_bias else (0,)))


@lowering("QuickGelu", COM, exactness=NEAR)
def quick_gelu(ctx) -> None:
    ctx.known("alpha")
    alpha = np.float32(ctx.attr("alpha", 1.702))

    def body(e, x, out=None, dtype=np.float32):
        scaled = e.op("Mul", [x, e.const(dtype(alpha), hint="alpha")])
        return e.op("Mul", [x, e.op("Sigmoid", [scaled])], out=out)

    _unary(ctx, body, 0)


@lowering("BiasAdd", COM, exactness="exact in float32: (x + bias) + skip; half inputs summed in float32")
def bias_add(ctx) -> None:
    ctx.known()
    _unary(ctx, lambda e, x, b, s, out=None, dtype=None: e.op("Add", [e.op("Add", [x, b]), s], out=out), 0, 1, 2)


@output_types("BiasSplitGelu")
def _split_types(node, types):
    elem, dims = dims_of(types[node.input[0]])
    if dims is None:
        return [tensor_type(elem, None)]
    last = dims[-1]
    return [tensor_type(elem, dims[:-1] + [last // 2 if isinstance(last, int) else None])]


@lowering("BiasSplitGelu", COM, exactness=NEAR)
def bias_split_gelu(ctx) -> None:
    ctx.known()

    def body(e, x, b, out=None, dtype=np.float32):
        left, right = _halves(e, e.op("Add", [x, b]))
        return e.op("Mul", [left, gelu(e, right, dtype=dtype)], out=out)

    _unary(ctx, body, 0, 1)


def _halves(e, x):
    """The two halves of the last axis (its size known only at run time)."""
    last = e.op("Gather", [e.op("Shape", [x]), e.ints([-1])], axis=0)
    half = e.op("Div", [last, e.const(np.int64(2), hint="two")])
    left = e.op("Slice", [x, e.ints([0]), half, e.ints([-1])])
    right = e.op("Slice", [x, half, last, e.ints([-1])])
    return left, right

