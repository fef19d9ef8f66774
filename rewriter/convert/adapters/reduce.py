"""The Reduce* family: one generic adapter per kind of schema step, both directions.

ReduceProd 1 -> 11 allowed negative axes, 13 added bfloat16, 18 moved ``axes`` from an
attribute to an optional input and added ``noop_with_empty_axes``. Every other Reduce op made
the same move: ReduceSum at 13, ReduceMax, ReduceMin, ReduceMean, ReduceL1, ReduceL2,
ReduceLogSum, ReduceLogSumExp and ReduceSumSquare at 18 (:data:`AXES_INPUT_SINCE`). The other
steps of those ops, ReduceProd's included, only change types (the engine's type-only rule:
int8/uint8 for ReduceMax/Min at 12, bfloat16 at 13, bool for ReduceMax/Min at 20, no integers
for ReduceLogSum/LogSumExp at 28), and 1 <-> 11 (negative axes) is in ``negative_axes.py``.

- up, the move: the axes attribute becomes a constant int64 input (a Constant in a function,
  ``Constant<value_ints = @ref>`` for a function attribute reference); no attribute or an
  empty one means no input (both mean "all dims"); noop_with_empty_axes is not added.
- down, the move: a constant axes input becomes the attribute; empty or absent axes with
  noop=1 make the node an Identity; empty axes with noop=0 reduce all; noop never survives;
  a non-constant axes input blocks. Types the older version lacks (ReduceSum 13 -> 11:
  bfloat16) block.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx

from rewriter.graph.attributes import attribute, remove_attribute, set_ints
from rewriter.convert.adapters.moves import value_of
from rewriter.convert.registry import register, schema_versions
from rewriter.convert.type_only import step_types_allowed
from rewriter.errors import ConversionError


# ---------------------------------------------------------------- the axes move (ReduceProd 13 <-> 18, ...)

# op -> the schema version that made axes an input (and added noop_with_empty_axes)
AXES_INPUT_SINCE = {"ReduceSum": 13, **dict.fromkeys([
    "ReduceProd", "ReduceMax", "ReduceMin", "ReduceMean", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceSumSquare"], 18)}


def _previous(op: str, version: int) -> int:
    versions = schema_versions(op)
    return versions[versions.index(version) - 1]


def reduce_axes_up(node, ctx) -> None:
    """The axes attribute becomes a constant int64 input; no attribute means no input."""
    attributes = node.attribute
    for index, axes in enumerate(attributes):  # one pass: this runs for every Reduce node
        if axes.name == "axes":
            break
    else:
        return
    if axes.ref_attr_name:  # inside a function: a Constant takes the same reference
        name = ctx.add_constant_reference("axes_" + axes.ref_attr_name, axes.ref_attr_name)
        remove_attribute(node, "axes")
        del node.input[1:]
        node.input.append(name)
        ctx.record("axes attribute -> input")
        return
    values = tuple(axes.ints)
    del attributes[index]
    if not values:  # an empty attribute already meant "all dims", as an absent input does
        return
    name = ctx.ints_constant("axes", values)
    del node.input[1:]
    node.input.append(name)
    ctx.record("axes attribute -> input")


def reduce_axes_down(node, ctx) -> None:
    """A constant axes input becomes the attribute; noop_with_empty_axes is resolved."""
    noop = attribute(node, "noop_with_empty_axes")
    if noop is not None and noop.ref_attr_name:
        raise ConversionError(
            f"{ctx.label}: noop_with_empty_axes comes from the calling node's attribute "
            f"'{noop.ref_attr_name}', so it cannot be resolved for opsets below {ctx.step[0]}"
        )
    noop = bool(noop.i) if noop is not None else False
    remove_attribute(node, "noop_with_empty_axes")
    _check_data(node, ctx)
    axes_name = node.input[1] if len(node.input) > 1 else ""
    values: list[int] = []
    reference = ctx.constant_reference(axes_name) if axes_name else None
    if reference is not None and not noop:  # Constant<value_ints = @a> inside a function
        del node.input[1:]
        ctx.maybe_unused(axes_name)
        node.attribute.append(onnx.AttributeProto(name="axes", ref_attr_name=reference,
                                                  type=onnx.AttributeProto.INTS))
        ctx.record("axes input -> attribute")
        return
    if axes_name:
        value = value_of(ctx, axes_name)
        if value is None:
            raise ConversionError(
                f"{ctx.label}: axes input '{axes_name}' is not a constant, so it cannot become "
                f"the axes attribute needed below opset {ctx.step[0]}"
            )
        if value.dtype != np.int64 or value.ndim != 1:
            raise ConversionError(
                f"{ctx.label}: axes input '{axes_name}' must be a 1-D int64 tensor, "
                f"got {value.dtype} with shape {list(value.shape)}"
            )
        values = [int(v) for v in value]
        del node.input[1:]
        ctx.maybe_unused(axes_name)
    if not values and noop:
        _reduce_nothing(node, ctx)
        return
    if values:
        set_ints(node, "axes", values)
        ctx.record("axes input -> attribute")
    elif axes_name:
        ctx.record("empty axes -> reduce all")


# noop_with_empty_axes=1 with empty axes reduces each element on its own (onnx.reference and ONNX
# Runtime agree): the op's value of a one-element set, which is the element itself only for these
_ONE_ELEMENT = {"ReduceSumSquare": "Mul", "ReduceL1": "Abs", "ReduceL2": "Abs", "ReduceLogSum": "Log"}
_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                     onnx.TensorProto.BFLOAT16})


def _reduce_nothing(node, ctx) -> None:
    """A node that reduces no axis: what it computes of each element alone (x*x for ReduceSumSquare,
    |x| for ReduceL1/L2, log(x) for ReduceLogSum; x itself for the rest: an Identity)."""
    op = _ONE_ELEMENT.get(node.op_type)
    if op is None:
        ctx.to_identity(node)
        ctx.record("noop_with_empty_axes -> Identity")
        return
    if op == "Log":
        t = ctx.value_type(node.input[0])
        if t is None or t.tensor_type.elem_type not in _FLOATS:
            ctx.block(f"{node.op_type} with noop_with_empty_axes=1 and empty axes is log of each element; "
                      "below opset 18 that is a Log node, which needs the data's type to be a known float type")
    ctx.to_identity(node)
    node.op_type = op
    if op == "Mul":
        node.input.append(node.input[0])
    ctx.record(f"noop_with_empty_axes -> {op} of each element")


def _check_data(node, ctx) -> None:
    """The data's type must be allowed at the destination (checked on the data input alone,
    before the axes input goes; the verdict is the same for every node with the same types)."""
    names = (node.input[0] if node.input else "", *node.output)
    types = tuple(False if not n else None if (t := ctx.value_type(n)) is None else t.SerializeToString()
                  for n in names)
    reason = _data_reason(node.op_type, ctx.step[0], ctx.step[1], types)
    if reason is not None:
        ctx.block(reason.format(*names))


@functools.lru_cache(maxsize=1024)
def _data_reason(op: str, a: int, b: int, types: tuple) -> str | None:
    """step_types_allowed for a node of ``op`` with a data input and outputs of ``types`` (a
    serialized TypeProto, None when unknown, False when absent), its values named ``{0}``,
    ``{1}``, ... in the reason."""
    names = ["" if t is False else f"{{{i}}}" for i, t in enumerate(types)]
    probe = onnx.helper.make_node(op, names[:1], names[1:])
    known = {name: onnx.TypeProto.FromString(t) for name, t in zip(names, types) if t}
    return step_types_allowed(probe, a, b, known.get)


for _op, _since in AXES_INPUT_SINCE.items():
    register(_op, _previous(_op, _since), _since, kind="attribute<->input")(reduce_axes_up)
    register(_op, _since, _previous(_op, _since), kind="attribute<->input")(reduce_axes_down)
