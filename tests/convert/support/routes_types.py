"""Routes of the expressibility oracle (see ``routes.py``) for nodes an older schema refuses only
because of a type, derived from ``onnx.defs`` type constraints and the operators' documented
semantics, independently of ``rewriter.convert``:

- **Max/Min** (integers from 12): integers of any width as ``Where(Less(a, b), a, b)`` chains
  where the target's Less and Where allow the type (Where exists from 9; Less takes integers
  from 9); integers a double holds exactly (up to 32 bits) as Max/Min on doubles between Casts
  where the target's Max takes double.
- **Clip** (integers from 12), ``Min(max, Max(x, min))``: no bound is an Identity; the same
  Where/Less route; or Clip on doubles for integers of up to 32 bits, where the bounds become
  float attributes below Clip-11 (then constant, scalar, exactly float32).
- **Pow** (mixed types and integer bases from 12): with a float base the target's Pow allows,
  the exponent in the base's type when that type holds its values exactly (a constant checked
  element by element, else every value of the exponent's type), or both through double when a
  double holds the exponent's values and the target's Pow takes double; an int32 base (which a
  double holds) likewise through double. An int64 base or a computed 64-bit exponent: none.
- **QuantizeLinear / DequantizeLinear** with 16-bit integers (from 21): DequantizeLinear as
  ``(float(x) - float(zero_point)) * scale`` (float32 holds every 16-bit value and difference)
  for a float/float16 scale, at targets that have DequantizeLinear (10); QuantizeLinear as
  ``Cast(Clip(Round(x / scale) + zero_point))`` for float x and scale, where the target has
  Round; per tensor, or per axis with a 1-D scale and x of known rank; no blocks.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs

__all__ = ["ROUTES"]

_T = onnx.TensorProto
_FLOATS = {_T.FLOAT16: np.float16, _T.FLOAT: np.float32, _T.DOUBLE: np.float64}
# the largest n such that every integer of magnitude <= n is exactly a value of the float type
_INTEGER_SPAN = {_T.FLOAT16: 2 ** 11, _T.FLOAT: 2 ** 24, _T.DOUBLE: 2 ** 53}


def _schema(op: str, opset: int):
    try:
        return onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None


def _type_str(elem: int) -> str:
    return "tensor(" + _T.DataType.Name(elem).lower() + ")"


def _allows(op: str, opset: int, elem: int, param: int = 0) -> bool:
    """Whether the schema of ``op`` in force at ``opset`` exists and its ``param``-th type
    constraint allows ``elem``."""
    s = _schema(op, opset)
    return s is not None and not s.deprecated and _type_str(elem) in s.type_constraints[param].allowed_type_strs


def _elem(types, name: str) -> int | None:
    t = types(name) if name else None
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.elem_type:
        return None
    return t.tensor_type.elem_type


def _rank(types, name: str) -> int | None:
    t = types(name) if name else None
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return len(t.tensor_type.shape.dim)


def _integer(elem) -> bool:
    return elem in (_T.INT8, _T.INT16, _T.INT32, _T.INT64, _T.UINT8, _T.UINT16, _T.UINT32, _T.UINT64)


def _type_fits(elem: int, float_elem: int) -> bool:
    """Whether every value of ``elem`` is exactly a value of the float type ``float_elem``."""
    if elem == float_elem:
        return True
    if _integer(elem):
        info = np.iinfo(onnx.helper.tensor_dtype_to_np_dtype(elem))
        return max(abs(int(info.min)), int(info.max)) <= _INTEGER_SPAN[float_elem]
    order = [_T.FLOAT16, _T.FLOAT, _T.DOUBLE]
    return elem in order and order.index(elem) <= order.index(float_elem)


def _values_fit(value: np.ndarray, float_elem: int) -> bool:
    """Whether every element of ``value`` is exactly a value of ``float_elem``."""
    value = np.asarray(value)
    if value.dtype.kind in "iu":
        return all(abs(int(v)) <= _INTEGER_SPAN[float_elem] or float(_FLOATS[float_elem](v)) == int(v)
                   for v in value.ravel().tolist())
    with np.errstate(all="ignore"):
        wide = value.astype(np.float64)
        narrow = wide.astype(_FLOATS[float_elem]).astype(np.float64)
    return bool(np.all((narrow == wide) | (np.isnan(wide) & np.isnan(narrow))))


def _exponent_fits(node, types, constants, float_elem: int) -> bool:
    name = node.input[1]
    value = constants(name)
    if value is not None:
        return _values_fit(value, float_elem)
    elem = _elem(types, name)
    return elem is not None and _type_fits(elem, float_elem)


def _where_route(elem: int, target: int) -> bool:
    return _allows("Less", target, elem) and _allows("Where", target, elem, 1)


# ------------------------------------------------------------------ the routes

def _extreme(node, source, target, types, constants):
    if target >= 12:
        return "not a type route"
    kinds = {_elem(types, n) for n in node.input if n}
    if len(kinds) != 1 or not _integer(next(iter(kinds))):
        return "not an integer Max/Min"
    elem = kinds.pop()
    if _where_route(elem, target):
        return None
    if _type_fits(elem, _T.DOUBLE) and _allows(node.op_type, target, _T.DOUBLE) and _allows("Cast", target, elem):
        return None
    return f"{node.op_type} on {_T.DataType.Name(elem).lower()} at opset {target}: no Where, and a double does not hold it"


def _clip(node, source, target, types, constants):
    if target >= 12:
        return "not a type route"
    elem = _elem(types, node.input[0])
    if not _integer(elem):
        return "not an integer Clip"
    bounds = [n for n in node.input[1:3] if n]
    if not bounds:
        return None  # an Identity
    if _where_route(elem, target):
        return None
    if not (_type_fits(elem, _T.DOUBLE) and _allows("Clip", target, _T.DOUBLE)):
        return "no Where, and a double does not hold the type"
    if any(p.name == "min" for p in _schema("Clip", target).inputs):
        return None
    for name in bounds:  # float attributes below 11
        value = constants(name)
        if value is None or np.asarray(value).size != 1:
            return f"bound '{name}' is not a constant scalar"
        if not _values_fit(np.asarray(value).astype(np.float64), _T.FLOAT):
            return f"bound '{name}' is not exactly a float32"
    return None


def _pow(node, source, target, types, constants):
    if target >= 12:
        return "not a type route"
    base = _elem(types, node.input[0])
    if base is None or _elem(types, node.input[1]) is None:
        return "unknown types"
    if base in _FLOATS and _allows("Pow", target, base) and _exponent_fits(node, types, constants, base):
        return None
    if (base in _FLOATS or base == _T.INT32) and _allows("Pow", target, _T.DOUBLE) and \
            _exponent_fits(node, types, constants, _T.DOUBLE):
        return None
    return "no float type of the target's Pow holds both the base and the exponent exactly"


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _per_axis_ok(node, types) -> bool:
    scale_rank = _rank(types, node.input[1])
    if scale_rank == 0:
        return True
    return scale_rank == 1 and _rank(types, node.input[0]) is not None


def _dequantize(node, source, target, types, constants):
    if target >= 21 or source < 21:
        return "not a type route"
    x, scale = _elem(types, node.input[0]), _elem(types, node.input[1])
    if x not in (_T.INT16, _T.UINT16) or scale not in (_T.FLOAT, _T.FLOAT16) or _schema(node.op_type, target) is None:
        return "not a 16-bit DequantizeLinear with a float/float16 scale, at a target that has DequantizeLinear"
    if _attr(node, "block_size", 0) or _attr(node, "output_dtype", 0) not in (0, scale):
        return "blocked, or an output_dtype other than the scale's"
    return None if _per_axis_ok(node, types) else "the scale is not 0-D or 1-D with x of known rank"


def _quantize(node, source, target, types, constants):
    if target >= 21 or source < 21:
        return "not a type route"
    zero_point = node.input[2] if len(node.input) > 2 else ""
    out = _elem(types, zero_point) if zero_point else _attr(node, "output_dtype", 0)
    if out not in (_T.INT16, _T.UINT16) or _schema("Round", target) is None:
        return "not a 16-bit QuantizeLinear, or no Round at the target"
    if _elem(types, node.input[0]) != _T.FLOAT or _elem(types, node.input[1]) != _T.FLOAT:
        return "x and scale are not float"
    if _attr(node, "block_size", 0) or _attr(node, "precision", 0) not in (0, _T.FLOAT) \
            or _attr(node, "output_dtype", 0) not in (0, out):
        return "blocked, another precision, or a conflicting output_dtype"
    return None if _per_axis_ok(node, types) else "the scale is not 0-D or 1-D with x of known rank"


ROUTES: dict = {"Max": _extreme, "Min": _extreme, "Clip": _clip, "Pow": _pow,
                "DequantizeLinear": _dequantize, "QuantizeLinear": _quantize}
