"""DequantizeLinear forms of a release's ``quantized_forms`` (quant_explicit.rewrite_quantized):

- "fold_blocks": a blocked DequantizeLinear (``block_size``) of constant inputs as its float
  value (what MatMulNBits' lowering writes below opset 21, for a runtime without blocks); one
  without blocks stays as it is.
- "cast_and_scale": also every other DequantizeLinear of uint8 / int8 / uint16 / int16 / int32
  codes with a constant float32 scale and zero point, written as ONNX Runtime's kernel computes
  it: ``float(x - zp) * scale`` (8 and 16 bits: Cast(x) - float(zp), exact; int32: the
  difference in int32, then Cast), one float32 product; codes that are constant are folded to
  that value. For a runtime whose converter computes
  DequantizeLinear otherwise after some ops (onnx2tf: a Concat of codes, dequantized, gives zeros).
  Codes of other types, a scale or zero point fed at run time stay as they are.

A node whose float value cannot be written (a per-axis scale on an input of unknown rank) is
refused by name (:class:`Refused`)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from rewriter.convert.lowering.quant_double import Keep, Refused
from rewriter.graph.constants import constant_value

__all__ = ["dequantize"]
_F32 = TensorProto.FLOAT
_EXACT_IN_FLOAT = (np.uint8, np.int8, np.uint16, np.int16)  # every difference of two codes is a float32


def _input(w, node, i: int, scope):
    """The constant value of input i (None when missing or fed at run time)."""
    if i >= len(node.input) or not node.input[i]:
        return None
    return constant_value(node.input[i], scope, w.read)


def _fold(w, node, value: np.ndarray) -> None:
    w.op("Identity", [w.const(value.astype(np.float32), "dequantized")], node.output[0])


def _blocked(node, scope, w, attrs: dict, block: int) -> None:
    x, scale, zp = (_input(w, node, i, scope) for i in range(3))
    if x is None or scale is None or (zp is None and len(node.input) > 2 and node.input[2]):
        raise Refused("a blocked DequantizeLinear fed at run time: the written form needs it constant")
    if scale.dtype != np.float32:
        raise Refused(f"x_scale of {scale.dtype}: float32 is folded")
    axis = int(attrs.get("axis", 1)) % x.ndim
    steps = np.minimum(np.arange(x.shape[axis]) // block, scale.shape[axis] - 1)
    codes = x.astype(np.int64) - (0 if zp is None else np.take(zp.astype(np.int64), steps, axis=axis))
    _fold(w, node, codes.astype(np.float32) * np.take(scale, steps, axis=axis))


def _broadcast(v: np.ndarray, axis: int, rank: int | None) -> np.ndarray:
    """A per-axis vector shaped to broadcast along ``axis`` of an input of ``rank``."""
    if v.size == 1 and v.ndim <= 1:
        return v.reshape(())
    if rank is None:
        raise Refused("a per-axis scale on an input of unknown rank")
    if not -rank <= axis < rank:
        raise Refused("the axis is outside the input's rank")
    return v.reshape(tuple(v.size if i == axis % rank else 1 for i in range(rank)))


def _scaled(node, scope, w, ranks: dict, axis: int) -> None:
    scale = _input(w, node, 1, scope)
    zp = _input(w, node, 2, scope)
    if scale is None or scale.dtype != np.float32 or (zp is None and len(node.input) > 2 and node.input[2]):
        raise Keep
    codes_type = zp.dtype if zp is not None else ranks.get(node.input[0], (None, None))[0]
    codes_type = helper.tensor_dtype_to_np_dtype(codes_type) if isinstance(codes_type, int) else codes_type
    if codes_type is None or np.dtype(codes_type) not in [np.dtype(t) for t in (*_EXACT_IN_FLOAT, np.int32)]:
        raise Keep
    x = _input(w, node, 0, scope)
    if x is not None:
        shift = 0 if zp is None else _broadcast(zp.astype(np.int64), axis, x.ndim)
        _fold(w, node, (x.astype(np.int64) - shift).astype(np.float32) * _broadcast(scale, axis, x.ndim))
        return
    rank = ranks.get(node.input[0], (None, None))[1]
    scale_b = _broadcast(scale, axis, rank)
    zp_b = None if zp is None or not np.any(zp) else _broadcast(zp, axis, rank)
    v = node.input[0]
    if np.dtype(codes_type) == np.int32:
        v = v if zp_b is None else w.op("Sub", [v, w.const(zp_b, "zp")])
        v = w.op("Cast", [v], to=_F32)
    else:
        v = w.op("Cast", [v], to=_F32)
        v = v if zp_b is None else w.op("Sub", [v, w.const(zp_b.astype(np.float32), "zp")])
    w.op("Mul", [v, w.const(scale_b, "scale")], node.output[0])


def dequantize(node, scope, w, ranks: dict, form: str = "fold_blocks") -> None:
    """DequantizeLinear ``node`` in ``form`` (module doc), its nodes added to ``w``
    (quant_explicit's writer); raises Keep to leave it as it is, Refused to name it."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    block = int(attrs.get("block_size", 0))
    if block:
        _blocked(node, scope, w, attrs, block)
    elif form == "cast_and_scale":
        _scaled(node, scope, w, ranks, int(attrs.get("axis", 1)))
    else:
        raise Keep
