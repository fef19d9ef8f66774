"""``ai.onnx.ml`` Scaler, Normalizer, Binarizer and Imputer as elementwise standard ONNX, bit for bit
what ONNX Runtime's kernels compute (``onnxruntime/core/providers/cpu/ml/{scaler,normalizer,
binarizer,imputer}.cc``): the same types, the same operations in the same order."""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering.emit import F32, F64, I64
from rewriter.convert.lowering.registry import lowering

__all__ = []

INT32 = 6
NUMERIC = {F32: "float", F64: "double", I64: "int64", INT32: "int32"}
EXACT = "exact: the kernel's operations in its order (bit-identical in every runtime)"
F32_LOWEST = np.float32(np.finfo(np.float32).min)


def _per_feature(ctx, n: int, what: str) -> None:
    """Attributes of ``n`` values apply per feature (the last of a rank-1 or rank-2 input): refuse
    ranks where ONNX Runtime's ``i % stride`` would pair them otherwise."""
    if n > 1 and ctx.input(0).rank not in (1, 2):
        rank = ctx.input(0).rank
        ctx.block(f"{what} has {n} values and the input's rank is {'unknown' if rank is None else rank}: "
                  "onnxruntime pairs them with the 2nd dimension, broadcasting with the last (rank 1 or 2 only)")


@lowering("Scaler", exactness=EXACT)
def scaler(ctx) -> None:
    """Y = float((X - offset) * scale): in float for float and integer inputs (C++ converts the
    integer to float), in double for double inputs, then rounded to float once."""
    ctx.known("scale", "offset")
    elem = ctx.input_elem(NUMERIC)
    scale, offset = ctx.floats("scale"), ctx.floats("offset")
    if not len(scale) or len(scale) != len(offset):
        ctx.block(f"scale ({len(scale)} values) and offset ({len(offset)}) must be non-empty and of one length "
                  "(onnxruntime refuses the node otherwise)")
    _per_feature(ctx, len(scale), "scale")
    e, x = ctx.emit, ctx.node.input[0]
    shape = (len(scale),) if len(scale) > 1 else ()
    work = np.float64 if elem == F64 else np.float32
    if elem not in (F32, F64):
        x = e.cast(x, F32)
    diff = e.op("Sub", [x, e.const(offset.astype(work).reshape(shape), hint="offset")])
    y = ctx.node.output[0]
    if elem == F64:
        e.cast(e.op("Mul", [diff, e.const(scale.astype(work).reshape(shape), hint="scale")]), F32, out=y)
    else:
        e.op("Mul", [diff, e.const(scale.reshape(shape), hint="scale")], out=y)


def _divisor(e, norm: str, zero: str) -> str:
    """norm, or 1 where it is 0 (the kernel copies a zero-norm row: x / 1 is x, bit for bit)."""
    return e.op("Where", [e.op("Equal", [norm, zero]), e.const(np.float32(1), hint="one"), norm])


@lowering("Normalizer", exactness=EXACT)
def normalizer(ctx) -> None:
    """Per row (the last axis): MAX divides by std::max's running maximum from float's lowest, L1 by
    the running sum of float(|x|), L2 takes sign(x) * sqrt(float(x*x) / running sum); a zero
    norm leaves the row as float(x). Sums run left to right as the kernel's loop does."""
    ctx.known("norm")
    elem = ctx.input_elem(NUMERIC)
    norm = ctx.attr("norm", "MAX")
    if norm not in ("MAX", "L1", "L2"):
        ctx.block(f"norm {norm!r} is none of MAX, L1, L2")
    info = ctx.input(0)
    if info.rank not in (1, 2):
        ctx.block(f"input rank {'unknown' if info.rank is None else info.rank}: onnxruntime normalizes rank 1 or 2")
    width = info.dim(-1)
    if width is None or width < 1:
        ctx.block("the input's last dimension is not static: the row's sum is written out term by term")
    e, x, y = ctx.emit, ctx.node.input[0], ctx.node.output[0]
    xf = x if elem == F32 else e.cast(x, F32)
    zero = e.const(np.float32(0), hint="zero")
    if norm == "MAX":
        m = e.running_max(e.columns(xf, -1, width), e.const(F32_LOWEST, hint="lowest"))
        e.op("Div", [xf, _divisor(e, m, zero)], out=y)  # x / 1 == x: the zero-norm row exactly
        return
    if norm == "L1":
        terms = e.cast(e.op("Abs", [x]), F32) if elem != F32 else e.op("Abs", [x])
        s = e.sequential_sum(e.columns(terms, -1, width))
        e.op("Div", [xf, _divisor(e, s, zero)], out=y)
        return
    sq = e.op("Mul", [x, x])
    sq = sq if elem == F32 else e.cast(sq, F32)
    s = e.sequential_sum(e.columns(sq, -1, width))
    root = e.op("Sqrt", [e.op("Div", [sq, s])])
    zero_t = e.const(np.zeros((), {F32: np.float32, F64: np.float64, I64: np.int64, INT32: np.int32}[elem]),
                     hint="zero")
    sign = e.op("Where", [e.op("Less", [x, zero_t]), e.const(np.float32(-1), hint="minus_one"),
                          e.const(np.float32(1), hint="one")])
    e.select(e.op("Equal", [s, zero]), xf, e.op("Mul", [root, sign]), out=y)  # sqrt(..) * -1, as the kernel


@lowering("Binarizer", exactness=EXACT + "; onnxruntime fails on NaN input, the lowering gives 0 there")
def binarizer(ctx) -> None:
    """Y = X > threshold ? 1 : 0 (float only: onnxruntime has no other Binarizer kernel)."""
    ctx.known("threshold")
    ctx.input_elem({F32: "float"})
    e = ctx.emit
    threshold = np.float32(ctx.attr("threshold", 1.0))
    gt = e.op("Greater", [ctx.node.input[0], e.const(threshold, hint="threshold")])
    e.op("Where", [gt, e.const(np.float32(1), hint="one"), e.const(np.float32(0), hint="zero")],
         out=ctx.node.output[0])


@lowering("Imputer", exactness=EXACT)
def imputer(ctx) -> None:
    """Values equal to the replaced value (NaN: any NaN) become the imputed value of their feature
    (or the first imputed value when their count is not the feature count)."""
    ctx.known("imputed_value_floats", "replaced_value_float", "imputed_value_int64s", "replaced_value_int64")
    elem = ctx.input_elem({F32: "float", I64: "int64"})
    floats, ints = ctx.floats("imputed_value_floats"), ctx.ints("imputed_value_int64s")
    if bool(len(floats)) == bool(len(ints)):
        ctx.block("exactly one of imputed_value_floats and imputed_value_int64s must be given "
                  "(onnxruntime refuses the node otherwise)")
    values = floats if elem == F32 else ints
    if not len(values):
        ctx.block(f"no imputed values for {'float' if elem == F32 else 'int64'} input (onnxruntime fails on every run)")
    info = ctx.input(0)
    if len(values) > 1:
        _per_feature(ctx, len(values), "imputed values")
        stride = info.dim(1) if info.rank == 2 else info.dim(0)
        if stride is None:
            ctx.block("the feature count is not static: onnxruntime uses the imputed values per feature only "
                      "when their count equals it, and the first one otherwise")
        values = values if stride == len(values) else values[:1]
    e, x = ctx.emit, ctx.node.input[0]
    fill = e.const(values if len(values) > 1 else values[0], hint="imputed")
    if elem == F32:
        replaced = np.float32(ctx.attr("replaced_value_float", 0.0))
        hit = e.op("IsNaN", [x]) if np.isnan(replaced) else e.op("Equal", [x, e.const(replaced, hint="replaced")])
    else:
        hit = e.op("Equal", [x, e.const(np.int64(ctx.attr("replaced_value_int64", 0)), hint="replaced")])
    if elem == F32:
        e.select(hit, fill, x, a_signed=bool(np.signbit(values[values == 0]).any()), out=ctx.node.output[0])
    else:
        e.op("Where", [hit, fill, x], out=ctx.node.output[0])

