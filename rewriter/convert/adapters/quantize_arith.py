"""QuantizeLinear / DequantizeLinear written as arithmetic, for the steps of ``quantize.py`` that
an older schema cannot take as the op: per-axis scales below 13, 16-bit integers below 21.
No adapter is registered here; each function states when it is exact and refuses otherwise.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, record_type

__all__ = ["BOUNDS", "dequantize_as_arithmetic", "quantize_as_arithmetic"]

_T = onnx.TensorProto
# the quantized integer types and their saturation bounds
BOUNDS = {_T.UINT8: (0, 255), _T.INT8: (-128, 127), _T.UINT16: (0, 65535), _T.INT16: (-32768, 32767)}


def _type_name(elem) -> str:
    return onnx.helper.tensor_dtype_to_string(elem).split(".")[-1].lower() if elem else "unknown"


def _input(node, i: int) -> str:
    return node.input[i] if len(node.input) > i else ""


def _layout(node, ctx, what: str) -> list[int] | None:
    """None for a per-tensor (0-D) scale; for a 1-D one, the trailing dims of 1 after the axis
    that make it broadcast along the axis (needs x's rank)."""
    rank = ctx.rank(node.input[1])
    if rank == 0:
        return None
    x_rank = ctx.rank(node.input[0])
    if rank != 1 or x_rank is None:
        ctx.block(f"{what}: scale '{node.input[1]}' is {'of unknown rank' if rank is None else f'{rank}-D'}"
                  f"{'' if rank != 1 else ' and the rank of x is unknown'}; the rewrite takes a scalar scale, or "
                  f"a 1-D one with x of known rank")
    axis = attr_value(node, ctx, "axis", 1)
    if not -x_rank <= axis < x_rank:
        ctx.block(f"axis {axis} is out of range for rank {x_rank}")
    return [1] * (x_rank - 1 - axis % x_rank)


def _float_column(ctx, name: str, trailing: list[int] | None, insert) -> str:
    """``name`` (a scale or zero point) as float32, shaped [-1, 1, ...] to broadcast along the
    axis when ``trailing`` is a list: a constant when it is one, else Cast (+ Reshape)."""
    shape = None if trailing is None else [-1] + trailing
    value = ctx.constant(name)
    if value is not None:
        ctx.maybe_unused(name)
        value = np.asarray(value).astype(np.float32)
        return add_typed_constant(ctx, f"{name}_float", value if shape is None else value.reshape(shape))
    if ctx.elem_type(name) != _T.FLOAT:
        cast = insert("Cast", [name], to=_T.FLOAT).output[0]
        record_type(ctx, cast, _T.FLOAT, ctx.shape(name))
        name = cast
    if shape is None:
        return name
    reshaped = insert("Reshape", [name, add_typed_constant(ctx, "q_axis_shape", np.array(shape, np.int64))]).output[0]
    record_type(ctx, reshaped, _T.FLOAT, None)
    return reshaped


def _zero(ctx, name: str) -> bool:
    """Whether zero point ``name`` is absent or a constant of zeros."""
    value = ctx.constant(name) if name else None
    return not name or value is not None and not np.any(np.asarray(value))


def _become(node, op: str, inputs: list[str], **attrs) -> None:
    del node.input[:]
    del node.attribute[:]
    node.op_type = op
    node.input.extend(inputs)
    for k, v in attrs.items():
        node.attribute.append(onnx.helper.make_attribute(k, v))


def dequantize_as_arithmetic(node, ctx, what: str) -> None:
    """DequantizeLinear (block_size 0) as ``(Cast(x, float) - Cast(zero_point, float)) * scale``,
    a 1-D scale and zero point reshaped to broadcast along the axis; the node becomes the Mul
    (or, for a float16 scale, the Cast of the float32 product to float16). Inserted nodes are
    valid at the step's destination (Cast, Sub, Mul, Reshape exist from opset 5/7).

    Exact when x is 8- or 16-bit: float32 holds every such value and every difference of two
    (|x - zp| <= 65535 < 2**24), so only the product rounds, once, as DequantizeLinear (and the
    ONNX reference, in float32) does; a float16 scale is widened exactly, and the float32 product
    rounded to float16, as the reference does. int32 x (quantized biases) only with an absent or
    all-zero zero point: float(x) * scale is then what the reference and ONNX Runtime compute (x
    rounded to float32 once, the product once). ``what`` starts the refusal messages."""
    x, zero_point = node.input[0], _input(node, 2)
    elem, scale_elem = ctx.elem_type(x), ctx.elem_type(node.input[1])
    if elem not in BOUNDS and not (elem == _T.INT32 and _zero(ctx, zero_point)):
        ctx.block(f"{what}: the rewrite as Cast/Sub/Mul takes 8- or 16-bit x (int32 only with a zero zero point); "
                  f"x is {_type_name(elem)}")
    if scale_elem not in (_T.FLOAT, _T.FLOAT16):
        ctx.block(f"{what}: the rewrite as Cast/Sub/Mul takes a float or float16 scale; it is {_type_name(scale_elem)}")
    trailing = _layout(node, ctx, what)
    insert = ctx.insert_before
    values = insert("Cast", [x], to=_T.FLOAT).output[0]
    record_type(ctx, values, _T.FLOAT, ctx.shape(x))
    if not _zero(ctx, zero_point):
        values = insert("Sub", [values, _float_column(ctx, zero_point, trailing, insert)]).output[0]
        record_type(ctx, values, _T.FLOAT, ctx.shape(x))
    scale = _float_column(ctx, node.input[1], trailing, insert)
    if scale_elem == _T.FLOAT16:
        values = insert("Mul", [values, scale]).output[0]
        record_type(ctx, values, _T.FLOAT, ctx.shape(x))
        _become(node, "Cast", [values], to=_T.FLOAT16)
    else:
        _become(node, "Mul", [values, scale])
    ctx.record(f"{'per-axis' if trailing is not None else '16-bit'} DequantizeLinear -> Cast/Sub/Mul")


def quantize_as_arithmetic(node, ctx, out: int, what: str, targets: str = "from 11") -> None:
    """QuantizeLinear (block_size 0) of float32 x with a float32 scale as
    ``Cast(Clip(Round(x / scale) + zero_point, lo, hi), out)``, a 1-D scale and zero point
    reshaped to broadcast along the axis; the node becomes the Cast. Written for the target,
    which must be 11 or later (Round exists from 11).

    Exact for the 8- and 16-bit types: the same float32 division, the same rounding (Round:
    half to even, as QuantizeLinear), and adding the zero point (|zp| <= 65535) to the rounded
    value is exact in float32 wherever the result is not saturated anyway (below 2**24 in
    magnitude every integer is a float32); Clip to the type's bounds is QuantizeLinear's
    saturation, and the Cast of an integer-valued float in range is exact. ``what`` starts the
    refusal messages, ``targets`` names the targets the rewrite serves."""
    x, zero_point = node.input[0], _input(node, 2)
    if ctx.final_opset is None or ctx.final_opset < 11:
        ctx.block(f"{what} (rewritten with Round, which exists from opset 11, for targets {targets})")
    if ctx.elem_type(x) != _T.FLOAT or ctx.elem_type(node.input[1]) != _T.FLOAT or out not in BOUNDS:
        ctx.block(f"{what} (rewritten with Div/Round/Add/Clip/Cast only for float x and scale and an 8- or "
                  f"16-bit integer output; here x is {_type_name(ctx.elem_type(x))}, the scale "
                  f"{_type_name(ctx.elem_type(node.input[1]))}, the output {_type_name(out)})")
    trailing = _layout(node, ctx, what)
    at = ctx.insert_before_at_target

    def op(kind: str, inputs: list[str]) -> str:
        made = at(kind, inputs).output[0]
        record_type(ctx, made, _T.FLOAT, ctx.shape(x))
        return made

    values = op("Round", [op("Div", [x, _float_column(ctx, node.input[1], trailing, at)])])
    if not _zero(ctx, zero_point):
        values = op("Add", [values, _float_column(ctx, zero_point, trailing, at)])
    low, high = BOUNDS[out]
    values = op("Clip", [values, add_typed_constant(ctx, "q_min", np.array(low, np.float32)),
                         add_typed_constant(ctx, "q_max", np.array(high, np.float32))])
    _become(node, "Cast", [values], to=out)
    ctx.record(f"{'per-axis' if trailing is not None else '16-bit'} QuantizeLinear -> Div/Round/Add/Clip/Cast")
