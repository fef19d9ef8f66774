"""Slice across opset 10, which moved ``starts``, ``ends`` and ``axes`` from attributes to
inputs and added the ``steps`` input.

- up 1 -> 10: the attributes become constant int64 inputs (no axes attribute, no axes input).
- down 10 -> 1: constant starts/ends/axes inputs become the attributes; a computed one blocks;
  ``steps`` must be absent or a constant of ones (Slice-1 has no steps).

(10 <-> 11, negative axes: ``negative_axes.py``; 11 <-> 13: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.moves import value_of, attr_to_input, check_types, constant_input, input_name
from rewriter.convert.attrs import get_attr
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Slice", 1, 10, kind="attribute<->input")
def slice_1_10(node, ctx) -> None:
    for attr in ("starts", "ends"):
        if get_attr(node, attr) is None:
            ctx.block(f"Slice-1 without its required {attr} attribute")
    attr_to_input(node, ctx, "starts", 1, hint="slice_starts")
    attr_to_input(node, ctx, "ends", 2, hint="slice_ends")
    attr_to_input(node, ctx, "axes", 3, hint="slice_axes")


@register("Slice", 10, 1, kind="attribute<->input")
def slice_10_1(node, ctx) -> None:
    steps = constant_input(node, ctx, 4, "steps", 10) if input_name(node, 4) else None
    if steps is not None and not (steps == 1).all():
        ctx.block(f"steps {steps.tolist()} (steps exist from opset 10)")
    if input_name(node, 4):
        ctx.maybe_unused(node.input[4])
    for index, attr in ((1, "starts"), (2, "ends"), (3, "axes")):
        if not input_name(node, index):
            if attr != "axes":
                ctx.block(f"Slice without its {attr} input")
            continue
        constant_input(node, ctx, index, attr, 10)  # blocks naming the input when computed
    names = list(node.input)
    values = {attr: [int(v) for v in np.asarray(value_of(ctx, names[i])).reshape(-1)]
              for i, attr in ((1, "starts"), (2, "ends"), (3, "axes")) if len(names) > i and names[i]}
    del node.input[1:]
    for name in names[1:]:
        if name:
            ctx.maybe_unused(name)
    for attr, v in values.items():
        node.attribute.append(onnx.helper.make_attribute(attr, v))
    ctx.record("Slice inputs -> attributes")
    check_types(node, ctx)
