"""Softmax, LogSoftmax and Hardmax across opset 13, where ``axis`` changed meaning.

Before 13 the input is coerced to 2-D ``[prod(d[:axis]), prod(d[axis:])]`` and the op works
along the second dim (default axis 1); from 13 it works along the one dim ``axis`` (default
-1). The two agree when the axis is the last dim.

- up 11 -> 13: last axis (``-1`` whatever the rank, or ``rank-1``, or only dims of 1 after it,
  as in [N, C, 1, 1] heads) -> the same node with the axis written out; otherwise
  Flatten(axis) -> op(axis=1) -> Reshape(to Shape(input)): exact.
- down 13 -> 11: last axis (or only dims of 1 after it) -> kept (a negative one normalized by the
  11 -> 1 step when going further); otherwise, rank known: Transpose the axis to the end,
  op(axis=-1), Transpose back: exact.
  Unknown rank with another axis, or bfloat16, blocks.
"""

from __future__ import annotations

from rewriter.graph.attributes import set_attribute
from rewriter.convert.adapters.feature_support import attr_value, check_types, record_type
from rewriter.convert.registry import register

__all__: list[str] = []

_OPS = ("Softmax", "LogSoftmax", "Hardmax")


def _only_ones_after(shape, axis: int) -> bool:
    """Whether every dim after ``axis`` is statically 1: then 'flatten at axis' and 'this axis'
    select the same elements."""
    if shape is None or not -len(shape) <= axis < len(shape):
        return False
    return all(d == 1 for d in shape[axis % len(shape) + 1:])


def _up(node, ctx) -> None:
    axis = attr_value(node, ctx, "axis", 1)
    data = node.input[0]
    rank = ctx.rank(data)
    if axis == -1 or (rank is not None and axis in (rank - 1, -1)) or _only_ones_after(ctx.shape(data), axis):
        set_attribute(node, "axis", axis)
        return
    if rank is not None and not -rank <= axis < rank:
        ctx.block(f"axis {axis} is out of range for rank {rank}")
    elem = ctx.elem_type(data)
    flat = ctx.insert_before("Flatten", [data], axis=axis)
    record_type(ctx, flat.output[0], elem, [None, None])
    shape = ctx.insert_before("Shape", [data])
    record_type(ctx, shape.output[0], 7, [rank])
    node.input[0] = flat.output[0]
    set_attribute(node, "axis", 1)
    original = node.output[0]
    out = ctx.redirect_output(0)
    record_type(ctx, out, elem, [None, None])
    ctx.insert_after("Reshape", [out, shape.output[0]], [original])
    ctx.record(f"{node.op_type} axis {axis} -> Flatten/{node.op_type}/Reshape")


def _down(node, ctx) -> None:
    axis = attr_value(node, ctx, "axis", -1)
    data = node.input[0]
    rank = ctx.rank(data)
    check_types(node, ctx)
    if axis == -1 or (rank is not None and axis == rank - 1) or _only_ones_after(ctx.shape(data), axis):
        set_attribute(node, "axis", axis)
        return
    if rank is None:
        ctx.block(f"{node.op_type} with axis={axis} on a tensor of unknown rank: the axis is not known to "
                  f"be the last one, which is all that {node.op_type} below opset 13 can take as it is")
    if not -rank <= axis < rank:
        ctx.block(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    perm = [d for d in range(rank) if d != axis] + [axis]
    inverse = [perm.index(d) for d in range(rank)]
    shape = ctx.shape(data)
    moved = None if shape is None else [shape[d] for d in perm]
    elem = ctx.elem_type(data)
    t = ctx.insert_before("Transpose", [data], perm=perm)
    record_type(ctx, t.output[0], elem, moved)
    node.input[0] = t.output[0]
    set_attribute(node, "axis", -1)
    original = node.output[0]
    out = ctx.redirect_output(0)
    record_type(ctx, out, elem, moved)
    ctx.insert_after("Transpose", [out], [original], perm=inverse)
    ctx.record(f"{node.op_type} axis {axis} -> Transpose/{node.op_type}/Transpose")


for _op in _OPS:
    register(_op, 11, 13, kind="meaning change")(_up)
    register(_op, 13, 11, kind="meaning change")(_down)
