"""Exact routes for nodes that an older schema refuses only because of a type: Max/Min across
12 (integers from 12), Pow across 12 (the exponent got its own type; integers base from 12),
MaxPool across 12 (int8/uint8 from 12).
Clip's integer route (also 12) is in ``clip.py`` and uses :func:`where_extreme` from here.

- Max/Min 12 -> 8: integers of up to 32 bits go through double (Cast there and back: a double
  holds every such value, so both casts are exact); int64/uint64, which a double does not hold,
  as ``Where(Less(a, b), a, b)`` (Min) / ``Where(Less(a, b), b, a)`` (Max) chained over the
  inputs, written for the target (Less takes every integer type and Where exists from opset 9;
  below 9 refused). Comparison and selection are exact on integers, and both Less and Where
  broadcast multidirectionally as Max/Min-8 do, so the chain has Max/Min's shape.
- Pow 12 -> 7: see :func:`pow_12_7`.
- MaxPool 12 -> 11 on int8/uint8: through float32 (see :func:`maxpool_12_11`).
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.elementwise import dims
from rewriter.convert.adapters.feature_support import add_typed_constant, check_types, record_type
from rewriter.convert.registry import register
from rewriter.graph.attributes import CALLER_SET, attribute_values

__all__ = ["where_extreme", "cast_to", "compute_as", "broadcast_dims", "type_name", "EXACT_IN_DOUBLE", "WIDE_INTEGERS"]

_T = onnx.TensorProto
EXACT_IN_DOUBLE = frozenset({_T.INT8, _T.INT16, _T.INT32, _T.UINT8, _T.UINT16, _T.UINT32})
WIDE_INTEGERS = frozenset({_T.INT64, _T.UINT64})
_FLOATS = (_T.FLOAT16, _T.FLOAT, _T.DOUBLE)
_MAX_8 = frozenset(onnx.defs.get_schema("Max", 8).type_constraints[0].allowed_type_strs)


def type_name(elem) -> str:
    """``int64`` for TensorProto.INT64 (``unknown`` for None/0)."""
    return onnx.helper.tensor_dtype_to_string(elem).split(".")[-1].lower() if elem else "unknown"


def broadcast_dims(a: list | None, b: list | None) -> list | None:
    """The dims of numpy broadcasting of ``a`` and ``b`` (None entries: unknown), None when a
    rank is unknown."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    return [y if x == 1 else x if y == 1 or x == y else None for x, y in zip(a, b)]


def cast_to(ctx, name: str, elem: int) -> str:
    """Insert Cast(name, to=elem) (valid at the step's destination) and return its output."""
    cast = ctx.insert_before("Cast", [name], to=elem).output[0]
    record_type(ctx, cast, elem, dims(ctx, name))
    return cast


def compute_as(node, ctx, inputs: list[str], elem: int) -> None:
    """The node's op on ``inputs`` (of type ``elem``), inserted before it (valid at the step's
    destination, converted onward by the engine); the node itself becomes the Cast of that
    result back to its output's type, so it keeps its name and outputs."""
    out = ctx.elem_type(node.output[0]) or ctx.elem_type(node.input[0])
    inner = ctx.insert_before(node.op_type, inputs).output[0]
    record_type(ctx, inner, elem, dims(ctx, node.output[0]))
    del node.input[:]
    del node.attribute[:]
    node.op_type = "Cast"
    node.input.append(inner)
    node.attribute.append(onnx.helper.make_attribute("to", out))


def where_extreme(ctx, a: str, b: str, largest: bool, elem: int, out: str | None = None) -> str:
    """Insert (for the target) ``Where(Less(a, b), b, a)`` (largest) or ``Where(Less(a, b), a, b)``
    and return its output (``out`` when given): the larger / smaller of a and b, broadcast."""
    at = ctx.insert_before_at_target
    shape = broadcast_dims(dims(ctx, a), dims(ctx, b))
    less = at("Less", [a, b]).output[0]
    record_type(ctx, less, _T.BOOL, shape)
    where = at("Where", [less, b, a] if largest else [less, a, b], [out] if out else 1).output[0]
    record_type(ctx, where, elem, shape)
    return where


def _extreme_12_8(node, ctx) -> None:
    """Max/Min-8 take floats only (integers from 12); see the module doc for the two routes."""
    elem = ctx.elem_type(node.output[0]) or ctx.elem_type(node.input[0])
    if elem is None:
        ctx.block(f"the type of '{node.input[0]}' is unknown, and {node.op_type}-8 takes floats only")
    if "tensor(" + type_name(elem) + ")" in _MAX_8:
        return
    if elem in WIDE_INTEGERS:
        if ctx.final_opset is None or ctx.final_opset < 9:
            ctx.block(f"{node.op_type} on {type_name(elem)} exists only from opset 12; a double does not hold every "
                      f"{type_name(elem)} exactly, and the exact route Where(Less(a, b), ...) needs Where, which "
                      f"exists only from opset 9")
        original, inputs = node.output[0], list(node.input)
        if len(inputs) == 1:
            ctx.insert_before_at_target("Identity", inputs, [original])
        acc = inputs[0]
        for k, other in enumerate(inputs[1:]):
            acc = where_extreme(ctx, acc, other, node.op_type == "Max", elem,
                                original if k == len(inputs) - 2 else None)
        ctx.remove()
        ctx.record(f"{node.op_type} on 64-bit integers -> Where/Less")
        return
    if elem not in EXACT_IN_DOUBLE:
        ctx.block(f"{node.op_type} on {type_name(elem)} exists only from opset 12")
    compute_as(node, ctx, [cast_to(ctx, name, _T.DOUBLE) for name in node.input], _T.DOUBLE)
    ctx.record(f"{node.op_type} on integers -> through double")


def _types_added(node, ctx) -> None:
    """The newer version only added types."""


for _op in ("Max", "Min"):
    register(_op, 12, 8, kind="type-only")(_extreme_12_8)
    register(_op, 8, 12, kind="type-only")(_types_added)


# ------------------------------------------------------------------ Pow

def _holds(wide: int, narrow: int) -> bool:
    """Whether every value of type ``narrow`` is exactly a value of the float type ``wide``."""
    if wide == narrow:
        return True
    w = np.finfo(onnx.helper.tensor_dtype_to_np_dtype(wide))
    if narrow == _T.BFLOAT16:
        return wide in (_T.FLOAT, _T.DOUBLE)
    n = onnx.helper.tensor_dtype_to_np_dtype(narrow)
    if n.kind in "iu":
        i = np.iinfo(n)
        return max(-int(i.min), int(i.max)) <= 2 ** (w.nmant + 1)
    if n.kind == "f":
        f = np.finfo(n)
        return f.nmant <= w.nmant and f.maxexp <= w.maxexp and f.minexp >= w.minexp
    return False


def _exact_as(value: np.ndarray, elem: int) -> bool:
    """Whether every element of ``value`` is exactly a value of the float type ``elem``."""
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    with np.errstate(all="ignore"):
        cast = value.astype(dtype)
    if value.dtype.kind in "iu":
        return all(np.isfinite(c) and int(c) == int(v) for v, c in zip(value.ravel().tolist(), cast.ravel().tolist()))
    back = cast.astype(value.dtype)
    return bool(np.array_equal(back, value, equal_nan=True))


def _exponent_as(node, ctx, elem: int) -> bool:
    """Make Pow's exponent of type ``elem`` when that is exact for its values (a constant:
    element by element; else: every value of its type); False when it is not."""
    name = node.input[1]
    value = ctx.constant(name)
    if value is not None:
        value = np.asarray(value)
        if not _exact_as(value, elem):
            return False
        node.input[1] = add_typed_constant(ctx, f"{name}_{type_name(elem)}",
                                           value.astype(onnx.helper.tensor_dtype_to_np_dtype(elem)))
        ctx.maybe_unused(name)
        return True
    if not _holds(elem, ctx.elem_type(name)):
        return False
    cast = ctx.insert_before("Cast", [name], to=elem)
    record_type(ctx, cast.output[0], elem, dims(ctx, name))
    node.input[1] = cast.output[0]
    return True


@register("Pow", 7, 12, kind="type-only")
def pow_7_12(node, ctx) -> None:
    """12 gave the exponent its own type parameter: every Pow-7 node is a Pow-12 node."""


@register("Pow", 12, 7, kind="type-only")
def pow_12_7(node, ctx) -> None:
    """Pow-7 takes base and exponent of one float type. Other pairings (exact for the values):

    - float base, exponent of another type: the exponent in the base's type when that type
      holds its values exactly (a constant, checked element by element, becomes a constant of
      the base's type; a computed one is Cast when its type's every value fits: int8/uint8 in
      float16, 16-bit integers in float, 32-bit ones in double, float16 in float): the same
      x^e, rounded by the target's Pow of that type (as numpy computes float32 ** int16).
      Otherwise, when a double holds the exponent's values (32-bit integers, or a constant
      checked likewise), through double: Cast(Pow(Cast(x, double), Cast(e, double)), T), which
      is what numpy (the ONNX reference) and ONNX Runtime compute for such pairings. A
      computed 64-bit integer exponent is refused (no float type holds every value: 2**53 + 1
      is odd, its double is even, and the sign of (-1)**e depends on it).
    - int32 base: through double (exact for every int32 base and exponent values as above);
      pow of values whose result is an integer that fits int32 is exact in double, and the
      final Cast truncates toward zero, as the reference's and ONNX Runtime's integer Pow do;
      where the result overflows int32 runtimes disagree (overflow is undefined).
    - int64 base: refused (a double does not hold every int64).
    """
    base, exponent = node.input[0], node.input[1]
    tb, te = ctx.elem_type(base), ctx.elem_type(exponent)
    if tb is None or te is None:
        ctx.block("below opset 12 the base and the exponent must have one type; here the type of "
                  f"'{base if tb is None else exponent}' is unknown")
    if tb == te and tb in _FLOATS:
        return
    if tb in _FLOATS and _exponent_as(node, ctx, tb):
        ctx.record("Pow exponent -> the base's type")
        check_types(node, ctx)
        return
    if tb not in _FLOATS and tb != _T.INT32:
        ctx.block(f"below opset 12 Pow takes floats only, and a double does not hold every {type_name(tb)} "
                  f"base exactly")
    if not _exponent_as(node, ctx, _T.DOUBLE):
        ctx.block(f"below opset 12 the base and the exponent must have one type (a float type), and neither "
                  f"{type_name(tb)} nor double holds every value of the {type_name(te)} exponent '{exponent}' "
                  f"exactly{'' if ctx.constant(exponent) is None else ' (checked element by element)'}")
    if tb != _T.DOUBLE:
        compute_as(node, ctx, [cast_to(ctx, base, _T.DOUBLE), node.input[1]], _T.DOUBLE)
        ctx.record(f"Pow of {type_name(tb)} ** {type_name(te)} -> through double")
        return
    ctx.record(f"Pow of {type_name(tb)} ** {type_name(te)} -> through double")
    check_types(node, ctx)  # a double base: the node stays Pow


# ------------------------------------------------------------------ MaxPool

@register("MaxPool", 12, 11, kind="type-only")
def maxpool_12_11(node, ctx) -> None:
    """MaxPool-11 takes floats only (int8/uint8 from 12; QOperator quantization leaves MaxPool on
    uint8): an 8-bit MaxPool goes through float32, ``Cast(MaxPool(Cast(x, float)), x's type)``.
    Exact where every window holds an element of x: float32 holds every 8-bit value, the max of a
    window is one of its values, and the Cast back of that value is exact. A window of padding
    only would be -inf in float and the type's lowest value in 8 bits; with the default dilations,
    floor mode and every pad smaller than the kernel no window is, so only those are taken.
    Indices (the optional second output) are refused: another kernel may break ties otherwise."""
    elem = ctx.elem_type(node.input[0]) or ctx.elem_type(node.output[0])
    if elem in _FLOATS:
        return
    if elem not in (_T.INT8, _T.UINT8):
        ctx.block(f"MaxPool-11 takes floats only; the type of '{node.input[0]}' is {type_name(elem)}")
    what = f"MaxPool on {type_name(elem)} exists only from opset 12; the route through float takes"
    if len(node.output) > 1 and node.output[1]:
        ctx.block(f"{what} no Indices output (another kernel may break ties between equal values otherwise)")
    attrs = attribute_values(node)
    if any(v is CALLER_SET for v in attrs.values()):
        ctx.block(f"{what} attributes the conversion can see (one comes from the calling function)")
    kernel, pads = list(attrs.get("kernel_shape", [])), list(attrs.get("pads", []))
    if attrs.get("ceil_mode", 0) or any(d != 1 for d in attrs.get("dilations", [])) or \
            any(p >= kernel[i % len(kernel)] for i, p in enumerate(pads)) or \
            attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        ctx.block(f"{what} floor mode, dilations of 1, explicit pads smaller than the kernel (so that no window "
                  f"is padding only)")
    wide = cast_to(ctx, node.input[0], _T.FLOAT)
    inner = ctx.insert_before("MaxPool", [wide], **attrs).output[0]
    record_type(ctx, inner, _T.FLOAT, dims(ctx, node.output[0]))
    del node.input[:]
    del node.attribute[:]
    del node.output[1:]
    node.op_type = "Cast"
    node.input.append(inner)
    node.attribute.append(onnx.helper.make_attribute("to", elem))
    ctx.record("MaxPool on 8-bit integers -> through float")


register("MaxPool", 11, 12, kind="type-only")(_types_added)
