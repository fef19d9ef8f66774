"""``com.microsoft`` normalizations as standard ONNX (``contrib_ops/cpu/skip_layer_norm.cc``,
``bert/embed_layer_norm.cc``): SkipLayerNormalization and SkipSimplifiedLayerNormalization (the sum
input + skip + bias, then LayerNormalization-17 / RMSNormalization-23 when the opset has them,
else their decomposition), EmbedLayerNormalization (three embedding lookups summed, normalized;
the mask index is the count of ones per row). Half inputs are computed in float32 as the kernels
do. Within float32 rounding, not bit for bit: the kernels' variance is E[x^2] - mean^2 (SkipLN) or
two-pass (EmbedLN) with their own summation order (tolerance in docs/lowering.md)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from rewriter.convert.lowering.contrib_common import COM, INT32
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32
from rewriter.convert.lowering.registry import lowering

__all__ = ["normalize", "as_float", "FLOATS"]

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16
FLOATS = {F32: "float", F16: "float16", BF16: "bfloat16"}
NEAR = "within float32 rounding of ONNX Runtime's kernel (order of sums differs)"


def as_float(e, name: str, elem: int) -> str:
    return name if elem == F32 else e.cast(name, F32)


def normalize(e, x: str, gamma: str, beta: str | None, eps: float, *, simplified: bool, out: str | None = None,
              axis: int = -1, stats: tuple = (None, None)):
    """Layer (or RMS, ``simplified``) normalization of float32 ``x`` over the axes from ``axis``
    (negative) on; ``stats``: names for the mean and the inverse standard deviation (layer norm;
    the inverse RMS for RMS norm) when they are read."""
    mean_out, inv_out = stats
    if simplified and e.final_opset >= 23 and inv_out is None:
        return e.op("RMSNormalization", [x, gamma], out=out, axis=axis, epsilon=float(eps))
    if not simplified and e.final_opset >= 17:
        outs = [out or e.fresh("layernorm")] + ([mean_out or e.fresh("mean"), inv_out] if inv_out else
                                                  [mean_out] if mean_out else [])
        e.op("LayerNormalization", [x, gamma] + ([beta] if beta else []), outs=outs, n_out=len(outs), axis=axis,
             epsilon=float(eps))
        return outs[0]
    axes = list(range(axis, 0))
    d = x if simplified else e.op("Sub", [x, e.reduce("ReduceMean", x, axes, out=mean_out)])
    eps_c = e.const(np.float32(eps), hint="epsilon")
    variance = e.op("Add", [e.reduce("ReduceMean", e.op("Mul", [d, d]), axes), eps_c])
    if inv_out is not None:
        e.op("Reciprocal", [e.op("Sqrt", [variance])], out=inv_out)
    y = e.op("Mul", [e.op("Div", [d, e.op("Sqrt", [variance])]), gamma])
    return e.op("Add", [y, beta], out=out) if beta else (e.op("Identity", [y], out=out) if out else y)



@output_types("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
def _skip_types(node, types):
    x = types[node.input[0]]
    return [x, None, None, x]


def _skip_norm(ctx) -> None:
    """SkipLayerNormalization, SkipSimplifiedLayerNormalization (by the node's op type)."""
    simplified = ctx.node.op_type == "SkipSimplifiedLayerNormalization"
    ctx.known("epsilon")
    elem = ctx.input_elem(FLOATS)
    for i, what in ((1, "mean"), (2, "inv_std_var")):
        if ctx.used(i):
            ctx.block(f"output {what} is read: ONNX Runtime's CPU kernel never writes it")
    e, x = ctx.emit, ctx.node.input[0]
    names = [x, ctx.node.input[1], ctx.node.input[2]] + ([None, ctx.name(3)] if simplified else
                                                         [ctx.name(3), ctx.name(4)])
    x, skip, gamma, beta, bias = (None if n is None else as_float(e, n, elem) for n in names)
    total = e.op("Add", [x, skip])
    if bias:
        total = e.op("Add", [total, bias])
    if ctx.used(3):
        e.cast(total, elem, out=ctx.node.output[3]) if elem != F32 else e.identity(total, ctx.node.output[3])
    eps = ctx.attr("epsilon", 1e-12)
    y = ctx.node.output[0]
    if elem == F32:
        normalize(e, total, gamma, beta, eps, simplified=simplified, out=y)
    else:
        e.cast(normalize(e, total, gamma, beta, eps, simplified=simplified), elem, out=y)


@output_types("EmbedLayerNormalization")
def _embed_types(node, types):
    _, ids = dims_of(types[node.input[0]])
    elem, table = dims_of(types[node.input[2]])
    dims = None if ids is None or table is None else [ids[0], ids[1], table[1]]
    batch = None if ids is None else [ids[0]]
    return [tensor_type(elem, dims), tensor_type(INT32, batch), tensor_type(elem, dims)]


@lowering("EmbedLayerNormalization", COM, exactness=NEAR)
def embed_layer_norm(ctx) -> None:
    ctx.known("epsilon", "mask_index_type")
    elem = ctx.input_elem(FLOATS, i=2)
    e, ids = ctx.emit, ctx.node.input[0]
    words = e.op("Gather", [ctx.node.input[2], ids], axis=0)
    positions = ctx.name(8)
    if positions is None:  # position i of each row: the first S rows of the table
        length = e.op("Gather", [e.op("Shape", [ids]), e.ints([1])], axis=0)
        table = e.op("Slice", [ctx.node.input[3], e.ints([0]), length, e.ints([0])])
    else:
        table = e.op("Gather", [ctx.node.input[3], positions], axis=0)
    total = e.op("Add", [as_float(e, words, elem), as_float(e, table, elem)])
    if ctx.name(1) and ctx.name(4):
        total = e.op("Add", [total, as_float(e, e.op("Gather", [ctx.node.input[4], ctx.node.input[1]], axis=0), elem)])
    if ctx.used(2):
        e.cast(total, elem, out=ctx.node.output[2]) if elem != F32 else e.identity(total, ctx.node.output[2])
    gamma, beta = (as_float(e, ctx.node.input[i], elem) for i in (5, 6))
    y = normalize(e, total, gamma, beta, ctx.attr("epsilon", 1e-12), simplified=False,
                  out=ctx.node.output[0] if elem == F32 else None)
    if elem != F32:
        e.cast(y, elem, out=ctx.node.output[0])
    if ctx.used(1):
        _mask_index(ctx)


@output_types("LayerNormalization", "SimplifiedLayerNormalization")
def _norm_types(node, types):
    return [types[node.input[0]]]


def _plain_norm(ctx) -> None:
    """ONNX Runtime's ONNX-domain LayerNormalization-1 / SimplifiedLayerNormalization (relabeled to
    com.microsoft by :mod:`rewriter.graph.ort_onnx_domain`): normalized over the axes from ``axis`` on, in
    float32 for half inputs (``stash_type`` 1; another stash type is refused)."""
    simplified = ctx.node.op_type == "SimplifiedLayerNormalization"
    ctx.known("axis", "epsilon", "stash_type")
    elem = ctx.input_elem(FLOATS)
    if ctx.attr("stash_type", 1) != 1:
        ctx.block(f"stash_type {ctx.attr('stash_type')}: only float32 statistics (1) are lowered")
    axis, rank = int(ctx.attr("axis", -1)), ctx.input(0).rank
    if axis >= 0:
        if rank is None:
            ctx.block("a non-negative axis on an input of unknown rank")
        axis -= rank
    e = ctx.emit
    stats = (None, None)
    if simplified:
        stats = (None, ctx.node.output[1] if ctx.used(1) else None)
    elif ctx.used(1) or ctx.used(2):
        stats = (ctx.node.output[1] if ctx.used(1) else None, ctx.node.output[2] if ctx.used(2) else None)
    if elem != F32 and (stats[0] or stats[1]):
        ctx.block("the statistics outputs of a half-precision normalization are not lowered")
    x, gamma = (as_float(e, ctx.node.input[i], elem) for i in (0, 1))
    beta = None if simplified or not ctx.name(2) else as_float(e, ctx.node.input[2], elem)
    eps = ctx.attr("epsilon", 1e-5)
    if elem == F32:
        normalize(e, x, gamma, beta, eps, simplified=simplified, out=ctx.node.output[0], axis=axis, stats=stats)
    else:
        e.cast(normalize(e, x, gamma, beta, eps, simplified=simplified, axis=axis), elem, out=ctx.node.output[0])


for _op, _fn in (("SkipLayerNormalization", _skip_norm), ("SkipSimplifiedLayerNormalization", _skip_norm),
                 ("LayerNormalization", _plain_norm), ("SimplifiedLayerNormalization", _plain_norm)):
    lowering(_op, COM, exactness=NEAR)(_fn)


def _mask_index(ctx) -> None:
    """int32 count of mask == 1 per row; zeros when there is no mask (mask_index_type 0: no output)."""
    if ctx.attr("mask_index_type", 1) == 0:
        ctx.block("mask_index is read but mask_index_type is 0 (ONNX Runtime writes no mask index)")
    e, mask = ctx.emit, ctx.name(7)
    if mask is None:
        batch = e.op("Gather", [e.op("Shape", [ctx.node.input[0]]), e.ints([0])], axis=0)
        e.op("ConstantOfShape", [batch], out=ctx.node.output[1],
             value=numpy_helper.from_array(np.zeros(1, np.int32)))
        return
    ones = e.cast(e.op("Equal", [mask, e.const(np.int32(1), hint="one")]), INT32)
    e.reduce("ReduceSum", ones, [1], keepdims=0, out=ctx.node.output[1])

