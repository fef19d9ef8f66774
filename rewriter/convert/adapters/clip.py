"""Clip across opsets 6 and 11.

- 1 <-> 6: ``consumed_inputs`` (a legacy hint) went; min/max stayed attributes (absent at 1 =
  no bound; at 6 the defaults are -/+ FLT_MAX, the same bound for float, float16 and every
  double that fits in float32). Up drops consumed_inputs; down changes nothing.
- 6 <-> 11: ``min``/``max`` moved to optional inputs of the data's type. Up: present attributes
  become constant scalar inputs (the data's type must be known); down: constant scalar inputs
  become the attributes when a float32 attribute holds them exactly; a computed one blocks.
(11 <-> 12 integers, 12 <-> 13 bfloat16: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import attr_value
from rewriter.convert.adapters.moves import check_types, constant_input, float_exact, set_input, trim_inputs
from rewriter.convert.attrs import remove_attr
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Clip", 1, 6, kind="new feature")
def clip_1_6(node, ctx) -> None:
    remove_attr(node, "consumed_inputs")


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
        remove_attr(node, attr)
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
