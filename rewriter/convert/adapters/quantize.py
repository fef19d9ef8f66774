"""QuantizeLinear / DequantizeLinear across 13, 19, 21 and 23 (the later steps only add types).

- 13 added ``axis`` (per-axis scales). Down: a scalar scale (per-tensor) -> axis dropped; a 1-D
  scale: DequantizeLinear of 8-bit x -> (Cast(x) - zero point) * scale along the axis (exact);
  QuantizeLinear of float x -> Cast(Clip(Round(x / scale) + zero point)) written for the target
  (Round exists from 11: targets 11 and 12; below, refused).
- 19 added float8 (and QuantizeLinear ``saturate``, which only affects float8 outputs), float16/
  bfloat16 scales; the scale got x's type (QuantizeLinear) or its own (DequantizeLinear output).
  Down: types checked (float8 refused), saturate dropped.
- 21 added ``block_size`` (blocked quantization) and QuantizeLinear ``output_dtype``, 4/16-bit
  types. Down: block_size=0 dropped, else refused; output_dtype that the zero point already
  says (or uint8 without one) dropped; another output_dtype without a zero point becomes a zero
  zero-point of that type (the same numbers); types checked.
- 23 gave QuantizeLinear's scale its own type and ``precision``, DequantizeLinear ``output_dtype``.
  Down: QuantizeLinear's scale must have x's type and precision be 0 or that type;
  DequantizeLinear's output_dtype must be 0 or the scale's type.
Going up nothing changes (absent = the old behaviour).
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import (add_typed_constant, attr_value, check_types, drop_default,
                                                       no_ref)
from rewriter.convert.attrs import get_attr, remove_attr
from rewriter.convert.registry import register

__all__: list[str] = []

_OPS = ("QuantizeLinear", "DequantizeLinear")


def _nothing(node, ctx) -> None:
    """The newer version without the new attributes is the older one."""


def _type_name(elem) -> str:
    return onnx.helper.tensor_dtype_to_string(elem).split(".")[-1].lower() if elem else "unknown"


@register(("QuantizeLinear", 13, 10), ("DequantizeLinear", 13, 10), kind="new feature")
def per_tensor_only(node, ctx) -> None:
    check_types(node, ctx)
    rank = ctx.rank(node.input[1])
    if rank == 0:
        if get_attr(node, "axis") is not None:
            no_ref(node, ctx, "axis")
            remove_attr(node, "axis")
            ctx.record(f"{node.op_type} axis dropped (per-tensor scale)")
        return
    if node.op_type == "DequantizeLinear" and rank == 1:
        _per_axis_dequantize(node, ctx)
        return
    if node.op_type == "QuantizeLinear" and rank == 1:
        _per_axis_quantize(node, ctx)
        return
    ctx.block(f"scale '{node.input[1]}' is {'of unknown rank' if rank is None else f'{rank}-D'}: "
              f"per-axis quantization exists only from opset 13")


def _column(ctx, name: str, hint: str, trailing: list[int]) -> str:
    """``name`` (a 1-D scale or zero point) as float32 of shape [-1, 1, ...] to broadcast along
    an axis followed by ``len(trailing)`` dims: a constant when it is one, else Cast + Reshape."""
    value = ctx.constant(name)
    if value is not None:
        ctx.maybe_unused(name)
        return add_typed_constant(ctx, hint, np.asarray(value).astype(np.float32).reshape([-1] + trailing))
    shape = add_typed_constant(ctx, "dq_axis_shape", np.array([-1] + trailing, dtype=np.int64))
    if ctx.elem_type(name) != onnx.TensorProto.FLOAT:
        name = ctx.insert_before("Cast", [name], to=onnx.TensorProto.FLOAT).output[0]
    return ctx.insert_before("Reshape", [name, shape]).output[0]


_BOUNDS = {onnx.TensorProto.UINT8: (0, 255), onnx.TensorProto.INT8: (-128, 127)}


def _per_axis_quantize(node, ctx) -> None:
    """Per-axis QuantizeLinear of float x as Cast(Clip(Round(x / scale) + zero_point)), the scale
    and zero point reshaped to broadcast along the axis: the same float division, the same
    rounding (Round: half to even, as QuantizeLinear), the same saturation. Round exists from
    opset 11, above this step's destination (10): the nodes are written for the target, which
    must be 11 or 12 (from 13 on the step is not taken)."""
    x = node.input[0]
    rank = ctx.rank(x)
    zero_point = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    out = ctx.elem_type(zero_point) if zero_point else onnx.TensorProto.UINT8
    if ctx.target is None or ctx.target < 11:
        ctx.block(f"scale '{node.input[1]}' is 1-D: per-axis quantization exists only from opset 13 "
                  f"(rewritten with Round, which exists from opset 11, for targets 11 and 12)")
    if ctx.elem_type(x) != onnx.TensorProto.FLOAT or rank is None or out not in _BOUNDS:
        ctx.block(f"scale '{node.input[1]}' is 1-D: per-axis quantization exists only from opset 13 (rewritten "
                  f"with Div/Round/Clip/Cast only for float x of known rank and an 8-bit zero point)")
    axis = attr_value(node, ctx, "axis", 1)
    if not -rank <= axis < rank:
        ctx.block(f"axis {axis} is out of range for rank {rank}")
    trailing = [1] * (rank - 1 - axis % rank)
    at = ctx.insert_before_at_target
    scale = _column(ctx, node.input[1], f"{node.input[1]}_column", trailing)
    values = at("Round", [at("Div", [x, scale]).output[0]]).output[0]
    if zero_point:
        values = at("Add", [values, _column(ctx, zero_point, f"{zero_point}_column", trailing)]).output[0]
    low, high = _BOUNDS[out]
    values = at("Clip", [values, add_typed_constant(ctx, "q_min", np.array(low, np.float32)),
                         add_typed_constant(ctx, "q_max", np.array(high, np.float32))]).output[0]
    original = node.output[0]
    del node.input[:]
    del node.attribute[:]
    node.op_type = "Cast"
    node.input.append(values)
    node.attribute.append(onnx.helper.make_attribute("to", out))
    node.output[0] = original
    ctx.record("per-axis QuantizeLinear -> Div/Round/Add/Clip/Cast")


def _per_axis_dequantize(node, ctx) -> None:
    """Per-axis DequantizeLinear of 8-bit integers as (float(x) - float(zero_point)) * scale, the
    scale and zero point reshaped to broadcast along the axis: float(x) - float(zp) is exact for
    8-bit values, and the product rounds once, as DequantizeLinear does."""
    x = node.input[0]
    elem, rank = ctx.elem_type(x), ctx.rank(x)
    if elem not in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8) or rank is None:
        ctx.block(f"scale '{node.input[1]}' is 1-D: per-axis quantization exists only from opset 13 (rewritten "
                  f"with Cast/Sub/Mul only for 8-bit x of known rank)")
    axis = attr_value(node, ctx, "axis", 1)
    if not -rank <= axis < rank:
        ctx.block(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    trailing = [1] * (rank - 1 - axis)

    def column(name: str, hint: str) -> str:
        return _column(ctx, name, hint, trailing)

    scale = column(node.input[1], f"{node.input[1]}_column")
    zero_point = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    values = ctx.insert_before("Cast", [x], to=onnx.TensorProto.FLOAT).output[0]
    if zero_point:
        values = ctx.insert_before("Sub", [values, column(zero_point, f"{zero_point}_column")]).output[0]
    original = node.output[0]
    del node.input[:]
    del node.attribute[:]
    node.op_type = "Mul"
    node.input.extend([values, scale])
    node.output[0] = original
    ctx.record("per-axis DequantizeLinear -> Cast/Sub/Mul")


@register(("QuantizeLinear", 19, 13), ("DequantizeLinear", 19, 13), kind="new feature")
def before_float8(node, ctx) -> None:
    check_types(node, ctx)
    if get_attr(node, "saturate") is not None:  # only affects float8 outputs, refused above
        attr_value(node, ctx, "saturate")
        remove_attr(node, "saturate")
        ctx.record("QuantizeLinear saturate dropped")


@register(("QuantizeLinear", 21, 19), ("DequantizeLinear", 21, 19), kind="new feature")
def before_blocks(node, ctx) -> None:
    drop_default(node, ctx, "block_size", 0, 21, " (blocked quantization)")
    if node.op_type == "QuantizeLinear" and get_attr(node, "output_dtype") is not None:
        wanted = attr_value(node, ctx, "output_dtype", 0)
        remove_attr(node, "output_dtype")
        zero_point = node.input[2] if len(node.input) > 2 else ""
        if wanted and zero_point:
            if ctx.elem_type(zero_point) != wanted:
                ctx.block(f"output_dtype={_type_name(wanted)} with a zero point of type "
                          f"{_type_name(ctx.elem_type(zero_point))}")
        elif wanted and wanted != onnx.TensorProto.UINT8:
            shape = ctx.shape(node.input[1])
            if shape is None or None in shape:
                ctx.block(f"output_dtype={_type_name(wanted)} without a zero point needs a zero zero-point "
                          f"shaped like the scale, whose shape is unknown")
            dtype = onnx.helper.tensor_dtype_to_np_dtype(wanted)
            del node.input[2:]
            while len(node.input) < 2:
                node.input.append("")
            node.input.append(add_typed_constant(ctx, f"{node.name or 'q'}_zero_point", np.zeros(shape, dtype)))
            ctx.record("QuantizeLinear output_dtype -> zero zero-point")
    check_types(node, ctx)


@register("QuantizeLinear", 23, 21, kind="new feature")
def quantize_23_21(node, ctx) -> None:
    x, scale = ctx.elem_type(node.input[0]), ctx.elem_type(node.input[1])
    if x is None or x != scale:
        ctx.block(f"below opset 23 the scale must have x's type; x is {_type_name(x)}, the scale "
                  f"{_type_name(scale)}")
    precision = attr_value(node, ctx, "precision", 0)
    if precision and precision != x:
        ctx.block(f"precision={_type_name(precision)} differs from the scale's type (precision exists "
                  f"only from opset 23)")
    remove_attr(node, "precision")
    check_types(node, ctx)


@register("DequantizeLinear", 23, 21, kind="new feature")
def dequantize_23_21(node, ctx) -> None:
    wanted = attr_value(node, ctx, "output_dtype", 0)
    scale = ctx.elem_type(node.input[1])
    if wanted and wanted != scale:
        ctx.block(f"output_dtype={_type_name(wanted)} differs from the scale's type {_type_name(scale)} "
                  f"(output_dtype exists only from opset 23)")
    remove_attr(node, "output_dtype")
    check_types(node, ctx)


@register("QuantizeLinear", 13, 19, kind="new feature")
def quantize_13_19(node, ctx) -> None:
    """From 19 the scale has x's type: a float scale with int32 x does not fit."""
    x, scale = ctx.elem_type(node.input[0]), ctx.elem_type(node.input[1])
    if x is not None and scale is not None and x != scale:
        ctx.block(f"from opset 19 the scale must have x's type; x is {_type_name(x)}, the scale "
                  f"{_type_name(scale)}")


for _op in _OPS:
    register(_op, 10, 13, kind="new feature")(_nothing)
    register(_op, 19, 21, kind="new feature")(_nothing)
    register(_op, 21, 23, kind="new feature")(_nothing)
register("DequantizeLinear", 13, 19, kind="new feature")(_nothing)
