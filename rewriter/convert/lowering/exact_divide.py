"""A float32 quotient rounded to nearest as IEEE division rounds it, written with a division that need
only be faithful (within one ulp: OpenVINO, tract and LiteRT compute x / c as x * (1 / c)) and
Mul / Add / Sub, which every measured release rounds correctly:

- q = Div(a, b), faithful; the remainder a - q * b is then a float32, and it is computed exactly: q
  * b = p + err by Dekker's product (q and b split by Veltkamp, 4097), a - p is exact (Sterbenz),
  and so is (a - p) - err. An FMA a runtime contracts a product of two halves into is exact too.
- the gaps to q's neighbours are g_up = (|q| + |q| c) - |q| and g_down = |q| - (|q| - |q| c), c just
  above 2^-24 (both exact: a power of two, the lower one half as large at a power of two).
- RN(a / b) is q moved by a gap when the remainder is past half of it times b (b > 0; a quotient
  of two floats is never a midpoint, so no tie arises).

Domain: b > 0; a, b and the quotient normal floats below 2^100 in magnitude (Veltkamp's 4097 q must
not overflow); a quotient that underflows is left as the division gave it."""

from __future__ import annotations

import numpy as np

__all__ = ["divide_rounded"]

_SPLIT = np.float32(4097)  # 2^12 + 1: float32's 24 bits as two halves of 12
_NUDGE = np.float32(2.0 ** -24 * (1 + 2.0 ** -20))  # |q| * this lies in (ulp / 2, ulp (1 + 2^-20)]
_HALF = np.float32(0.5)


def _split(e, x: str) -> tuple[str, str]:
    c = e.op("Mul", [x, e.const(_SPLIT, hint="veltkamp")])
    hi = e.op("Sub", [c, e.op("Sub", [c, x])])
    return hi, e.op("Sub", [x, hi])


def divide_rounded(e, a: str, b: str) -> str:
    """RN(a / b) for float32 ``a`` and ``b`` > 0 (tensors that broadcast), within the domain above."""
    q = e.op("Div", [a, b])
    p = e.op("Mul", [q, b])
    qh, ql = _split(e, q)
    bh, bl = _split(e, b)
    err = e.op("Add", [e.op("Add", [e.op("Add", [e.op("Sub", [e.op("Mul", [qh, bh]), p]), e.op("Mul", [qh, bl])]),
                                    e.op("Mul", [ql, bh])]), e.op("Mul", [ql, bl])])
    rest = e.op("Sub", [e.op("Sub", [a, p]), err])  # a - q * b, exactly
    size = e.op("Abs", [q])
    nudge = e.op("Mul", [size, e.const(_NUDGE, hint="nudge")])
    up = e.op("Sub", [e.op("Add", [size, nudge]), size])    # the gap above |q|
    down = e.op("Sub", [size, e.op("Sub", [size, nudge])])  # the gap below |q|
    positive = e.op("GreaterOrEqual", [q, e.const(np.float32(0), hint="zero")])
    rise = e.op("Where", [positive, up, down])  # the gap towards +inf, and towards -inf
    fall = e.op("Where", [positive, down, up])
    half = e.const(_HALF, hint="half")
    past_rise = e.op("Greater", [rest, e.op("Mul", [e.op("Mul", [rise, half]), b])])
    past_fall = e.op("Greater", [e.op("Neg", [rest]), e.op("Mul", [e.op("Mul", [fall, half]), b])])
    return e.op("Where", [past_rise, e.op("Add", [q, rise]),
                          e.op("Where", [past_fall, e.op("Sub", [q, fall]), q])])
