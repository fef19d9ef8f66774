"""Pure Python/numpy ReduceProd oracle.

Exact path (used when ``exact=True``, or by default when ``data.size <= EXACT_LIMIT``):

* integers: Python ints -- the true product, then wrapped modulo 2**bits, saturated
  or reported as overflowing;
* floats: every element is converted exactly to a ``fractions.Fraction`` (through
  float64, which holds float16/bfloat16/float32 values exactly), the exact product is
  formed, and :func:`round_to_bits` rounds it once to the target format (nearest,
  ties to even, subnormals, overflow to inf). NaN / 0 x inf / inf / zero are decided
  by IEEE rules before any arithmetic.

Large-input path (``exact=False``; the default above ``EXACT_LIMIT`` elements), used
as the fallback when the native extension is missing. It is exact too, only organised
for speed (``EXACT_LIMIT`` is a speed choice, not an accuracy one):

* integers: a pairwise tree of uint64 magnitude products with exact overflow flags,
  in numpy;
* floats: classes (NaN, inf, zero) and sign parities are decided in numpy; each finite
  nonzero element is split exactly into an odd integer mantissa and an exponent
  (``np.frexp``), exponents are summed in int64, mantissas multiplied as Python ints
  (a balanced product tree per output) and the product rounded once
  (:func:`_round_scaled`: nearest, ties to even, subnormals, overflow to inf).
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np

from rewriter.errors import KernelError
from rewriter.kernels._common import (
    check_dtype,
    check_int_overflow,
    describe,
    normalize_axes,
    output_shape,
)

__all__ = [
    "reduce_prod_reference",
    "reduce_prod_reference_checked",
    "round_to_bits",
    "FLOAT_FORMATS",
    "EXACT_LIMIT",
]

EXACT_LIMIT = 1 << 16

#: dtype -> (precision incl. hidden bit, emin, emax, total bits, unsigned bit view)
FLOAT_FORMATS = {
    np.dtype(np.float32): (24, -126, 127, 32, np.uint32),
    np.dtype(np.float64): (53, -1022, 1023, 64, np.uint64),
    np.dtype(np.float16): (11, -14, 15, 16, np.uint16),
    np.dtype(ml_dtypes.bfloat16): (8, -126, 127, 16, np.uint16),
}


def round_to_bits(value: Fraction, dtype) -> int:
    """Bit pattern of ``value`` rounded to nearest-even in ``dtype`` (a float format)."""
    p, emin, _emax, nbits, _ = FLOAT_FORMATS[np.dtype(dtype)]
    sign = 1 << (nbits - 1) if value < 0 else 0
    num, den = abs(value.numerator), value.denominator
    if num == 0:
        return sign
    e = num.bit_length() - den.bit_length()
    if not ((num >= den << e) if e >= 0 else (num << -e >= den)):
        e -= 1
    # now 2**e <= num/den < 2**(e+1)
    q = max(e, emin) - (p - 1)  # weight of the last significand bit
    n2, d2 = (num, den << q) if q >= 0 else (num << -q, den)
    r, rem = divmod(n2, d2)
    if 2 * rem > d2 or (2 * rem == d2 and r & 1):
        r += 1
    bits = ((q - (emin - (p - 1))) << (p - 1)) + r
    inf = ((1 << (nbits - p)) - 1) << (p - 1)
    return sign | min(bits, inf)


def _float_exact(row: np.ndarray, dtype: np.dtype) -> int:
    vals = [float(v) for v in row.astype(np.float64)]
    neg = sum(math.copysign(1.0, v) < 0 for v in vals) % 2
    nbits = FLOAT_FORMATS[dtype][3]
    p = FLOAT_FORMATS[dtype][0]
    sbit = (1 << (nbits - 1)) if neg else 0
    inf = ((1 << (nbits - p)) - 1) << (p - 1)
    if any(math.isnan(v) for v in vals):
        return inf | (1 << (p - 2))  # canonical quiet NaN
    has_inf = any(math.isinf(v) for v in vals)
    has_zero = any(v == 0 for v in vals)
    if has_inf and has_zero:
        return inf | (1 << (p - 2))
    if has_inf:
        return sbit | inf
    if has_zero:
        return sbit
    return round_to_bits(math.prod((Fraction(v) for v in vals), start=Fraction(1)), dtype)


def _round_scaled(mant: int, exp: int, dtype) -> int:
    """Magnitude bits of ``mant * 2**exp`` (``mant`` > 0) rounded to nearest-even in ``dtype``."""
    p, emin, _emax, nbits, _ = FLOAT_FORMATS[np.dtype(dtype)]
    e = mant.bit_length() - 1 + exp  # 2**e <= value < 2**(e+1)
    q = max(e, emin) - (p - 1)  # weight of the last significand bit
    sh = q - exp
    if sh <= 0:
        r = mant << -sh
    else:
        r = mant >> sh
        rem = mant & ((1 << sh) - 1)
        half = 1 << (sh - 1)
        if rem > half or (rem == half and r & 1):
            r += 1
    bits = ((q - (emin - (p - 1))) << (p - 1)) + r
    inf = ((1 << (nbits - p)) - 1) << (p - 1)
    return min(bits, inf)


def _int_product(vals: list) -> int:
    """Product of Python ints as a balanced tree (fast for long rows of big factors)."""
    while len(vals) > 1:
        odd = vals[-1:] if len(vals) % 2 else []
        vals = [a * b for a, b in zip(vals[0::2], vals[1::2])] + odd
    return vals[0] if vals else 1


def _float_rows(rows: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Exact, correctly rounded products of the rows (the fallback for large inputs).

    IEEE classes and signs are decided with numpy; every finite nonzero element is
    split exactly into an odd integer mantissa and an exponent (``np.frexp`` on float64,
    which holds every input value exactly); the exponents are summed in int64, the
    mantissas multiplied as Python ints, and the product rounded once.
    """
    p, _emin, _emax, nbits, raw = FLOAT_FORMATS[dtype]
    x = rows.astype(np.float64)
    nan = np.isnan(x).any(axis=1)
    inf = np.isinf(x).any(axis=1)
    zero = (x == 0).any(axis=1)
    neg = (np.signbit(x).sum(axis=1) % 2).astype(bool)
    m, e = np.frexp(np.where(np.isfinite(x) & (x != 0), np.abs(x), 1.0))
    mant = (m * 2.0**53).astype(np.int64)  # exact: m in [0.5, 1) has 53 bits
    low = mant & -mant
    tz = np.frexp(low.astype(np.float64))[1] - 1  # trailing zero bits (low is a power of 2)
    mant >>= tz
    exp = (e.astype(np.int64) - 53 + tz).sum(axis=1)
    # first levels of the product tree in uint64 while a pair's product surely fits
    mant = mant.astype(np.uint64)
    bl = int(np.frexp(float(mant.max()))[1]) if mant.size else 0
    while mant.shape[1] > 1 and 2 * bl <= 64:
        if mant.shape[1] % 2:
            mant = np.concatenate([mant, np.ones((mant.shape[0], 1), np.uint64)], axis=1)
        mant = mant[:, 0::2] * mant[:, 1::2]
        bl *= 2
    inf_bits = ((1 << (nbits - p)) - 1) << (p - 1)
    qnan = inf_bits | (1 << (p - 2))
    out = np.empty(x.shape[0], dtype=np.uint64)
    for i in range(x.shape[0]):
        if nan[i] or (inf[i] and zero[i]):
            out[i] = qnan
            continue
        sign = (1 << (nbits - 1)) if neg[i] else 0
        if inf[i]:
            out[i] = sign | inf_bits
        elif zero[i]:
            out[i] = sign
        else:
            out[i] = sign | _round_scaled(_int_product(mant[i].tolist()), int(exp[i]), dtype)
    return out.astype(raw).view(dtype)


def _int_exact(row: np.ndarray, info) -> tuple[int, bool]:
    prod = math.prod(int(v) for v in row.tolist())
    over = not info.min <= prod <= info.max
    return prod, over


def _int_numpy(rows: np.ndarray, dtype: np.dtype):
    """Exact wrapped product and overflow flags via a pairwise uint64 tree."""
    info = np.iinfo(dtype)
    signed = info.min < 0
    x = rows.astype(np.int64) if dtype.itemsize == 4 or signed else rows
    if signed:
        neg = (np.sum(x < 0, axis=1) % 2).astype(bool)
        mag = np.where(x < 0, (-(x + 1)).astype(np.uint64) + np.uint64(1), x.astype(np.uint64))
    else:
        neg = np.zeros(x.shape[0], dtype=bool)
        mag = x.astype(np.uint64)
    zero = (mag == 0).any(axis=1)
    sat = np.zeros(x.shape[0], dtype=bool)
    umax = np.uint64(2**64 - 1)
    while mag.shape[1] > 1:
        if mag.shape[1] % 2:
            mag = np.concatenate([mag, np.ones((mag.shape[0], 1), np.uint64)], axis=1)
        a, b = mag[:, 0::2], mag[:, 1::2]
        over = (b != 0) & (a > umax // np.maximum(b, np.uint64(1)))
        sat |= over.any(axis=1)
        mag = a * b
    m = mag[:, 0] if mag.shape[1] else np.ones(mag.shape[0], np.uint64)
    wrapped = np.where(neg, np.uint64(0) - m, m)
    limit_pos = np.uint64(info.max)
    limit_neg = np.uint64(-info.min) if signed else np.uint64(0)
    over = ~zero & (sat | np.where(neg, m > limit_neg, m > limit_pos))
    res = wrapped.astype(np.uint64).view(np.int64) if signed else wrapped
    return res.astype(dtype, casting="unsafe"), over


def reduce_prod_reference_checked(
    data, axes=None, keepdims=True, noop_with_empty_axes=False, *, saturate=False, exact=None
):
    """(result, overflowed): wrapped (or saturated) integer result and overflow flag."""
    arr = np.asarray(data)
    check_dtype(arr, axes)
    ax = normalize_axes(arr, axes, noop_with_empty_axes)
    if ax is None:
        return arr.copy(), False
    final = output_shape(arr.shape, ax, keepdims)
    kept = [i for i in range(arr.ndim) if i not in ax]
    nout = math.prod(arr.shape[i] for i in kept)
    nred = math.prod(arr.shape[i] for i in ax)
    rows = np.moveaxis(arr, list(ax), list(range(len(kept), arr.ndim))).reshape(nout, nred)
    if exact is None:
        exact = arr.size <= EXACT_LIMIT
    dt = arr.dtype
    if dt in FLOAT_FORMATS:
        if not exact:
            return _float_rows(rows, dt).reshape(final), False
        raw = FLOAT_FORMATS[dt][4]
        bits = np.array([_float_exact(r, dt) for r in rows], dtype=raw)
        return bits.view(dt).reshape(final), False
    info = np.iinfo(dt)
    if not exact:
        res, over = _int_numpy(rows, dt)
        if saturate:
            neg = res < 0 if info.min < 0 else np.zeros_like(over)
            # the sign of an overflowed signed product is the sign parity, recompute it
            if info.min < 0:
                neg = (np.sum(rows < 0, axis=1) % 2).astype(bool)
            res = np.where(over, np.where(neg, info.min, info.max), res).astype(dt)
        return res.reshape(final), bool(over.any())
    out, anyover = [], False
    mod = 1 << info.bits
    for r in rows:
        prod, over = _int_exact(r, info)
        anyover |= over
        if over and saturate:
            val = info.min if prod < 0 else info.max
        else:
            val = prod % mod
            if info.min < 0 and val > info.max:
                val -= mod
        out.append(val)
    return np.array(out, dtype=dt).reshape(final), anyover


def reduce_prod_reference(
    data, axes=None, keepdims=True, noop_with_empty_axes=False, int_overflow="wrap", *, exact=None
) -> np.ndarray:
    """Same contract as :func:`rewriter.kernels.reduce_prod`, computed in Python/numpy."""
    check_int_overflow(int_overflow)
    res, over = reduce_prod_reference_checked(
        data, axes, keepdims, noop_with_empty_axes, saturate=int_overflow == "saturate", exact=exact
    )
    if over and int_overflow == "raise":
        arr = np.asarray(data)
        raise KernelError(f"{describe(arr, axes)}: integer overflow: the product does not fit in {arr.dtype}")
    return res
