"""Pad across opsets 2, 11, 18 and 19.

- 1 <-> 2: the ``paddings`` attribute was renamed ``pads`` (same layout).
- 2 <-> 11: ``pads`` and ``value`` moved to inputs (``pads`` int64, ``constant_value`` of the
  data's type); integer types added. Up: the attributes become constant inputs (no value
  attribute, or 0, no input). Down: constant inputs become the attributes; a computed one
  blocks, as does a constant value a float32 attribute cannot hold exactly, or integer data.
- 13 <-> 18: the optional ``axes`` input. Up: nothing. Down: constant axes with the data's rank
  known fold into full pads (0 for the other axes): a constant when the pads are, else a
  Gather of the pads with a 0 appended (Concat); otherwise blocked.
- 18 <-> 19: mode 'wrap' added. Up: nothing. Down: 'wrap' blocks.
(11 <-> 13, 19 <-> 21+: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import attr_value, record_type
from rewriter.convert.adapters.moves import (attr_to_input, check_types, constant_input, float_exact, input_name,
                                             ints_input_to_attr, set_input, trim_inputs, value_of)
from rewriter.graph.attributes import attribute, remove_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Pad", 1, 2, kind="attribute<->input")
def pad_1_2(node, ctx) -> None:
    a = attribute(node, "paddings")
    if a is None:
        ctx.block("Pad-1 without its required paddings attribute")
    a.name = "pads"
    ctx.record("Pad paddings -> pads")


@register("Pad", 2, 1, kind="attribute<->input")
def pad_2_1(node, ctx) -> None:
    a = attribute(node, "pads")
    if a is not None:
        a.name = "paddings"
        ctx.record("Pad pads -> paddings")


@register("Pad", 2, 11, kind="attribute<->input")
def pad_2_11(node, ctx) -> None:
    if attribute(node, "pads") is None:
        ctx.block("Pad-2 without its required pads attribute")
    attr_to_input(node, ctx, "pads", 1, hint="pad_pads")
    value = attr_value(node, ctx, "value", 0.0)
    remove_attribute(node, "value")
    if value != 0.0:
        elem = ctx.elem_type(node.input[0])
        if not elem:
            ctx.block(f"value={value} with the type of '{node.input[0]}' unknown: Pad-11's constant_value "
                      f"input must have the data's type")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        set_input(node, 2, ctx.add_constant("pad_value", np.array(value, dtype=dtype)))
        ctx.record("Pad value attribute -> input")


@register("Pad", 11, 2, kind="attribute<->input")
def pad_11_2(node, ctx) -> None:
    if not input_name(node, 1):
        ctx.block("Pad without its pads input")
    value = constant_input(node, ctx, 2, "constant_value", 11)
    if value is not None:
        if value.size != 1:
            ctx.block(f"constant_value input '{node.input[2]}' is not a scalar")
        if not float_exact(value, ctx.elem_type(node.input[0])):
            ctx.block(f"constant_value {value.reshape(-1)[0]!r} is not exactly a float32, as Pad-2's value "
                      f"attribute is")
        ctx.maybe_unused(node.input[2])
    trim_inputs(node, 2)
    ints_input_to_attr(node, ctx, 1, "pads", 11)
    if value is not None and float(value.reshape(-1)[0]) != 0.0:
        node.attribute.append(onnx.helper.make_attribute("value", float(value.reshape(-1)[0])))
    check_types(node, ctx)


@register("Pad", 13, 18, kind="new feature")
def pad_13_18(node, ctx) -> None:
    """Pad-18 without axes is Pad-13."""


@register("Pad", 18, 13, kind="new feature")
def pad_18_13(node, ctx) -> None:
    axes_name = input_name(node, 3)
    if not axes_name:
        trim_inputs(node, 3)
        return
    axes = constant_input(node, ctx, 3, "axes", 18)
    pads_name = node.input[1]
    rank = ctx.rank(node.input[0])
    if rank is None:
        ctx.block(f"axes input '{axes_name}' with the rank of '{node.input[0]}' unknown: it cannot fold into "
                  f"full pads (axes exists from opset 18)")
    axes = [int(a) for a in np.asarray(axes).reshape(-1)]
    for a in axes:
        if not -rank <= a < rank:
            ctx.block(f"axis {a} is out of range for rank {rank}")
    axes = [a % rank for a in axes]
    if len(set(axes)) != len(axes):
        ctx.block(f"axes {axes} repeat an axis")
    ctx.maybe_unused(axes_name)
    pads = value_of(ctx, pads_name)
    if pads is not None:
        pads = [int(p) for p in np.asarray(pads).reshape(-1)]
        if len(pads) != 2 * len(axes):
            ctx.block(f"pads has {len(pads)} values for {len(axes)} axes")
        full = [0] * (2 * rank)
        for i, a in enumerate(axes):
            full[a], full[rank + a] = pads[i], pads[len(axes) + i]
        ctx.maybe_unused(pads_name)
        node.input[1] = ctx.add_constant("pad_pads", np.array(full, dtype=np.int64))
    else:  # computed pads: gathered into place, 0 (appended) for the other axes
        index = [2 * len(axes)] * (2 * rank)
        for i, a in enumerate(axes):
            index[a], index[rank + a] = i, len(axes) + i
        zero = ctx.add_constant("pad_zero", np.zeros([1], dtype=np.int64))
        extended = ctx.insert_before("Concat", [pads_name, zero], axis=0).output[0]
        record_type(ctx, extended, onnx.TensorProto.INT64, [2 * len(axes) + 1])
        where = ctx.add_constant("pad_index", np.array(index, dtype=np.int64))
        full = ctx.insert_before("Gather", [extended, where], axis=0).output[0]
        record_type(ctx, full, onnx.TensorProto.INT64, [2 * rank])
        node.input[1] = full
    trim_inputs(node, 3)
    ctx.record("Pad axes folded into pads")


@register("Pad", 18, 19, kind="meaning change")
def pad_18_19(node, ctx) -> None:
    """Pad-19 only added mode 'wrap'."""


@register("Pad", 19, 18, kind="meaning change")
def pad_19_18(node, ctx) -> None:
    mode = attr_value(node, ctx, "mode", "constant")
    if mode == "wrap":
        ctx.block("mode 'wrap' exists only from opset 19")
