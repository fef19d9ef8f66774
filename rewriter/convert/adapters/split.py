"""Split across opsets 2, 13 and 18.

- 1 <-> 2: Split-1 could take ``split`` as a second input; Split-2 only as an attribute (axis
  default 0; Split-1's axis has no default, so it is written out both ways). Up: a constant
  split input becomes the attribute. Down: types (Split-1 takes float types only).
- 11 <-> 13: the ``split`` attribute became an optional int64 input (bfloat16 added). Up:
  attribute -> constant input; down: constant input (or one static shapes decide) ->
  attribute; sizes known at run time only -> one Slice per part (bounds summed with Add).
- 13 <-> 18: ``num_outputs`` added. Up: a Split without split input gets num_outputs = its
  number of outputs (Split-18 needs one of the two; equal parts, as before). Down:
  num_outputs goes; when the dim along the axis is static and not a multiple of it, the
  sizes (equal parts, the last one smaller) become a constant split input; for a dim unknown
  until run time they are computed (Shape, Gather, ceil(d / n) with Add/Div, the rest with
  Mul/Sub, Concat), which going below 13 become Slices.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import attr_value, record_type
from rewriter.convert.adapters.moves import (attr_to_input, check_types, input_name, ints_input_to_attr,
                                             set_input, value_of)
from rewriter.graph.attributes import attribute, remove_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Split", 1, 2, kind="attribute<->input")
def split_1_2(node, ctx) -> None:
    if input_name(node, 1):
        if attribute(node, "split") is not None:
            ctx.block("Split-1 with both a split input and a split attribute")
        ints_input_to_attr(node, ctx, 1, "split", 2, allow_reference=False)
    if attribute(node, "axis") is None:
        node.attribute.append(onnx.helper.make_attribute("axis", 0))


@register("Split", 2, 1, kind="type-only")
def split_2_1(node, ctx) -> None:
    """Split-1's axis has no default: Split-2's (0) is written out."""
    check_types(node, ctx)
    if attribute(node, "axis") is None:
        node.attribute.append(onnx.helper.make_attribute("axis", 0))


@register("Split", 11, 13, kind="attribute<->input")
def split_11_13(node, ctx) -> None:
    attr_to_input(node, ctx, "split", 1, hint="split_sizes")


@register("Split", 13, 11, kind="attribute<->input")
def split_13_11(node, ctx) -> None:
    name = input_name(node, 1)
    if name and value_of(ctx, name) is None:  # sizes known at run time only: one Slice per part
        check_types(node, ctx)
        _as_slices(node, ctx, name)
        return
    ints_input_to_attr(node, ctx, 1, "split", 13)
    check_types(node, ctx)


def _as_slices(node, ctx, sizes: str) -> None:
    """Split with run-time sizes as Slices (Slice takes its bounds as inputs from opset 10): part
    i runs from sizes[0] + ... + sizes[i-1] to that plus sizes[i] along the axis; the same parts."""
    i64 = onnx.TensorProto.INT64
    axis = attr_value(node, ctx, "axis", 0)
    axes = ctx.add_constant("split_axis", np.array([axis], dtype=np.int64))
    start = ctx.add_constant("split_start", np.array([0], dtype=np.int64))
    for i, out in enumerate(node.output):
        first = ctx.add_constant("split_part", np.array([i], dtype=np.int64))
        after = ctx.add_constant("split_part", np.array([i + 1], dtype=np.int64))
        size = ctx.insert_before("Slice", [sizes, first, after]).output[0]
        record_type(ctx, size, i64, [1])
        end = size if i == 0 else ctx.insert_before("Add", [start, size]).output[0]
        record_type(ctx, end, i64, [1])
        ctx.insert_before("Slice", [node.input[0], start, end, axes], [out])
        start = end
    ctx.remove()
    ctx.record("Split with run-time sizes -> Slices")


@register("Split", 13, 18, kind="new feature")
def split_13_18(node, ctx) -> None:
    if not input_name(node, 1):
        node.attribute.append(onnx.helper.make_attribute("num_outputs", len(node.output)))
        ctx.record("Split num_outputs written out")


@register("Split", 18, 13, kind="new feature")
def split_18_13(node, ctx) -> None:
    n = attr_value(node, ctx, "num_outputs", None)
    if n is None:
        return
    remove_attribute(node, "num_outputs")
    ctx.record("Split num_outputs dropped")
    if input_name(node, 1):
        return
    if n != len(node.output):
        ctx.block(f"num_outputs={n} but the node has {len(node.output)} outputs")
    axis = attr_value(node, ctx, "axis", 0)
    shape = ctx.shape(node.input[0])
    dim = None
    if shape is not None and -len(shape) <= axis < len(shape):
        dim = shape[axis]
    if dim is None:  # sizes computed at run time: ceil(d / n) each, the rest last
        _dynamic_sizes(node, ctx, n, axis)
        return
    if dim % n == 0:
        return
    chunk = -(-dim // n)
    sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    if sizes[-1] < 0:  # Split-18 fails on such a dim when it runs; a branch never taken has them:
        _dynamic_sizes(node, ctx, n, axis)  # the same sizes computed at run time, failing alike
        ctx.record("Split num_outputs that cannot split its static dim: sizes computed at run time")
        return
    set_input(node, 1, ctx.add_constant("split_sizes", np.array(sizes, dtype=np.int64)))
    ctx.record("Split num_outputs -> split sizes")


def _dynamic_sizes(node, ctx, n: int, axis: int) -> None:
    i64 = onnx.TensorProto.INT64
    shape = ctx.insert_before("Shape", [node.input[0]]).output[0]
    record_type(ctx, shape, i64, [ctx.rank(node.input[0])] if ctx.rank(node.input[0]) is not None else None)
    d = ctx.insert_before("Gather", [shape, ctx.add_constant("split_axis", np.array([axis], dtype=np.int64))],
                          axis=0).output[0]
    record_type(ctx, d, i64, [1])
    n_minus_1 = ctx.add_constant("split_n_minus_1", np.array([n - 1], dtype=np.int64))
    padded = ctx.insert_before("Add", [d, n_minus_1]).output[0]
    record_type(ctx, padded, i64, [1])
    chunk = ctx.insert_before("Div", [padded, ctx.add_constant("split_n", np.array([n], dtype=np.int64))]).output[0]
    record_type(ctx, chunk, i64, [1])
    used = ctx.insert_before("Mul", [chunk, n_minus_1]).output[0]
    record_type(ctx, used, i64, [1])
    last = ctx.insert_before("Sub", [d, used]).output[0]
    record_type(ctx, last, i64, [1])
    sizes = ctx.insert_before("Concat", [chunk] * (n - 1) + [last], axis=0).output[0]
    record_type(ctx, sizes, i64, [n])
    set_input(node, 1, sizes)
    ctx.record("Split num_outputs -> sizes computed from the shape")
