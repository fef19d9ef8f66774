"""QuantizeLinear / DequantizeLinear across 13, 19, 21 and 23 (the later steps only add types).

- 13 added ``axis`` (per-axis scales). Down: a scale of one value (per tensor: a scalar, or a 1-D
  tensor of one, which ONNX's reference and ONNX Runtime take as per tensor whatever ``axis``
  says; onnxruntime.quantization writes such for biases, with axis 1 on a 1-D bias) -> scale and
  zero point as scalars, axis dropped; a longer 1-D scale: DequantizeLinear of 8-bit x (int32 with a zero zero-point) -> (Cast(x) - zero point) *
  scale along the axis (exact); QuantizeLinear of float x -> Cast(Clip(Round(x / scale) + zero
  point)) written for the target (Round exists from 11: targets 11 and 12; below, refused).
  Both in ``quantize_arith.py``, with their exactness conditions.
- 19 added float8 (and QuantizeLinear ``saturate``, which only affects float8 outputs), float16/
  bfloat16 scales; the scale got x's type (QuantizeLinear) or its own (DequantizeLinear output).
  Down: types checked (float8 refused), saturate dropped.
- 21 added ``block_size`` (blocked quantization) and QuantizeLinear ``output_dtype``, 4/16-bit
  types. Down: 16-bit x / zero point / output_dtype -> the same arithmetic, per tensor or per
  axis (QuantizeLinear for targets from 11); block_size=0 dropped, else refused; output_dtype that the zero point already
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
                                                       no_ref, record_type)
from rewriter.convert.adapters.quantize_arith import BOUNDS, dequantize_as_arithmetic, quantize_as_arithmetic
from rewriter.graph.attributes import attribute, remove_attribute
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
    if _one_element(ctx, node.input[1]):  # per tensor, whatever the axis says (the schemas, ONNX Runtime)
        for i in (1, 2):
            if len(node.input) > i and node.input[i] and ctx.rank(node.input[i]) != 0:
                node.input[i] = _scalar(ctx, node.input[i])
                ctx.record(f"{node.op_type} {'scale' if i == 1 else 'zero point'} of one value -> scalar")
    rank = ctx.rank(node.input[1])
    if rank == 0:
        if attribute(node, "axis") is not None:
            no_ref(node, ctx, "axis")
            remove_attribute(node, "axis")
            ctx.record(f"{node.op_type} axis dropped (per-tensor scale)")
        return
    what = f"scale '{node.input[1]}' is 1-D: per-axis quantization exists only from opset 13"
    if node.op_type == "DequantizeLinear" and rank == 1:
        dequantize_as_arithmetic(node, ctx, what)
        return
    if node.op_type == "QuantizeLinear" and rank == 1:
        zero_point = node.input[2] if len(node.input) > 2 and node.input[2] else ""
        quantize_as_arithmetic(node, ctx, ctx.elem_type(zero_point) if zero_point else onnx.TensorProto.UINT8, what,
                               "11 and 12")
        return
    ctx.block(f"scale '{node.input[1]}' is {'of unknown rank' if rank is None else f'{rank}-D'}: "
              f"per-axis quantization exists only from opset 13")


def _one_element(ctx, name: str) -> bool:
    """Whether ``name`` holds exactly one value (a scalar, or a 1-D tensor of one)."""
    value = ctx.constant(name)
    if value is not None:
        return value.size == 1
    shape = ctx.shape(name)
    return shape is not None and len(shape) <= 1 and all(d == 1 for d in shape)


def _scalar(ctx, name: str) -> str:
    """``name`` (one value) as a scalar, as opset 10's per-tensor scale and zero point are: a
    scalar constant for a constant, else Reshape to []; a scalar itself is kept."""
    value = ctx.constant(name)
    if value is not None:
        ctx.maybe_unused(name)
        return add_typed_constant(ctx, f"{name}_scalar", value.reshape(()))
    reshaped = ctx.insert_before("Reshape", [name, add_typed_constant(ctx, "scalar_shape", np.zeros(0, np.int64))])
    record_type(ctx, reshaped.output[0], ctx.elem_type(name), [])
    return reshaped.output[0]


@register(("QuantizeLinear", 19, 13), ("DequantizeLinear", 19, 13), kind="new feature")
def before_float8(node, ctx) -> None:
    check_types(node, ctx)
    if attribute(node, "saturate") is not None:  # only affects float8 outputs, refused above
        attr_value(node, ctx, "saturate")
        remove_attribute(node, "saturate")
        ctx.record("QuantizeLinear saturate dropped")


@register(("QuantizeLinear", 21, 19), ("DequantizeLinear", 21, 19), kind="new feature")
def before_blocks(node, ctx) -> None:
    """21 added blocks, output_dtype and 16-bit (and 4-bit) types; 16-bit x (DequantizeLinear) or
    output (QuantizeLinear) is rewritten as arithmetic (``quantize_arith``: exact, per tensor or
    per axis; QuantizeLinear for targets from 11)."""
    drop_default(node, ctx, "block_size", 0, 21, " (blocked quantization)")
    if _sixteen_bit(node, ctx):
        return
    if node.op_type == "QuantizeLinear" and attribute(node, "output_dtype") is not None:
        wanted = attr_value(node, ctx, "output_dtype", 0)
        remove_attribute(node, "output_dtype")
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


def _sixteen_bit(node, ctx) -> bool:
    """Rewrite a 16-bit node as arithmetic; False when it is not 16-bit."""
    what = "16-bit quantization exists only from opset 21"
    if node.op_type == "DequantizeLinear":
        if ctx.elem_type(node.input[0]) not in _SIXTEEN:
            return False
        dequantize_as_arithmetic(node, ctx, what)
        return True
    zero_point = node.input[2] if len(node.input) > 2 else ""
    out = ctx.elem_type(zero_point) if zero_point else attr_value(node, ctx, "output_dtype", 0)
    if out not in _SIXTEEN:
        return False
    wanted = attr_value(node, ctx, "output_dtype", 0)
    if wanted and wanted != out:
        ctx.block(f"output_dtype={_type_name(wanted)} with a zero point of type {_type_name(out)}")
    quantize_as_arithmetic(node, ctx, out, what)
    return True


_SIXTEEN = {t for t, (low, high) in BOUNDS.items() if high - low > 255}


@register("QuantizeLinear", 23, 21, kind="new feature")
def quantize_23_21(node, ctx) -> None:
    x, scale = ctx.elem_type(node.input[0]), ctx.elem_type(node.input[1])
    if x is None or x != scale:
        ctx.block(f"below opset 23 the scale must have x's type; x is {_type_name(x)}, the scale "
                  f"{_type_name(scale)}")
    _drop_type_attribute(node, ctx, "precision", x, "the scale's type")


@register("DequantizeLinear", 23, 21, kind="new feature")
def dequantize_23_21(node, ctx) -> None:
    scale = ctx.elem_type(node.input[1])
    _drop_type_attribute(node, ctx, "output_dtype", scale, f"the scale's type {_type_name(scale)}")


def _drop_type_attribute(node, ctx, name: str, expected: int, what: str) -> None:
    """Drop a type attribute of opset 23 (precision, output_dtype) that names ``expected``, the
    type the older schema implies; refuse one that names another."""
    wanted = attr_value(node, ctx, name, 0)
    if wanted and wanted != expected:
        ctx.block(f"{name}={_type_name(wanted)} differs from {what} ({name} exists only from opset 23)")
    remove_attribute(node, name)
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
