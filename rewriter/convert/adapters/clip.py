"""Clip across opsets 6 and 11.

- 1 <-> 6: ``consumed_inputs`` (a legacy hint) went; min/max stayed attributes (absent at 1 =
  no bound; at 6 the defaults are -/+ FLT_MAX, the same bound for float, float16 and every
  double that fits in float32). Up drops consumed_inputs; down changes nothing.
- 6 <-> 11: ``min``/``max`` moved to optional inputs of the data's type. Up: present attributes
  become constant scalar inputs (the data's type must be known); down: constant scalar inputs
  become the attributes when a float32 attribute holds them exactly; a computed one blocks.
- 12 -> 11: Clip-11 takes floats only (integers from 12): see :func:`clip_12_11`.
(11 -> 12 integers, 12 <-> 13 bfloat16: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, record_type
from rewriter.convert.adapters.moves import check_types, constant_input, float_exact, set_input, trim_inputs
from rewriter.graph.attributes import remove_attribute
from rewriter.convert.registry import register
from rewriter.convert.adapters.type_routes import (EXACT_IN_DOUBLE, WIDE_INTEGERS, cast_to, compute_as, type_name,
                                                   where_extreme)

__all__: list[str] = []


@register("Clip", 1, 6, kind="new feature")
def clip_1_6(node, ctx) -> None:
    remove_attribute(node, "consumed_inputs")


@register("Clip", 6, 1, kind="new feature")
def clip_6_1(node, ctx) -> None:
    """Clip-1 has the same attributes (consumed_inputs is optional)."""


@register("Clip", 6, 11, kind="attribute<->input")
def clip_6_11(node, ctx) -> None:
    bounds = [(i, attr, attr_value(node, ctx, attr, None)) for i, attr in ((1, "min"), (2, "max"))]
    if all(v is None for _, _, v in bounds):
        return
    elem = ctx.elem_type(node.input[0])
    if not elem:
        ctx.block(f"the type of '{node.input[0]}' is unknown, and Clip-11's min/max inputs must have it")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    for i, attr, v in bounds:
        remove_attribute(node, attr)
        if v is not None:
            set_input(node, i, ctx.add_constant(f"clip_{attr}", np.array(v, dtype=np.float32).astype(dtype)))
            ctx.record(f"Clip {attr} attribute -> input")


@register("Clip", 11, 6, kind="attribute<->input")
def clip_11_6(node, ctx) -> None:
    values = {}
    for i, attr in ((1, "min"), (2, "max")):
        v = constant_input(node, ctx, i, attr, 11)
        if v is None:
            continue
        if v.size != 1:
            ctx.block(f"{attr} input '{node.input[i]}' is not a scalar")
        if not float_exact(v, ctx.elem_type(node.input[0])):
            ctx.block(f"{attr} {v.reshape(-1)[0]!r} is not exactly a float32, as Clip-6's {attr} attribute is")
        values[attr] = float(v.reshape(-1)[0])
    names = list(node.input[1:])
    trim_inputs(node, 1)
    for name in names:
        if name:
            ctx.maybe_unused(name)
    for attr, v in values.items():
        node.attribute.append(onnx.helper.make_attribute(attr, v))
    if values:
        ctx.record("Clip min/max inputs -> attributes")
    check_types(node, ctx)


_EXACT_IN_FLOAT = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16}
_CLIP_11 = frozenset(onnx.defs.get_schema("Clip", 11).type_constraints[0].allowed_type_strs)


@register("Clip", 12, 11, kind="type-only")
def clip_12_11(node, ctx) -> None:
    """Clip-11 takes floats only. Integer Clip, which is ``Min(max, Max(x, min))`` (so ``max``
    wins when min > max), is rewritten exactly:

    - targets 9-11: ``y = Where(Less(x, min), min, x)``, then ``Where(Less(max, y), max, y)``,
      written for the target (Less takes every integer type and Where exists from opset 9;
      comparison and selection are exact on integers); an absent bound is skipped, no bound at
      all is an Identity. A bound that is not known to be 0-D is reshaped to a scalar, so that it
      cannot broadcast a 0-D x.
    - below 9, integers of up to 32 bits: Clip on floats (8/16-bit integers) or doubles (32-bit)
      between two Casts (that type holds every such value: exact both ways); the bounds then
      become Clip-6's float attributes, which needs them constant and exact in float32. 64-bit
      integers below 9: refused.
    """
    elem = ctx.elem_type(node.input[0])
    if not elem or "tensor(" + type_name(elem) + ")" in _CLIP_11 or elem not in EXACT_IN_DOUBLE | WIDE_INTEGERS:
        check_types(node, ctx)
        return
    x, bounds = node.input[0], [node.input[i] if i < len(node.input) else "" for i in (1, 2)]
    original = node.output[0]
    if not any(bounds):
        ctx.to_identity(node)
        ctx.record("integer Clip without bounds -> Identity")
        return
    if ctx.final_opset is not None and ctx.final_opset >= 9:
        y = x
        for k, bound in enumerate(bounds):
            if not bound:
                continue
            if ctx.rank(bound) != 0:
                value = ctx.constant(bound)
                if value is not None and np.asarray(value).size == 1:
                    bound = add_typed_constant(ctx, f"{bound}_scalar", np.asarray(value).reshape([]))
                else:
                    shape = add_typed_constant(ctx, "clip_scalar_shape", np.zeros([0], np.int64))
                    bound = ctx.insert_before_at_target("Reshape", [bound, shape]).output[0]
                    record_type(ctx, bound, elem, [])
            last = not any(bounds[k + 1:])
            # min: the larger of x and min; max: the smaller of y and max
            y = where_extreme(ctx, y, bound, k == 0, elem, original if last else None)
        ctx.remove()
        ctx.record("integer Clip -> Where/Less")
        return
    if elem not in EXACT_IN_DOUBLE:
        ctx.block(f"Clip on {type_name(elem)} exists only from opset 12; a double does not hold every "
                  f"{type_name(elem)} exactly, and the exact route Where(Less(x, min), min, x) needs Where, "
                  f"which exists only from opset 9")
    if ctx.final_opset is not None and ctx.final_opset < 11:  # the bounds become Clip-6's float attributes
        for name in bounds:
            value = ctx.constant(name) if name else None
            if name and value is None:
                ctx.block(f"bound '{name}' is not a constant, and below opset 11 (integer Clip below 9 goes "
                          f"through Clip-6) it must become a float attribute")
            if name and (np.asarray(value).size != 1 or float(np.float32(np.asarray(value).reshape(-1)[0]))
                         != int(np.asarray(value).reshape(-1)[0])):
                ctx.block(f"bound '{name}' = {np.asarray(value).reshape(-1).tolist()} is not a scalar exactly "
                          f"a float32, as Clip-6's attributes are (integer Clip below 9 goes through Clip-6)")
    wide = onnx.TensorProto.FLOAT if elem in _EXACT_IN_FLOAT else onnx.TensorProto.DOUBLE
    dtype = onnx.helper.tensor_dtype_to_np_dtype(wide)
    inputs = [cast_to(ctx, x, wide)]
    for name in bounds:
        value = ctx.constant(name) if name else None
        if value is not None:
            ctx.maybe_unused(name)
            inputs.append(add_typed_constant(ctx, f"{name}_{dtype.name}", np.asarray(value).astype(dtype)))
        else:
            inputs.append(cast_to(ctx, name, wide) if name else "")
    compute_as(node, ctx, inputs, wide)
    ctx.record("integer Clip -> through float" if wide == onnx.TensorProto.FLOAT else "integer Clip -> through double")


@register("Clip", 11, 12, kind="type-only")
def clip_11_12(node, ctx) -> None:
    """12 only added the integer types: every Clip-11 node is a Clip-12 node."""
