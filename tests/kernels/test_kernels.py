"""Tests of the native ReduceProd kernel against the exact oracle and independent sources."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from rewriter.errors import KernelError, RewriterError
from rewriter.kernels import (
    NATIVE_AVAILABLE,
    SUPPORTED_DTYPES,
    reduce_prod,
    reduce_prod_checked,
    reduce_prod_reference,
    reduce_prod_reference_checked,
)
from rewriter.kernels.reference import FLOAT_FORMATS, round_to_bits

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
INTS = [np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64)]
HSET = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-exact equality (any NaN equals any NaN), same shape and dtype."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype in FLOAT_FORMATS:
        raw = FLOAT_FORMATS[a.dtype][4]
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        both_nan = np.isnan(fa) & np.isnan(fb)
        return bool(np.all(both_nan | (a.view(raw) == b.view(raw))))
    return bool(np.array_equal(a, b))


def f32(x):
    return np.array(x, dtype=np.float32)


# --------------------------------------------------------------------- basics
def test_native_extension_is_in_use():
    from rewriter.kernels import _native

    assert NATIVE_AVAILABLE, "the C extension rewriter.kernels._native is not built"
    assert _native.ISA in ("generic", "avx2+fma", "avx512f+fma")
    assert len(SUPPORTED_DTYPES) == 8


def test_explicit_examples():
    r = reduce_prod(f32([2.0**100, 2.0**100, 2.0**-100, 2.0**-100]))
    assert r.dtype == np.float32 and r.shape == (1,) and r[0] == 1.0
    r = reduce_prod(np.array([2.0**1000, 2.0**1000, 2.0**-1000, 2.0**-1000]))
    assert r[0] == 1.0
    r = reduce_prod(np.array([1e300, 1e300, 1e-300, 1e-300]))
    assert r[0] == 1.0000000000000002
    r, over = reduce_prod_checked(np.array([65536, 32768, -1], np.int32))
    assert r[0] == -(2**31) and not over
    r, over = reduce_prod_checked(np.array([2**20, 2**20, 0], np.int32))
    assert r[0] == 0 and not over
    assert reduce_prod(np.array([2**20, 2**20, 0], np.int32), int_overflow="raise")[0] == 0


def test_shapes_and_options():
    x = np.arange(1, 25, dtype=np.int64).reshape(2, 3, 4)
    assert reduce_prod(x).shape == (1, 1, 1)
    assert reduce_prod(x, keepdims=False).shape == ()
    assert reduce_prod(x, [-1], keepdims=False).shape == (2, 3)
    assert reduce_prod(x, [0, 2]).shape == (1, 3, 1)
    assert np.array_equal(reduce_prod(x, [1]), np.prod(x, axis=1, keepdims=True))
    assert reduce_prod(x, keepdims=False)[()] == math.factorial(24) % 2**64 - 2**64 * (math.factorial(24) % 2**64 >= 2**63)
    c = reduce_prod(x, [], noop_with_empty_axes=True)
    assert np.array_equal(c, x) and c is not x and not np.shares_memory(c, x)
    assert reduce_prod(x, None, noop_with_empty_axes=True).shape == x.shape
    assert reduce_prod(x, [], noop_with_empty_axes=False).shape == (1, 1, 1)
    z = np.zeros((3, 0, 2), np.float32)
    assert np.array_equal(reduce_prod(z, [1]), np.ones((3, 1, 2), np.float32))
    assert reduce_prod(z, [0], keepdims=False).shape == (0, 2)
    s = np.array(3.5, np.float16)
    assert reduce_prod(s).shape == () and reduce_prod(s)[()] == 3.5
    assert reduce_prod(np.array(-7, np.int32), [], keepdims=False)[()] == -7


@pytest.mark.parametrize(
    "axes", [[0, 0], [0, -3], [3], [-4], [1, 1, 2], [0.5], ["a"]]
)
def test_bad_axes(axes):
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(KernelError):
        reduce_prod(x, axes)
    with pytest.raises(KernelError):
        reduce_prod_reference(x, axes)


def test_bad_arguments():
    assert issubclass(KernelError, RewriterError) and issubclass(KernelError, ValueError)
    with pytest.raises(KernelError, match="int8"):
        reduce_prod(np.ones(3, np.int8))
    with pytest.raises(KernelError):
        reduce_prod(np.ones(3, np.complex64))
    with pytest.raises(KernelError, match="int_overflow"):
        reduce_prod(np.ones(3, np.int32), int_overflow="skip")
    with pytest.raises(KernelError):
        reduce_prod(np.ones((), np.int32), [0])


# ------------------------------------------------------- integer boundaries
INT_CASES = [
    (np.int32, [2147483647, 1, -1, -1], 2**31 - 1),
    (np.int32, [65536, 32768, -1], -(2**31)),
    (np.int32, [65536, 32768], 2**31),
    (np.int32, [-65536, 32768, -1], 2**31),
    (np.int32, [65536, -32768, 2], -(2**32)),
    (np.int32, [46341, 46341], 46341**2),
    (np.int64, [2**62, -2], -(2**63)),
    (np.int64, [2**62, 2], 2**63),
    (np.int64, [-(2**63), 1], -(2**63)),
    (np.int64, [-(2**63), -1], 2**63),
    (np.int64, [2**32, 2**32, 0], 0),
    (np.int64, [3037000499, 3037000499], 3037000499**2),
    (np.uint32, [65537, 65535], 2**32 - 1),
    (np.uint32, [65536, 65536], 2**32),
    (np.uint64, [2**32 + 1, 2**32 - 1], 2**64 - 1),
    (np.uint64, [2**32, 2**32], 2**64),
    (np.uint64, [2**32, 2**32, 2**32, 0], 0),
    (np.uint64, [2**63, 3], 3 * 2**63),
]


@pytest.mark.parametrize("dtype,values,true", INT_CASES)
def test_integer_boundaries(dtype, values, true):
    x = np.array(values, dtype=dtype)
    info = np.iinfo(dtype)
    fits = info.min <= true <= info.max
    wrapped = true % 2**info.bits
    if info.min < 0 and wrapped > info.max:
        wrapped -= 2**info.bits
    r, over = reduce_prod_checked(x)
    assert over == (not fits)
    assert int(r[0]) == wrapped
    assert int(reduce_prod(x, int_overflow="wrap")[0]) == wrapped
    sat = true if fits else (info.max if true > 0 else info.min)
    assert int(reduce_prod(x, int_overflow="saturate")[0]) == sat
    if fits:
        assert int(reduce_prod(x, int_overflow="raise")[0]) == true
    else:
        with pytest.raises(KernelError, match=r"dtype=.*shape=\(%d,\).*axes" % len(values)):
            reduce_prod(x, int_overflow="raise")
    # the reference agrees, both exact paths
    for exact in (True, False):
        rr, ro = reduce_prod_reference_checked(x, exact=exact)
        assert ro == over and int(rr[0]) == wrapped


# --------------------------------------------------------- float rounding
def _bits(x: np.ndarray) -> int:
    return int(x.view(FLOAT_FORMATS[x.dtype][4]).reshape(-1)[0])


FLOAT_CASES = [
    # exact tie 1 + 2^-11 + 2^-24 -> even (down)
    (np.float32, [1 + 2.0**-12, 1 + 2.0**-12]),
    # tie rounding up to even
    (np.float32, [1 + 3 * 2.0**-12, 1 + 2.0**-12, 1 + 2.0**-12]),
    # subnormal result with a tie 1.5 * 2^-149 -> 2^-148
    (np.float32, [2.0**-100, 1.5 * 2.0**-49]),
    (np.float32, [2.0**-100, 1.25 * 2.0**-49]),
    (np.float32, [2.0**-100, 2.0**-50]),  # exactly half the smallest subnormal -> 0
    (np.float32, [-(2.0**-100), 2.0**-50, 1.0000001]),  # just above half -> -min subnormal
    (np.float32, [2.0**127, 2.0]),  # overflow to inf
    (np.float32, [2.0**127, 1.9999999]),  # max-ish
    (np.float32, [np.finfo(np.float32).max, 1 + 2.0**-23]),
    (np.float32, [0.0, np.inf]),
    (np.float32, [-0.0, 3.0]),
    (np.float32, [-np.inf, -2.0, -1.0]),
    (np.float32, [np.nan, 0.0]),
    (np.float32, [2.0**-149, 2.0**-149, 2.0**127, 2.0**127, 2.0**44]),
    (np.float64, [2.0**-1074, 0.5]),
    (np.float64, [2.0**-1074, 0.75]),
    (np.float64, [2.0**-1074, 1.5]),
    (np.float64, [1 + 2.0**-27, 1 + 2.0**-27]),
    (np.float64, [np.finfo(np.float64).max, 1 + 2.0**-52]),
    (np.float64, [3.0] * 40 + [1 / 3.0] * 40),
    (np.float16, [65504.0, 1.0009765625]),
    (np.float16, [2.0**-24, 0.5]),
    (np.float16, [2.0**-24, 0.75]),
    (np.float16, [1.0 + 2.0**-6, 1.0 + 2.0**-6]),
    (np.float16, [np.inf, 2.0**-24]),
    (BF16, [1.0 + 2.0**-4, 1.0 + 2.0**-4]),
    (BF16, [3.0, 3.0, 3.0, 3.0, 3.0]),
    (BF16, [2.0**-133, 0.5, 3.0]),
]


@pytest.mark.parametrize("dtype,values", FLOAT_CASES)
def test_float_rounding_cases(dtype, values):
    x = np.array(values, dtype=np.float64).astype(dtype)
    exact = math.prod((Fraction(float(v)) for v in x.astype(np.float64) if np.isfinite(v)), start=Fraction(1))
    got = reduce_prod(x)
    ref = reduce_prod_reference(x, exact=True)
    assert same(got, ref), (got, ref)
    if all(np.isfinite(x.astype(np.float64))) and exact != 0:
        assert _bits(got) == round_to_bits(exact, np.dtype(dtype))


def test_float_ties_go_to_even():
    # 1 + 2^-11 + 2^-24 is halfway between 1 + 2^-11 and 1 + 2^-11 + 2^-23
    r = reduce_prod(f32([1 + 2.0**-12, 1 + 2.0**-12]))
    assert r[0] == np.float32(1 + 2.0**-11)
    r = reduce_prod(f32([2.0**-100, 1.5 * 2.0**-49]))
    assert r[0] == np.float32(2.0**-148)
    assert reduce_prod(f32([2.0**-100, 2.0**-50]))[0] == 0.0
    assert np.signbit(reduce_prod(f32([-(2.0**-100), 2.0**-50]))[0])


# ----------------------------------------------------------- hypothesis
def _float_elements(dt: np.dtype):
    p, emin, emax, nbits, raw = FLOAT_FORMATS[dt]
    half = p // 2 + 1
    specials = st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan])
    pow2 = st.builds(lambda s, k: s * 2.0**k, st.sampled_from([1.0, -1.0]), st.integers(emin - p + 1, emax))
    near1 = st.builds(
        lambda s, k, j: s * (1 + k * 2.0**-j), st.sampled_from([1.0, -1.0]), st.integers(-3, 3), st.integers(half - 1, half + 1)
    )
    near1b = st.builds(lambda k: 1 + k * 2.0 ** (1 - p), st.integers(-4, 4))
    rawbits = st.integers(0, 2**nbits - 1).map(lambda b: float(np.array(b, raw).view(dt).astype(np.float64)))
    big = st.builds(lambda m, k: m * 2.0**k, st.floats(1, 2), st.sampled_from([emax - 1, emax, emin, emin - 3, emin - p + 2]))
    return st.one_of(specials, pow2, pow2, near1, near1, near1b, rawbits, rawbits, big)


def _int_elements(dt: np.dtype):
    info = np.iinfo(dt)
    b = info.bits
    vals = [0, 1, -1, 2, -2, 3, info.max, info.min, 2 ** (b // 2), 2 ** (b // 2) - 1, 2 ** (b // 2) + 1, 2 ** (b - 2), 2 ** (b // 4)]
    vals = [v for v in vals if info.min <= v <= info.max]
    return st.one_of(st.sampled_from(vals), st.integers(-5, 5).filter(lambda v: info.min <= v), st.integers(info.min, info.max))


@st.composite
def reduction(draw, dtypes=tuple(SUPPORTED_DTYPES)):
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    n = math.prod(shape)
    while n > 40:
        shape = tuple(max(1, d // 2) for d in shape)
        n = math.prod(shape)
    elems = _float_elements(dt) if dt in FLOAT_FORMATS else _int_elements(dt)
    vals = draw(st.lists(elems, min_size=n, max_size=n))
    if dt in FLOAT_FORMATS:
        with np.errstate(over="ignore"):
            x = np.array(vals, dtype=np.float64).astype(dt).reshape(shape)
    else:
        x = np.array(vals, dtype=object).astype(dt).reshape(shape)
    view = draw(st.sampled_from(["c", "c", "T", "flip", "step"])) if rank else "c"
    if view == "T":
        perm = draw(st.permutations(range(rank)))
        x = np.ascontiguousarray(x.transpose(perm)).transpose(np.argsort(perm))
    elif view == "flip":
        ax = draw(st.integers(0, rank - 1))
        x = np.flip(np.flip(x, ax).copy(), ax)
    elif view == "step":
        ax = draw(st.integers(0, rank - 1))
        big = np.zeros(tuple(d * 2 if i == ax else d for i, d in enumerate(shape)), dtype=dt)
        idx = tuple(slice(None, None, 2) if i == ax else slice(None) for i in range(rank))
        big[idx] = x
        x = big[idx]
    axes_kind = draw(st.sampled_from(["none", "empty", "list", "list", "list"]))
    if axes_kind == "none":
        axes = None
    elif axes_kind == "empty":
        axes = []
    else:
        axes = draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank)) if rank else []
    keepdims = draw(st.booleans())
    noop = draw(st.booleans())
    return x, axes, keepdims, noop


@HSET
@given(reduction())
def test_kernel_matches_oracle(case):
    x, axes, keepdims, noop = case
    for mode in ("wrap", "saturate", "raise"):
        try:
            want = reduce_prod_reference(x, axes, keepdims, noop, mode, exact=True)
        except KernelError:
            with pytest.raises(KernelError):
                reduce_prod(x, axes, keepdims, noop, mode)
            continue
        got = reduce_prod(x, axes, keepdims, noop, mode)
        assert same(got, want), (x, axes, keepdims, noop, mode, got, want)
        if x.dtype in FLOAT_FORMATS:
            break
    got, over = reduce_prod_checked(x, axes, keepdims, noop)
    want, wover = reduce_prod_reference_checked(x, axes, keepdims, noop, exact=True)
    assert same(got, want) and over == wover


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3))
def test_invalid_axes_rejected(seed, rank):
    rng = np.random.default_rng(seed)
    x = np.ones((2,) * rank, np.float32)
    a = int(rng.integers(-rank, rank))
    with pytest.raises(KernelError, match="more than once"):
        reduce_prod(x, [a, a + rank if a < 0 else a - rank])
    with pytest.raises(KernelError, match="out of range"):
        reduce_prod(x, [rank + int(rng.integers(0, 3))])
    with pytest.raises(KernelError, match="out of range"):
        reduce_prod(x, [-rank - 1 - int(rng.integers(0, 3))])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(FLOATS), st.integers(0, 2**32), st.integers(50, 400))
def test_long_products_near_one(dt, seed, n):
    """Many factors near 1 and large exponent spreads: stresses the error bounds."""
    rng = np.random.default_rng(seed)
    p = FLOAT_FORMATS[dt][0]
    vals = 1 + rng.integers(-8, 9, size=n) * 2.0 ** -(p // 2 + 1)
    vals *= 2.0 ** rng.integers(-30, 31, size=n)
    vals[rng.integers(0, n)] *= 2.0 ** int(rng.integers(-60, 60))
    with np.errstate(over="ignore"):
        x = vals.astype(dt)
    for axes in (None, [0]):
        assert same(reduce_prod(x, axes), reduce_prod_reference(x, axes, exact=True))
    y = x[: (n // 5) * 5].reshape(5, -1)
    for axes in ([0], [1], [-1, 0]):
        assert same(reduce_prod(y, axes), reduce_prod_reference(y, axes, exact=True))


# ------------------------------------------------ large arrays (threaded paths)
def _structured(dt, shape, seed):
    """x = sign * m * 2^k with m in {1, 1.5, 1.25}: the exact product is cheap to know."""
    rng = np.random.default_rng(seed)
    emax = FLOAT_FORMATS[dt][2]
    lim = min(12, emax // 2)
    k = rng.integers(-lim, lim + 1, size=shape)
    m = rng.choice(3, size=shape, p=[0.98, 0.01, 0.01])
    s = rng.random(shape) < 0.5
    vals = np.where(s, -1.0, 1.0) * np.array([1.0, 1.5, 1.25])[m] * np.exp2(k)
    return vals.astype(dt), k, m, s


def _structured_oracle(dt, k, m, s, axes, keepdims):
    ks = k.sum(axis=axes, keepdims=keepdims)
    a = (m == 1).sum(axis=axes, keepdims=keepdims)
    c = (m == 2).sum(axis=axes, keepdims=keepdims)
    neg = s.sum(axis=axes, keepdims=keepdims) % 2
    out = []
    for kk, aa, cc, nn in zip(ks.ravel(), a.ravel(), c.ravel(), neg.ravel()):
        v = Fraction(3, 2) ** int(aa) * Fraction(5, 4) ** int(cc) * Fraction(2) ** int(kk)
        out.append(round_to_bits(-v if nn else v, dt))
    return np.array(out, FLOAT_FORMATS[dt][4]).view(dt).reshape(ks.shape)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("axes", [(0,), (1,), None, (0, 2), (1, 2)])
def test_large_structured_floats(dt, axes):
    shape = (40, 64, 120)
    x, k, m, s = _structured(dt, shape, 7)
    for keepdims in (True, False):
        want = _structured_oracle(dt, k, m, s, axes, keepdims)
        assert same(reduce_prod(x, axes, keepdims), want)
    # a transposed, non-contiguous view of the same data
    xt = x.transpose(2, 0, 1)
    ax_t = None if axes is None else tuple({0: 1, 1: 2, 2: 0}[a] for a in axes)
    want = _structured_oracle(dt, k.transpose(2, 0, 1), m.transpose(2, 0, 1), s.transpose(2, 0, 1), ax_t, True)
    assert same(reduce_prod(xt, ax_t), want)


def test_large_float32_all_reduce_exact():
    x, k, m, s = _structured(np.dtype(np.float32), (512, 1024), 3)
    assert same(reduce_prod(x), _structured_oracle(np.dtype(np.float32), k, m, s, None, True))
    y = x.copy()
    y[100, 7] = 0.0
    assert reduce_prod(y)[0, 0] == 0
    y[3, 5] = np.inf
    assert np.isnan(reduce_prod(y)[0, 0])
    assert np.isinf(reduce_prod(y, [0])[0, 5]) and reduce_prod(y, [0])[0, 7] == 0
    assert np.isinf(reduce_prod(y, [1])[3, 0]) and reduce_prod(y, [1])[100, 0] == 0
    y[3, 7] = -np.inf
    assert np.isnan(reduce_prod(y, [0])[0, 7]) and np.isinf(reduce_prod(y, [1])[3, 0])


@pytest.mark.parametrize("dt", INTS)
@pytest.mark.parametrize("axes", [(0,), (1,), None, (0, 2)])
def test_large_integers(dt, axes):
    rng = np.random.default_rng(11)
    info = np.iinfo(dt)
    x = rng.integers(max(info.min, -3), 4, size=(30, 70, 130)).astype(dt)
    x[rng.random(x.shape) < 0.5] = 1
    x[0, 0, 0] = info.max
    x[1, 2, 3] = 0
    for mode in ("wrap", "saturate"):
        want, wover = reduce_prod_reference_checked(x, axes, saturate=mode == "saturate", exact=False)
        got = reduce_prod(x, axes, int_overflow=mode)
        assert same(got, want)
    got, over = reduce_prod_checked(x, axes)
    assert over == wover
    # the pairwise-numpy reference path agrees with Python ints on a slice
    sl = x[:3, :5, :7]
    for exact in (True, False):
        assert same(reduce_prod_reference(sl, axes, exact=exact), reduce_prod(sl, axes))


# ------------------------------------------------------------ the oracle itself
@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(-1200, 1200))
def test_round_to_bits_float64_matches_python(x, k):
    v = Fraction(x) * Fraction(2) ** k
    try:
        expect = float(v)
    except OverflowError:
        expect = math.copysign(math.inf, x)
    got = round_to_bits(v, np.float64)
    if v == 0:
        assert got in (0, 1 << 63)
    else:
        assert got == struct.unpack("<Q", struct.pack("<d", expect))[0]


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_round_to_bits_matches_numpy_casts(x):
    # float64 -> float32 / float16 casts and float32 -> bfloat16 are single, correct roundings
    with np.errstate(over="ignore"):
        assert round_to_bits(Fraction(x), np.float32) == int(np.float32(x).view(np.uint32)) or x == 0
        assert round_to_bits(Fraction(x), np.float16) == int(np.float16(x).view(np.uint16)) or x == 0
        y = np.float32(x)
        if np.isfinite(y) and y != 0:
            assert round_to_bits(Fraction(float(y)), BF16) == int(np.array(y).astype(BF16).view(np.uint16))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=8))
def test_oracle_integers_match_python_and_numpy(vals):
    x = np.array(vals, np.int64)
    r, over = reduce_prod_reference_checked(x, exact=True)
    true = math.prod(vals)
    assert over == (not -(2**63) <= true < 2**63)
    assert int(r[0]) == (true + 2**63) % 2**64 - 2**63
    assert r[0] == np.prod(x)  # numpy wraps modulo 2^64 too


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e10, 1e10, allow_nan=False), min_size=1, max_size=6))
def test_oracle_floats_match_fraction_product(vals):
    x = np.array(vals, np.float64)
    r = reduce_prod_reference(x, exact=True)
    assert r[0] == float(math.prod((Fraction(v) for v in vals), start=Fraction(1)))


def _onnx_reduce_prod(x, axes, keepdims):
    from onnx.reference import ReferenceEvaluator

    inputs = [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), None)]
    names = ["x"]
    init = []
    if axes is not None:
        init.append(onnx.numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        names.append("axes")
    node = helper.make_node("ReduceProd", names, ["y"], keepdims=keepdims)
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", 1, None)], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    return ReferenceEvaluator(m).run(None, {"x": x})[0]


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([np.int32, np.int64, np.float32, np.float64]),
    st.lists(st.integers(1, 3), min_size=1, max_size=3),
    st.data(),
)
def test_oracle_matches_onnx_reference_small_exact(dt, shape, data):
    rank = len(shape)
    n = math.prod(shape)
    x = np.array(data.draw(st.lists(st.integers(-4, 4), min_size=n, max_size=n)), dtype=dt).reshape(shape)
    axes = data.draw(st.one_of(st.none(), st.lists(st.integers(0, rank - 1), unique=True, min_size=1)))
    keepdims = data.draw(st.sampled_from([0, 1]))
    want = _onnx_reduce_prod(x, axes, keepdims)
    for fn in (reduce_prod_reference, reduce_prod):
        got = fn(x, axes, keepdims)
        np.testing.assert_array_equal(got, want.astype(dt))


# ------------------------------------------------- official ONNX node tests
def _backend_cases():
    from tests.oracle import backend_cases

    return backend_cases("ReduceProd")


@pytest.mark.parametrize("case", _backend_cases(), ids=lambda c: c.name)
def test_onnx_backend_node_cases(case):
    node = next(n for n in case.model.graph.node if n.op_type == "ReduceProd")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert case.data_sets
    for inputs, outputs in case.data_sets:
        x = inputs[0]
        axes = attrs.get("axes")
        if len(inputs) > 1 and len(node.input) > 1 and node.input[1]:
            axes = list(inputs[1])
        got = reduce_prod(x, axes, bool(attrs.get("keepdims", 1)), bool(attrs.get("noop_with_empty_axes", 0)))
        want = outputs[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        if x.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-6 if x.dtype == np.float32 else 1e-12)
        else:
            np.testing.assert_array_equal(got, want)


def test_every_isa_variant_gives_identical_bits():
    """The generic, AVX2+FMA and AVX-512+FMA kernels are all exact: same bits."""
    import subprocess
    import sys

    code = (
        "import numpy as np, ml_dtypes, sys\n"
        "from rewriter.kernels import reduce_prod, _native\n"
        "rng = np.random.default_rng(5)\n"
        "out = []\n"
        "for dt in (np.float32, np.float16, ml_dtypes.bfloat16):\n"
        "    x = (rng.uniform(0.5, 2, (300, 257)) * np.exp2(rng.integers(-9, 9, (300, 257)))).astype(dt)\n"
        "    x[5, 7] = 0; x[9, 9] = np.inf; x[11, 3] = np.nan\n"
        "    for ax in ([0], [1], None):\n"
        "        out.append(reduce_prod(x, ax).tobytes().hex())\n"
        "sys.stdout.write(_native.ISA + ' ' + str(hash(tuple(out))) + ' ' + '|'.join(out)[:0])\n"
    )
    import os

    results = {}
    for isa in ("generic", "avx2", "avx512"):
        env = dict(os.environ, REWRITER_KERNEL_ISA=isa, PYTHONHASHSEED="0")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        name, digest = r.stdout.split()
        results[name] = digest
    assert "generic" in results
    assert len(set(results.values())) == 1, results
