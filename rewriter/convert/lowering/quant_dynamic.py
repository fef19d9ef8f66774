"""DynamicQuantizeLinear written as ONNX Runtime computes it, with only ops a runtime whose float32
division is not correctly rounded (OpenVINO: x * (1 / s)) still computes exactly: Mul, Add, Sub
(correctly rounded, never contracted into an FMA), comparisons, Where, Gather, Clip, Cast, Min /
Max, ReduceMin / ReduceMax (form "exact_residual" of a release's ``quantized_forms``).

ONNX Runtime (``GetQuantizationParameter``, ``MlasQuantizeLinear``), uint8: min = min(min(x), 0),
max = max(max(x), 0); scale = max == min ? 1 : (max - min) / 255; zero point = RNE(clamp(0 - min /
scale, 0, 255)); codes = clamp(RNE(x / scale) + zero point, 0, 255), every division in float32,
correctly rounded. Here:

- scale: q = r * fl(1/255) (r = max - min) is within one ulp of r / 255; its residual r - 255 q =
  (r - 256 q) + q is exact (Sterbenz, twice), and q + fl(residual * fl(1/255)) rounds to RN(r / 255)
  (a quotient by 255 is at least ulp / 510 away from a midpoint; checked over every float32 r of
  two binades in the tests).
- zero point and codes, RNE(RN(v / s)) for an integer result: a candidate k = Round(v / s) (any
  division within a few ulps), then the exact sign of v - t * s decides whether RN(v / s) rounds
  past k + 1/2 (or k - 1/2): t is the half-integer moved by half the float gap beside it (towards
  the half-integer's rounding side: ties to even at the float rounding, then at the integer one;
  a table read by Gather), t * s = h * s_hi + h * s_lo + d * s with s split by Veltkamp (4097) so
  that each product is exact, and the three subtractions are exact whenever the sign is in doubt.
- r, x and the zero point's -min are first scaled by a power of two (2^100 for r < 2^-60, 2^-64
  for r > 2^60), so that no step meets a subnormal or an overflow; the scale output is scaled back.

Not reproduced: a NaN in x (ONNX Runtime's min / max then depend on its SIMD lane order: 2,036 of
3,000 random tensors with NaNs gave a scale neither ignoring nor propagating them; here a NaN is
taken as 0 and its code is 0) and max - min < 2^-118 (ONNX Runtime's scale is then a subnormal,
rounded at subnormal precision). max - min = inf (an infinite x or an overflow) gives ONNX
Runtime's scale inf, zero point 255 when min is -inf else 0, codes 0 for +-inf, else the zero point.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rewriter.convert.lowering.quant_double import Keep, Refused

__all__ = ["EXACT_BEFORE", "FORM", "KEPT", "dynamic_quantize", "half_offsets", "inexact_source"]

FORM = "exact_residual"
# a release that computes DynamicQuantizeLinear itself as ONNX Runtime does, but the float ops before
# it within ulps (tract 0.23, TVM 0.27): the node stays where its x is exact, else it is a blocker
KEPT = "kept_if_exact_input"
_F32, _I64, _U8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT8
_K = 300  # candidates are clipped to [-K, K]: |2k +- 1| < 2^10, so h * s_hi and h * s_lo are exact
_SMALL, _LARGE = np.float32(2.0 ** -60), np.float32(2.0 ** 60)
_UP_SMALL, _DOWN_LARGE = 2.0 ** 100, 2.0 ** -64
# ops whose every output element a runtime computes exactly as ONNX Runtime does (one correct rounding
# or none): DynamicQuantizeLinear's x computed by these only, from graph inputs and constants, is ONNX
# Runtime's x; any other float op before it (Sigmoid, Div, Softmax, float MatMul / Conv sums, ...)
# is computed within ulps of it, and the codes follow x (measured: bench/bench_runtime_targets.py --only
# _dyn: nudenet_320n_dyn, piper_tashkeel_dyn, ppocr_mobile_cls_dyn and two dynamic BERTs WRONG in
# OpenVINO 2026.4 with every DynamicQuantizeLinear exact)
EXACT_BEFORE = frozenset({
    "Add", "Sub", "Mul", "Neg", "Abs", "Relu", "Max", "Min", "Clip", "Where", "Not", "And", "Or", "Equal", "Less",
    "Greater", "LessOrEqual", "GreaterOrEqual", "IsNaN", "IsInf", "Sign", "Floor", "Ceil", "Reshape", "Transpose",
    "Slice", "Concat", "Split", "Squeeze", "Unsqueeze", "Expand", "Gather", "GatherElements", "Identity", "Flatten",
    "Tile", "Shape", "Size", "Constant", "ConstantOfShape", "ReduceMax", "ReduceMin", "MatMulInteger",
    "ConvInteger", "DynamicQuantizeLinear", "Cast"})
_FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)


def half_offsets() -> tuple[np.ndarray, np.ndarray]:
    """(up, down), float32 [2K + 1], indexed by k + K: RNE(RN(v / s)) > k iff v / s > (k + 1/2) + up[k],
    and < k iff v / s < (k - 1/2) + down[k]. A quotient exactly at k + 1/2 +- half a gap is never
    met (it would need 25 bits); RN rounds a quotient within half a gap of the half-integer h to h
    (its significand is even), and then RNE to the even integer beside it."""
    k = np.arange(-_K, _K + 1, dtype=np.float32)
    odd = (np.abs(k) % 2) == 1

    def gaps(h):
        below = (h - np.nextafter(h, np.float32(-np.inf))) / 2
        above = (np.nextafter(h, np.float32(np.inf)) - h) / 2
        return below.astype(np.float32), above.astype(np.float32)

    below, above = gaps(k + np.float32(0.5))  # k odd: the tie k + 1/2 goes up to k + 1 (even)
    up = np.where(odd, -below, above).astype(np.float32)
    below, above = gaps(k - np.float32(0.5))  # k odd: the tie k - 1/2 goes down to k - 1 (even)
    down = np.where(odd, above, -below).astype(np.float32)
    return up, down


def _past(w, v: str, s: str, halves: str, offsets: str, s_hi: str, s_lo: str, at: str) -> str:
    """v - (h + d) * s, its sign exact: h = halves[at], d = offsets[at] (float32 scalars to Gather)."""
    h = w.op("Gather", [halves, at], axis=0)
    d = w.op("Gather", [offsets, at], axis=0)
    a = w.op("Sub", [v, w.op("Mul", [h, s_hi])])
    b = w.op("Sub", [a, w.op("Mul", [h, s_lo])])
    return w.op("Sub", [b, w.op("Mul", [d, s])])


def _rounded_quotient(w, v: str, s: str) -> str:
    """RNE(RN(v / s)) as float32 (v finite or +-inf, s a positive normal scalar), clipped to
    [-K - 1, K + 1]."""
    k = w.op("Clip", [w.op("Round", [w.op("Div", [v, s])]), w.const(np.float32(-_K), "kmin"),
                      w.const(np.float32(_K), "kmax")])
    at = w.op("Cast", [w.op("Add", [k, w.const(np.float32(_K), "koffset")])], to=_I64)
    s4097 = w.op("Mul", [s, w.const(np.float32(4097), "split")])
    s_hi = w.op("Sub", [s4097, w.op("Sub", [s4097, s])])
    s_lo = w.op("Sub", [s, s_hi])
    up, down = half_offsets()
    ks = np.arange(-_K, _K + 1, dtype=np.float32)
    above = _past(w, v, s, w.const(ks + np.float32(0.5), "half_up"), w.const(up, "gap_up"), s_hi, s_lo, at)
    below = _past(w, v, s, w.const(ks - np.float32(0.5), "half_down"), w.const(down, "gap_down"), s_hi, s_lo, at)
    one = w.const(np.float32(1), "one")
    zero = w.const(np.float32(0), "zero")
    return w.op("Where", [w.op("Greater", [above, zero]), w.op("Add", [k, one]),
                          w.op("Where", [w.op("Less", [below, zero]), w.op("Sub", [k, one]), k])])


def _scale(w, r: str) -> tuple[str, str, str]:
    """(the scaled scale RN(r f / 255), f, 1 / f): f a power of two keeping every step normal; the
    scale ONNX Runtime gives is the first / f (1 when r is 0: then the first is f)."""
    small = w.op("Less", [r, w.const(_SMALL, "small")])
    large = w.op("Greater", [r, w.const(_LARGE, "large")])
    one = w.const(np.float32(1), "unit")
    f = w.op("Where", [small, w.const(np.float32(_UP_SMALL), "up"),
                       w.op("Where", [large, w.const(np.float32(_DOWN_LARGE), "down"), one])])
    rr = w.op("Mul", [r, f])
    c = w.const(np.float32(1) / np.float32(255), "inv255")
    q = w.op("Mul", [rr, c])  # within one ulp of rr / 255
    residual = w.op("Add", [w.op("Sub", [rr, w.op("Mul", [q, w.const(np.float32(256), "c256")])]), q])
    s = w.op("Add", [q, w.op("Mul", [residual, c])])
    degenerate = w.op("Or", [w.op("Equal", [r, w.const(np.float32(0), "rzero")]), w.op("IsInf", [r])])
    back = w.op("Where", [small, w.const(np.float32(1 / _UP_SMALL), "back_up"),
                          w.op("Where", [large, w.const(np.float32(1 / _DOWN_LARGE), "back_down"), one])])
    return w.op("Where", [degenerate, f, s]), f, back


def inexact_source(x: str, scope, ranks: dict):
    """The first node (op, name) before ``x`` that is not in :data:`EXACT_BEFORE` (a Cast from a float
    or of an unknown type counts: runtimes round float -> int otherwise), walking back to the main
    graph's inputs and constants (an input of a subgraph or function counts too: what feeds it is not
    known here); None when there is none. A DynamicQuantizeLinear stops the walk (its own x is checked
    for it)."""
    from rewriter.graph.traversal import definition

    seen, todo = set(), [(x, scope)]
    while todo:
        name, where = todo.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        kind, producer, at = definition(name, where)
        if kind == "initializer" or (kind == "input" and at.parent is None and not at.is_function):
            continue
        if kind != "node":
            return "an input of a subgraph or function", name
        cast_of_float = producer.op_type == "Cast" and ranks.get(producer.input[0], (None,))[0] in (None, *_FLOATS)
        if producer.op_type not in EXACT_BEFORE or producer.domain not in ("", "ai.onnx") or cast_of_float:
            return producer.op_type, producer.name or name
        if producer.op_type != "DynamicQuantizeLinear":
            todo.extend((i, at) for i in producer.input)
    return None


def dynamic_quantize(node, scope, w, ranks: dict, form: str = FORM) -> None:
    """DynamicQuantizeLinear(x) -> (y, y_scale, y_zero_point) written as the form of this module
    with ``w`` (quant_explicit's writer); ``ranks``: name -> (element type, rank), maybe empty."""
    if form not in (FORM, KEPT):
        raise Refused(f"form {form!r}: DynamicQuantizeLinear is written as {FORM!r} or kept ({KEPT!r}) only")
    outs = [*node.output, "", ""][:3]
    x = node.input[0]
    if ranks.get(x, (None, None))[0] not in (None, TensorProto.FLOAT):
        raise Refused("a non-float32 input: DynamicQuantizeLinear takes float32")
    source = inexact_source(x, scope, ranks)
    if source is not None:
        raise Refused(f"its x is computed through {source[0]} ('{source[1]}'), which the runtime computes within "
                      "ulps of ONNX Runtime, not exactly: the codes follow x (the form is exact for ONNX Runtime's x)")
    if form == KEPT:
        raise Keep
    nan = w.op("IsNaN", [x])
    zero = w.const(np.float32(0), "fzero")
    xs = w.op("Where", [nan, zero, x])
    mn = w.op("Min", [w.op("ReduceMin", [xs], keepdims=0), zero])
    mx = w.op("Max", [w.op("ReduceMax", [xs], keepdims=0), zero])
    r = w.op("Sub", [mx, mn])
    infinite = w.op("IsInf", [r])
    s, f, back = _scale(w, r)
    if outs[1]:
        scaled_back = w.op("Mul", [s, back])  # by a power of two: exact
        w.op("Where", [infinite, w.const(np.float32(np.inf), "inf"), scaled_back], outs[1])
    qmax = w.const(np.float32(255), "qmax")
    zp = w.op("Clip", [_rounded_quotient(w, w.op("Mul", [w.op("Neg", [mn]), f]), s), zero, qmax])
    zp = w.op("Where", [infinite, w.op("Where", [w.op("IsInf", [mn]), qmax, zero]), zp])
    if outs[2]:
        w.op("Cast", [zp], outs[2], to=_U8)
    if outs[0]:
        codes = w.op("Clip", [w.op("Add", [_rounded_quotient(w, w.op("Mul", [xs, f]), s), zp]), zero, qmax])
        codes = w.op("Where", [w.op("Or", [nan, w.op("IsInf", [x])]), zero,
                               w.op("Where", [infinite, zp, codes])])
        w.op("Cast", [codes], outs[0], to=_U8)

