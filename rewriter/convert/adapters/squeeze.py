"""Squeeze and Unsqueeze across opset 13, which moved ``axes`` from an attribute to an input
(optional for Squeeze, required for Unsqueeze) and added bfloat16.

- up 11 -> 13: the axes attribute becomes a constant int64 input (a Constant in a function,
  ``Constant<value_ints = @ref>`` for a function attribute reference). Squeeze without axes
  gets no input; an empty axes attribute blocks (ONNX shape inference squeezes nothing,
  runtimes every 1-dim).
- down 13 -> 11: a constant axes input becomes the attribute; a computed one blocks. An empty
  axes input of Squeeze blocks (runtimes disagree whether it squeezes nothing or every 1-dim).
  bfloat16 data blocks.

The other steps (1 <-> 11 negative axes: ``negative_axes.py``; 21, 23, 24, 25: types) are
not here.
"""

from __future__ import annotations

from rewriter.convert.adapters.moves import attr_to_input, check_types, input_name, ints_input_to_attr
from rewriter.graph.attributes import attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register(("Squeeze", 11, 13), ("Unsqueeze", 11, 13), kind="attribute<->input")
def squeeze_11_13(node, ctx) -> None:
    if node.op_type == "Unsqueeze" and not any(a.name == "axes" for a in node.attribute):
        ctx.block("Unsqueeze-11 without its required axes attribute")
    axes = attribute(node, "axes")
    if axes is not None and not axes.ref_attr_name and not axes.ints:
        if node.op_type == "Squeeze":
            ctx.block("an empty axes attribute: runtimes disagree whether Squeeze-11 then squeezes nothing "
                      "(ONNX shape inference) or every 1-dim (ONNX Runtime, onnx.reference)")
        ctx.block("an empty axes attribute, which Unsqueeze does not allow")
    attr_to_input(node, ctx, "axes", 1, hint=f"{node.op_type.lower()}_axes")


@register(("Squeeze", 13, 11), ("Unsqueeze", 13, 11), kind="attribute<->input")
def squeeze_13_11(node, ctx) -> None:
    name = input_name(node, 1)
    if node.op_type == "Unsqueeze" and not name:
        ctx.block("Unsqueeze without its axes input")
    values = ints_input_to_attr(node, ctx, 1, "axes", 13)
    if values is not None and not values and not any(a.ref_attr_name for a in node.attribute):
        if node.op_type == "Squeeze":
            ctx.block(f"axes input '{name}' is empty: runtimes disagree whether Squeeze-13 then squeezes "
                      f"nothing or every 1-dim")
        ctx.block(f"axes input '{name}' is empty, which Unsqueeze-11 does not allow")
    check_types(node, ctx)
