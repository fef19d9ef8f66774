"""Reshape across opset 5 (``shape`` attribute -> second input) and 14 (``allowzero``).

- up 1 -> 5: the shape attribute becomes a constant int64 input; ``consumed_inputs`` (a
  legacy optimization hint) goes.
- down 5 -> 1: a constant shape input becomes the attribute; a computed one blocks.
  Reshape-1 takes float types only.
- up 13 -> 14: nothing (allowzero absent = 0 = the old behaviour).
- down 14 -> 13: allowzero=0 is dropped; allowzero=1 is dropped only when the shape is a
  constant without any 0 (allowzero only changes what a 0 in the shape means); otherwise
  the step blocks.
"""

from __future__ import annotations

import numpy as np

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, check_types, no_ref
from rewriter.convert.attrs import get_attr, remove_attr, set_ints
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Reshape", 1, 5, kind="attribute<->input")
def reshape_1_5(node, ctx) -> None:
    no_ref(node, ctx, "shape")
    attr = get_attr(node, "shape")
    if attr is None:
        ctx.block("Reshape-1 without a shape attribute has no meaning to carry to opset 5")
    values = list(attr.ints)
    remove_attr(node, "shape")
    remove_attr(node, "consumed_inputs")
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
            ctx.block(f"allowzero=1 with shape input '{node.input[1]}' that is not a constant: a 0 in it "
                      f"would mean 'copy the input dim' below opset 14 (allowzero exists from opset 14)")
        if (np.asarray(value) == 0).any():
            ctx.block(f"allowzero=1 with a 0 in the shape {np.asarray(value).tolist()}: below opset 14 a 0 "
                      f"copies the input dim instead of making an empty dim (allowzero exists from opset 14)")
    if get_attr(node, "allowzero") is not None:
        remove_attr(node, "allowzero")
        ctx.record("Reshape allowzero dropped")
