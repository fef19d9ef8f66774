"""Slice across opset 10, which moved ``starts``, ``ends`` and ``axes`` from attributes to
inputs and added the ``steps`` input.

- up 1 -> 10: the attributes become constant int64 inputs (no axes attribute, no axes input).
- down 10 -> 1: constant starts/ends/axes inputs become the attributes; a computed one blocks.
  Slice-1 has no steps: an axis sliced with a constant step other than 1 becomes a Gather of
  the indices the step picks (clamped as Slice-10 clamps), which needs that dim static; the
  unit-step axes stay a Slice-1 before the Gathers. A computed steps input blocks.

(10 <-> 11, negative axes: ``negative_axes.py``; 11 <-> 13: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.moves import value_of, attr_to_input, check_types, constant_input, input_name
from rewriter.graph.attributes import attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Slice", 1, 10, kind="attribute<->input")
def slice_1_10(node, ctx) -> None:
    for attr in ("starts", "ends"):
        if attribute(node, attr) is None:
            ctx.block(f"Slice-1 without its required {attr} attribute")
    attr_to_input(node, ctx, "starts", 1, hint="slice_starts")
    attr_to_input(node, ctx, "ends", 2, hint="slice_ends")
    attr_to_input(node, ctx, "axes", 3, hint="slice_axes")


@register("Slice", 10, 1, kind="attribute<->input")
def slice_10_1(node, ctx) -> None:
    steps = constant_input(node, ctx, 4, "steps", 10) if input_name(node, 4) else None
    for index, attr in ((1, "starts"), (2, "ends"), (3, "axes")):
        if not input_name(node, index):
            if attr != "axes":
                ctx.block(f"Slice without its {attr} input")
            continue
        constant_input(node, ctx, index, attr, 10)  # blocks naming the input when computed
    names = list(node.input)
    values = {attr: [int(v) for v in np.asarray(value_of(ctx, names[i])).reshape(-1)]
              for i, attr in ((1, "starts"), (2, "ends"), (3, "axes")) if len(names) > i and names[i]}
    values.setdefault("axes", list(range(len(values["starts"]))))
    steps = [1] * len(values["starts"]) if steps is None else [int(v) for v in steps.reshape(-1)]
    if not len(values["starts"]) == len(values["ends"]) == len(values["axes"]) == len(steps):
        ctx.block("starts, ends, axes and steps differ in length")
    gathers = _gathers(node, ctx, values, steps)
    del node.input[1:]
    for name in names[1:]:
        if name:
            ctx.maybe_unused(name)
    check_types(node, ctx)
    unit = [k for k, st in enumerate(steps) if st == 1]
    if unit:
        for attr in ("starts", "ends", "axes"):
            node.attribute.append(onnx.helper.make_attribute(attr, [values[attr][k] for k in unit]))
        ctx.record("Slice inputs -> attributes")
    if gathers:
        _chain(node, ctx, gathers, keep_slice=bool(unit))


def _gathers(node, ctx, values, steps) -> list[tuple[int, list[int]]]:
    """(axis, indices) for every axis sliced with a step other than 1: Slice-1 has no steps, but
    a Gather of the indices the step picks does the same when the dim is static."""
    found = []
    shape = ctx.shape(node.input[0])
    for k, step in enumerate(steps):
        if step == 1:
            continue
        axis = values["axes"][k]
        dim = shape[axis] if shape is not None and 0 <= axis < len(shape) else None
        if step == 0 or dim is None:
            ctx.block(f"steps {steps} with the size of axis {axis} of '{node.input[0]}' unknown "
                      f"(steps exist from opset 10)")
        start, end = values["starts"][k], values["ends"][k]
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        found.append((axis, list(range(start, end, step))))
    return found


def _chain(node, ctx, gathers, keep_slice: bool) -> None:
    """The node (a Slice-1 of the unit-step axes, when any) and one Gather per other axis; without
    unit-step axes the node itself becomes the last Gather."""
    elem = ctx.elem_type(node.input[0])

    def indices(values):
        return ctx.add_constant("slice_indices", np.array(values, dtype=np.int64))

    if keep_slice:
        original = node.output[0]
        current = ctx.redirect_output(0)
        _record(ctx, current, elem)
        for k, (axis, idx) in enumerate(gathers):
            last = k == len(gathers) - 1
            current = ctx.insert_after("Gather", [current, indices(idx)], [original] if last else 1,
                                       axis=axis).output[0]
            if not last:
                _record(ctx, current, elem)
    else:
        current = node.input[0]
        for axis, idx in gathers[:-1]:
            current = ctx.insert_before("Gather", [current, indices(idx)], axis=axis).output[0]
            _record(ctx, current, elem)
        axis, idx = gathers[-1]
        del node.input[:]
        node.input.extend([current, indices(idx)])
        del node.attribute[:]
        node.attribute.append(onnx.helper.make_attribute("axis", axis))
        node.op_type = "Gather"
    ctx.record("Slice steps -> Gather")


def _record(ctx, name, elem) -> None:
    from rewriter.convert.adapters.feature_support import record_type

    record_type(ctx, name, elem, None)
