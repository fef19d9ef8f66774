"""SVMClassifier's pair sums without double, for a runtime that computes no double inside a graph
(:data:`rewriter.convert.lowering.avoid.DOUBLE`: LiteRT 2.6, whose CumSum refuses it and whose
converter makes double inputs float).

ONNX Runtime adds each pair's float products left to right in double, then rho, and reads the
sign of that double and its value rounded to float.  Here the products are summed as float-float
pairs (hi, lo) in float32 alone: a pairwise tree over the products (the tables padded with +0
to a power of two), each addition Knuth's TwoSum of the high parts (an error-free transformation: s + err is
exactly a + b) with the low parts added to the error, then renormalized by a second TwoSum; rho
likewise at the end.  The result carries about 48 bits, where the double carries 53 and rounds
at each of its additions: both lie within about 2^-45 of the exact sum (relative to the sum of the
products' magnitudes), so hi, the float nearest the float-float value, is the float ONNX
Runtime's double rounds to, and its sign the double's sign, except when the exact sum lies that
close to a float's rounding boundary or to 0.  Where a product is infinite (TwoSum's error is then
NaN) the plain float sum stands in: the infinity (or NaN) the double sum holds too; a sum whose
partial sums pass float's largest value (3.4e38) while the double's do not is not kept.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FLOAT_FLOAT", "float_float_sums"]

FLOAT_FLOAT = ("pair sums: float products added as float-float pairs (about 48 bits; ONNX Runtime adds them in "
               "double) and rounded to float: the same float and the same sign unless the exact sum lies within "
               "about 2^-45 of the products' magnitudes of a rounding boundary or of 0, or partial sums pass float's "
               "largest value")


def _two_sum(e, a: str, b: str) -> tuple[str, str]:
    """(s, err) with s = fl(a + b) and s + err = a + b exactly (Knuth; no ordering of |a|, |b|)."""
    s = e.op("Add", [a, b])
    bb = e.op("Sub", [s, a])
    err = e.op("Add", [e.op("Sub", [a, e.op("Sub", [s, bb])]), e.op("Sub", [b, bb])])
    return s, err


def _add(e, hi_a: str, lo_a: str | None, hi_b: str, lo_b: str | None) -> tuple[str, str]:
    """The float-float sum of (hi_a, lo_a) and (hi_b, lo_b) (None: a low part of 0), renormalized."""
    s, err = _two_sum(e, hi_a, hi_b)
    lows = [x for x in (lo_a, lo_b) if x is not None]
    if lows:
        low = lows[0] if len(lows) == 1 else e.op("Add", lows)
        err = e.op("Add", [err, low])
    return _two_sum(e, s, err)


def float_float_sums(e, products: str, width: int, rho: np.ndarray) -> str:
    """[N, C] float: per pair, the float-float sum of ``products`` [N, C, width] (float; ``width`` a
    power of two, at least 2) along its last axis, plus ``rho`` [C], rounded to float."""
    hi, lo, size = products, None, width
    while size > 1:
        size //= 2
        shape = e.const(np.array([0, 0, size, 2], np.int64), hint="pairs_shape")
        halves = []
        for part in (hi, lo):
            paired = None if part is None else e.op("Reshape", [part, shape])
            halves.append((None, None) if paired is None else tuple(
                e.op("Gather", [paired, e.const(np.array(i, np.int64), hint="half")], axis=3) for i in (0, 1)))
        (hi_a, hi_b), (lo_a, lo_b) = halves
        hi, lo = _add(e, hi_a, lo_a, hi_b, lo_b)
    rho = e.const(rho.astype(np.float32), hint="rho")
    hi, _ = _add(e, e.squeeze(hi, [2]), e.squeeze(lo, [2]), rho, None)
    # an infinite product makes TwoSum's error NaN where the double sum is that infinity (or NaN):
    # there, the plain float sum, which is the same infinity (or NaN)
    plain = e.op("Add", [e.reduce("ReduceSum", products, [2], keepdims=0), rho])
    return e.op("Where", [e.op("IsNaN", [hi]), plain, hi])
