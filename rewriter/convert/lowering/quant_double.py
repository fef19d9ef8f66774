"""Integer convolutions written as a convolution in double (form "double" of a release's
``quantized_forms``: TVM 0.27 has no QLinearConv and no ConvInteger at any version):

- ConvInteger: Cast(x) - x_zero_point and the constant weight w - w_zero_point (folded, in its
  smallest integer type) Cast to double, Conv in double, Cast to int32. Every product
  (|.| <= 2^16) and every partial sum (|.| < 2^31, checked from the weight: K * 255 *
  max |w - zp|) is an integer below 2^53, so the double sum is exact in any order, FMA or
  blocking: the int32 accumulator ONNX Runtime's kernel computes.
- QLinearConv (quant_explicit.py): that accumulator, + the int32 bias, then ONNX Runtime's
  requantization as the "integer" form writes it.

A weight quantized at run time from a constant (quantize_dynamic of PaddleOCR's Constant weights:
DynamicQuantizeLinear) is Cast(w) - Cast(its zero point) in double, K read from the constant. A
node the form cannot be written for (another weight fed at run time, a zero point fed by another
op than DynamicQuantizeLinear, an accumulator that could wrap in int32) is refused by name
(:class:`Refused`, quant_explicit.rewrite_quantized)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from rewriter.graph import traversal
from rewriter.graph.constants import constant_value

__all__ = ["Refused", "conv_accumulator", "conv_integer", "double_convs"]
_D, _I32 = TensorProto.DOUBLE, TensorProto.INT32
_LIMIT = 2**31  # ONNX Runtime's int32 accumulator: a sum that could reach it is refused
_QTYPES = (np.dtype(np.uint8), np.dtype(np.int8))


class Refused(Exception):
    """A node whose form cannot be written."""


class Keep(Exception):
    """The node is computed as ONNX Runtime does as it is."""


def _shifted(w, name: str, zp) -> str:
    """Cast(name) to double, minus the zero point ``zp``: a constant (none when 0) or a value fed
    at run time (its name)."""
    v = w.op("Cast", [name], to=_D)
    if isinstance(zp, str):
        return w.op("Sub", [v, w.op("Cast", [zp], to=_D)])
    return v if not zp else w.op("Sub", [v, w.const(np.float64(zp), "zero_point")])


def conv_accumulator(w, x: str, zx, wv: np.ndarray, zw: np.ndarray, attrs: dict, out: str | None = None) -> str:
    """ConvInteger(x, wv, zx, zw)'s int32 result (its name) as Conv of (x - zx) and the constant
    weight wv - zw (per output channel when zw is a vector, in its smallest integer type) in
    double, Cast to int32; ``zx`` a constant or a name; refused when ONNX Runtime's int32 sum
    could wrap; written to ``out`` when given."""
    if wv.dtype not in _QTYPES or wv.ndim < 3:
        raise Refused(f"w of {wv.dtype} and rank {wv.ndim}: uint8 / int8 weights of a convolution are written out")
    if zw.size not in (1, wv.shape[0]):
        raise Refused(f"{zw.size} weight zero points for {wv.shape[0]} output channels")
    folded = wv.astype(np.int64) - zw.astype(np.int64).reshape((-1,) + (1,) * (wv.ndim - 1) if zw.size > 1 else ())
    if int(np.prod(wv.shape[1:])) * 255 * int(np.abs(folded).max(initial=0)) >= _LIMIT:
        raise Refused("its int32 accumulator could wrap (K * 255 * max |w - zp| >= 2^31), the double sum would not")
    t = next(t for t in (np.int8, np.uint8, np.int16) if np.iinfo(t).min <= folded.min() and folded.max() <= np.iinfo(t).max)
    wd = w.op("Cast", [w.const(folded.astype(t), "w")], to=_D)
    return w.op("Cast", [w.op("Conv", [_shifted(w, x, zx), wd], **attrs)], out, to=_I32)


def _zero_point(v, what: str) -> np.ndarray:
    if v.dtype not in _QTYPES or v.ndim > 1:
        raise Refused(f"{what} of {v.dtype} and shape {list(v.shape)}: uint8 / int8 zero points are written out")
    return v.reshape(-1).astype(np.int64)


def _run_time_k(name: str, scope, read) -> int | None:
    """K (input channels x kernel) of a weight quantized at run time from a constant (the
    DynamicQuantizeLinear / QuantizeLinear of it); None when not known here."""
    kind, producer, _ = traversal.definition(name, scope)
    if kind != "node" or producer.op_type not in ("DynamicQuantizeLinear", "QuantizeLinear"):
        return None
    v = constant_value(producer.input[0], scope, read)
    return None if v is None or v.ndim < 3 else int(np.prod(v.shape[1:]))


def _scalar_fed(name: str, scope) -> bool:
    """Whether ``name`` is the zero point a DynamicQuantizeLinear computes (a scalar)."""
    kind, producer, _ = traversal.definition(name, scope)
    return kind == "node" and producer.op_type == "DynamicQuantizeLinear" and list(producer.output[2:3]) == [name]


def conv_integer(node, scope, w, ranks: dict, form: str = "double") -> None:
    """ConvInteger(x, w, x_zero_point, w_zero_point) written as :func:`conv_accumulator` (``w.read``
    reads the constants; x_zero_point may be fed at run time: DynamicQuantizeLinear's), or, for a
    weight quantized at run time from a constant (PaddleOCR's Constant weights through
    DynamicQuantizeLinear), Cast(w) - Cast(w_zero_point) in double, its K read from the constant."""
    if form != "double":
        raise Refused(f"form {form!r}: ConvInteger is written in double only")
    given = [n if i < len(node.input) and n else None for i, n in enumerate([*node.input, "", ""][:4])]
    zx = given[2]
    if zx is not None and (v := constant_value(zx, scope, w.read)) is not None:
        if v.size != 1:
            raise Refused(f"x_zero_point of shape {list(v.shape)}: one per tensor is written out")
        zx = int(_zero_point(v, "x_zero_point")[0])
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    wv = constant_value(given[1], scope, w.read)
    zwv = None if given[3] is None else constant_value(given[3], scope, w.read)
    if given[3] is not None and zwv is None and (wv is not None or not _scalar_fed(given[3], scope)):
        raise Refused(f"w_zero_point ('{given[3]}') is fed at run time and not DynamicQuantizeLinear's scalar")
    if wv is not None:
        zw = np.zeros(1, np.int64) if zwv is None else _zero_point(zwv, "w_zero_point")
        conv_accumulator(w, given[0], zx or 0, wv, zw, attrs, node.output[0])
        return
    k = _run_time_k(given[1], scope, w.read)
    if k is None:
        raise Refused(f"w ('{given[1]}') is fed at run time, not quantized from a constant: its K is unknown here")
    if k * 255 * 255 >= _LIMIT:
        raise Refused("its int32 accumulator could wrap (K * 255 * 255 >= 2^31), the double sum would not")
    if zwv is not None and zwv.size != 1:
        raise Refused("a weight fed at run time with per-channel zero points")
    wd = _shifted(w, given[1], given[3] if zwv is None else int(_zero_point(zwv, "w_zero_point")[0]))
    w.op("Cast", [w.op("Conv", [_shifted(w, given[0], zx or 0), wd], **attrs)], node.output[0], to=_I32)


def double_convs(model, target) -> str | None:
    """Why ONNX Runtime cannot load ``model`` (a ``target`` conversion's result) for want of a
    kernel, not for a defect: it holds Conv nodes of this form (a Conv whose weight is a Cast to
    double, or a double constant once a target's rewrite folded that Cast), which its CPU provider
    has none for; None when it holds none."""
    n = 0
    for scope in traversal.iter_scopes(model):
        cast_to_double = {o for node in scope.body.node if node.op_type == "Cast"
                          and any(a.name == "to" and a.i == _D for a in node.attribute) for o in node.output}
        if not scope.is_function:
            cast_to_double |= {t.name for t in scope.body.initializer if t.data_type == _D}
        n += sum(node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in cast_to_double
                 for node in scope.body.node)
    if not n:
        return None
    return (f"{n} integer convolution(s) written as a Conv in double for {target} (exact there: ONNX Runtime's int32 "
            "sums), which ONNX Runtime's CPU provider has no kernel for")
