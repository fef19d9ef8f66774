"""DFT across opset 20, which moved ``axis`` from an attribute (default 1) to an optional scalar
int64 input (default -2, the last signal axis).

- up 17 -> 20: the axis (the attribute, or its default 1) becomes a constant scalar input.
- down 20 -> 17: a constant axis input (absent: -2) becomes the attribute; a computed one blocks.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import attr_value
from rewriter.convert.adapters.moves import constant_input, input_name, set_input, trim_inputs
from rewriter.graph.attributes import remove_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("DFT", 17, 20, kind="attribute<->input")
def dft_17_20(node, ctx) -> None:
    axis = attr_value(node, ctx, "axis", 1)
    remove_attribute(node, "axis")
    set_input(node, 2, ctx.add_constant("dft_axis", np.array(axis, dtype=np.int64)))
    ctx.record("DFT axis attribute -> input")


@register("DFT", 20, 17, kind="attribute<->input")
def dft_20_17(node, ctx) -> None:
    axis = constant_input(node, ctx, 2, "axis", 20) if input_name(node, 2) else np.array(-2)
    if axis.size != 1:
        ctx.block(f"axis input '{node.input[2]}' is not a scalar")
    if input_name(node, 2):
        ctx.maybe_unused(node.input[2])
    trim_inputs(node, 2)
    remove_attribute(node, "axis")
    node.attribute.append(onnx.helper.make_attribute("axis", int(axis.reshape(-1)[0])))
    ctx.record("DFT axis input -> attribute")
