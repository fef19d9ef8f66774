"""Reshape across opset 5 (``shape`` attribute -> second input) and 14 (``allowzero``).

- up 1 -> 5: the shape attribute becomes a constant int64 input; ``consumed_inputs`` (a
  legacy optimization hint) goes.
- down 5 -> 1: a constant shape input becomes the attribute; a computed one blocks.
  Reshape-1 takes float types only.
- up 13 -> 14: nothing (allowzero absent = 0 = the old behaviour).
- down 14 -> 13: allowzero=0 is dropped. allowzero=1 only changes what a 0 in the shape means
  (an empty dim, not "copy the input's dim"): a constant shape without a 0 is kept; a 0 in a
  valid Reshape means the input is empty, so a single 0 becomes -1 (which then works out to
  0: the other dims are not 0), for a constant shape directly and for a computed one (as
  dynamo exports write them) by ``Where(Equal(shape, 0), -1, shape)``. Exact whenever at most
  one element of the shape is 0 at run time; with two, the rewritten Reshape fails at run time
  where Reshape-14 made an empty tensor (it never computes another value). A constant shape
  with two 0s, or a 0 and a -1, blocks.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, check_types, no_ref
from rewriter.graph.attributes import attribute, remove_attribute, set_ints
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Reshape", 1, 5, kind="attribute<->input")
def reshape_1_5(node, ctx) -> None:
    no_ref(node, ctx, "shape")
    attr = attribute(node, "shape")
    if attr is None:
        ctx.block("Reshape-1 without a shape attribute has no meaning to carry to opset 5")
    values = list(attr.ints)
    remove_attribute(node, "shape")
    remove_attribute(node, "consumed_inputs")
    name = add_typed_constant(ctx, "reshape_shape", np.array(values, dtype=np.int64))
    del node.input[1:]
    node.input.append(name)
    ctx.record("Reshape shape attribute -> input")


@register("Reshape", 5, 1, kind="attribute<->input")
def reshape_5_1(node, ctx) -> None:
    name = node.input[1] if len(node.input) > 1 else ""
    value = ctx.constant(name) if name else None
    if value is None:
        ctx.block(f"shape input '{name}' is not a constant, so it cannot become the shape attribute "
                  f"Reshape needs below opset 5")
    del node.input[1:]
    check_types(node, ctx)
    set_ints(node, "shape", [int(v) for v in np.asarray(value).reshape(-1)])
    ctx.maybe_unused(name)
    ctx.record("Reshape shape input -> attribute")


@register("Reshape", 13, 14, kind="new feature")
def reshape_13_14(node, ctx) -> None:
    """Reshape-14 without allowzero is Reshape-13."""


@register("Reshape", 14, 13, kind="new feature")
def reshape_14_13(node, ctx) -> None:
    no_ref(node, ctx, "allowzero")
    allowzero = attr_value(node, ctx, "allowzero", 0)
    if allowzero:
        value = ctx.constant(node.input[1])
        if value is None:
            _zero_as_minus_one(node, ctx)
        elif (np.asarray(value) == 0).any():
            flat = np.asarray(value).reshape(-1)
            if (flat == 0).sum() > 1 or (flat == -1).any():
                ctx.block(f"allowzero=1 with the shape {flat.tolist()}: below opset 14 a 0 copies the input "
                          f"dim, and a single 0 alone can be written as -1 (allowzero exists from opset 14)")
            ctx.maybe_unused(node.input[1])
            node.input[1] = add_typed_constant(ctx, "reshape_shape", np.where(flat == 0, -1, flat).astype(np.int64))
            ctx.record("Reshape allowzero=1: the empty dim's 0 -> -1")
    if attribute(node, "allowzero") is not None:
        remove_attribute(node, "allowzero")
        ctx.record("Reshape allowzero dropped")


def _zero_as_minus_one(node, ctx) -> None:
    """A computed shape's 0 (an empty dim under allowzero=1) as -1: Where(Equal(s, 0), -1, s),
    written at opset 13 (Equal on int64 from 7, Where from 9)."""
    shape = node.input[1]
    zero = add_typed_constant(ctx, "reshape_zero", np.array(0, dtype=np.int64))
    minus_one = add_typed_constant(ctx, "reshape_minus_one", np.array(-1, dtype=np.int64))
    empty = ctx.insert_before("Equal", [shape, zero]).output[0]
    dims = ctx.shape(shape)
    if dims is not None:
        ctx.set_type(empty, onnx.helper.make_tensor_type_proto(onnx.TensorProto.BOOL, dims))
    fixed = ctx.insert_before("Where", [empty, minus_one, shape]).output[0]
    if dims is not None:
        ctx.set_type(fixed, onnx.helper.make_tensor_type_proto(onnx.TensorProto.INT64, dims))
    node.input[1] = fixed
    ctx.record("Reshape allowzero=1: a computed shape's 0 -> -1")
