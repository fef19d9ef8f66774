"""If and Loop across opset 11, and the variadic elementwise ops across opset 8."""

from __future__ import annotations

import onnx

from rewriter.convert.registry import register
from rewriter.verify.shapes.rule import format_shape

__all__: list[str] = []


def _static_shape(value: onnx.ValueInfoProto) -> list[int] | None:
    t = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return None if None in dims else dims


@register("If", 11, 1, kind="meaning change")
def if_11_1(node, ctx) -> None:
    """If-1 requires both branches to produce outputs of one static shape each."""
    branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    then, other = branches.get("then_branch"), branches.get("else_branch")
    if then is None or other is None or len(then.output) != len(other.output):
        ctx.block("the branches must have the same outputs below opset 11")
    for a, b in zip(then.output, other.output):
        shape = _static_shape(a)
        if shape is None or shape != _static_shape(b):
            ctx.block(f"below opset 11 both branches must declare output '{a.name}' with one static shape; "
                      f"they declare {format_shape(_static_shape(a))} and {format_shape(_static_shape(b))}")


@register("If", 1, 11, kind="type-only")
@register("Loop", 1, 11, kind="type-only")
def _widened(node, ctx) -> None:
    """Opset 11 only allowed more: nothing to do going up."""


@register("Loop", 11, 1, kind="meaning change")
def loop_11_1(node, ctx) -> None:
    ctx.block("Loop-1 restricts what loop-carried values may do in ways the model's body cannot be "
              "checked against; no conversion below opset 11")


def _same_shapes(node, ctx) -> None:
    """Below opset 8 the variadic ops do not broadcast: every input must have one static shape
    (a Sum that broadcasts becomes Adds, see :func:`_sum_as_adds`)."""
    shapes = [ctx.shape(name) for name in node.input if name]
    if any(s is None or None in s for s in shapes) or any(s != shapes[0] for s in shapes):
        if node.op_type == "Sum" and _sum_as_adds(node, ctx, shapes):
            return
        ctx.block(f"{node.op_type} broadcasts only from opset 8; its inputs' shapes are "
                  f"{', '.join(str(s) for s in shapes)}, not one static shape")


def _sum_as_adds(node, ctx, shapes) -> bool:
    """A broadcasting Sum as a chain of Add-6 with ``broadcast=1`` (the second operand's shape a
    suffix of the first's: scalars, biases), in Sum's own order, so every addition is the one
    Sum does: possible when the first input has the full shape, or with two inputs (a + b is
    b + a exactly). False when the shapes do not allow it."""
    names = [n for n in node.input if n]
    if len(names) < 2 or any(s is None for s in shapes):
        return False
    full = max(shapes, key=len)
    for s in shapes:  # every shape the full one or a suffix of it in static dims
        if s != full and (s != full[len(full) - len(s):] or None in s):
            return False
    if shapes[0] != full:
        if len(names) != 2 or shapes[1] != full:
            return False
        names, shapes = names[::-1], shapes[::-1]
    acc = names[0]
    for k, name in enumerate(names[1:], 1):
        if k < len(names) - 1:
            acc = ctx.insert_before("Add", [acc, name], broadcast=1).output[0]
    node.op_type = "Add"
    del node.input[:]
    node.input.extend([acc, names[-1]])
    node.attribute.append(onnx.helper.make_attribute("broadcast", 1))
    ctx.record("Sum with broadcasting -> Add chain")
    return True


def _broadcast_up(node, ctx) -> None:
    """Opset 8 added broadcasting: equal shapes mean the same thing."""


for _op in ("Max", "Min", "Sum", "Mean"):
    register(_op, 8, 6, kind="meaning change")(_same_shapes)
    register(_op, 6, 8, kind="type-only")(_broadcast_up)
