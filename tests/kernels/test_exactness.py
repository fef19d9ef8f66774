"""Correct rounding of the float kernels and of the pure-Python fallback, against an
independent Python-int oracle, on adversarial inputs: products just off a rounding
boundary (exact products of factors of 2^N +- 1), huge and tiny factors that cancel,
subnormal factors and results, signed zeros, inf and NaN.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewriter
import rewriter.kernels as kernels
from rewriter.kernels import reduce_prod

BF16 = np.dtype(ml_dtypes.bfloat16)
F64, F32, F16 = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16)
#: dtype -> (precision, emin, emax, unsigned view)
FMT = {F64: (53, -1022, 1023, np.uint64), F32: (24, -126, 127, np.uint32),
       F16: (11, -14, 15, np.uint16), BF16: (8, -126, 127, np.uint16)}

# prime factorisations (all primes < 2^53, so every group below is a double)
P144M = [3, 3, 3, 5, 7, 13, 17, 19, 37, 73, 97, 109, 241, 257, 433, 577, 673, 38737, 487824887233]  # 2^144 - 1
P144P = [193, 1153, 6337, 65537, 22253377, 38941695937, 278452876033]  # 2^144 + 1
P72M = [3, 3, 3, 5, 7, 13, 17, 19, 37, 73, 109, 241, 433, 38737]  # 2^72 - 1


def test_factorisations():
    assert math.prod(P144M) == 2**144 - 1 and math.prod(P144P) == 2**144 + 1 and math.prod(P72M) == 2**72 - 1


# ------------------------------------------------------------------ the oracle
def oracle(x: np.ndarray, axes=None) -> np.ndarray:
    """Exact product rounded once (nearest, ties to even), with Python ints only."""
    dt = x.dtype
    p, emin, emax, raw = FMT[dt]
    nd = x.ndim
    ax = tuple(range(nd)) if axes is None else tuple(a % nd for a in axes)
    kept = [i for i in range(nd) if i not in ax]
    rows = np.moveaxis(x, ax, range(len(kept), nd)).reshape(math.prod(x.shape[i] for i in kept), -1)
    out = []
    for row in rows.astype(np.float64):
        vals = [float(v) for v in row]
        neg = sum(math.copysign(1.0, v) < 0 for v in vals) % 2
        sign = -1.0 if neg else 1.0
        if any(math.isnan(v) for v in vals) or (any(math.isinf(v) for v in vals) and 0.0 in vals):
            out.append(math.nan)
            continue
        if any(math.isinf(v) for v in vals):
            out.append(sign * math.inf)
            continue
        if 0.0 in vals:
            out.append(sign * 0.0)
            continue
        num, k = 1, 0  # |product| = num / 2^k
        for v in vals:
            n, d = abs(v).as_integer_ratio()
            num *= n
            k += d.bit_length() - 1
        e = num.bit_length() - 1 - k  # 2^e <= |product| < 2^(e+1)
        q = max(e, emin) - (p - 1)  # weight of the last kept bit
        sh = k + q  # r = round(num / 2^sh)
        if sh <= 0:
            r = num << -sh
        else:
            r, rem = num >> sh, num & ((1 << sh) - 1)
            if 2 * rem > (1 << sh) or (2 * rem == (1 << sh) and r % 2 == 1):
                r += 1
        out.append(sign * (math.inf if r.bit_length() + q > emax + 1 else math.ldexp(r, q)))
    shape = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
    with np.errstate(over="ignore"):
        return np.array(out, dtype=np.float64).astype(dt).reshape(shape)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    raw = FMT[a.dtype][3]
    nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return bool(np.all(nan | (a.view(raw) == b.view(raw))))


def test_oracle_against_python_float():
    rng = np.random.default_rng(1)
    for _ in range(200):
        v = list(rng.uniform(-3, 3, 3) * np.exp2(rng.integers(-400, 400, 3)))
        want = math.prod(v[:1]) * 1.0
        from fractions import Fraction

        f = math.prod((Fraction(t) for t in v), start=Fraction(1))
        try:
            want = float(f)  # Python rounds Fractions correctly
        except OverflowError:
            want = math.copysign(math.inf, f)
        assert same(oracle(np.array(v)), np.array([want]))


# ------------------------------------------------ products next to a boundary
def near_tie_rows(dt, nrows, copies, primes, sign_of_eps, seed, spread):
    """Rows whose exact product is  +-(midpoint) * (1 + sign_of_eps * 2^-N)^copies * 2^t.

    The midpoint is (1 + 2^-a)(1 + 2^-b) with a + b = p (halfway between two
    neighbours); the (2^N +- 1) factors come as a random grouping of ``primes`` into
    dense significands. Each factor also gets a random power of two (|exponent| up to
    ``spread``), compensated across the row, so partial products leave the type's range.
    Returns (rows, expected) with the correctly rounded results.
    """
    p, emin, emax, _ = FMT[dt]
    rng = np.random.default_rng(seed)
    limit = 2**p
    rows, expected = [], []
    for _ in range(nrows):
        a = int(rng.integers(2, p - 1))
        b = p - a
        fac = [1.0 + 2.0**-a, 1.0 + 2.0**-b]
        lower = 1.0 + 2.0**-a + 2.0**-b  # the midpoint minus half an ulp
        shift = 0  # product of the prime groups = (2^N +- 1)^copies * 2^-shift ... as [1,2) values
        for _c in range(copies):
            pr = list(primes)
            rng.shuffle(pr)
            g = 1
            for q in pr + [None]:
                if q is None or g * q >= limit:
                    bl = g.bit_length() - 1
                    if g > 1:
                        fac.append(math.ldexp(g, -bl))
                        shift += bl
                    g = 1
                if q is not None:
                    g *= q
        n_bits = 144 if primes is not P72M else 72
        shift -= n_bits * copies  # now: product of groups = (1 +- 2^-N)^copies * 2^-shift
        n = len(fac)
        s = rng.integers(-spread, spread + 1, n)
        t = int(rng.integers(-20, 21))
        c = t + shift - int(s.sum())
        lim = emax - 2
        while c:
            i = int(rng.integers(0, n))
            step = max(-lim - int(s[i]), min(lim - int(s[i]), c))
            s[i] += step
            c -= step
        neg = rng.random(n) < 0.5
        row = [(-1.0 if ng else 1.0) * math.ldexp(f, int(k)) for f, k, ng in zip(fac, s, neg)]
        rng.shuffle(row)
        rows.append(row)
        mag = lower if sign_of_eps < 0 else lower + 2.0 ** (1 - p)
        expected.append((-1.0 if neg.sum() % 2 else 1.0) * math.ldexp(mag, t))
    width = max(len(r) for r in rows)
    x = np.ones((nrows, width))
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
        rng.shuffle(x[i])
    return x.astype(dt), np.array(expected).astype(dt)


def _exact_count():
    from rewriter.kernels import _native

    return _native.exact_outputs()


def check_near_ties(dt, primes, sign_of_eps, copies, nrows, seed, spread, count=True):
    x, want = near_tie_rows(dt, nrows, copies, primes, sign_of_eps, seed, spread)
    assert same(oracle(x[:3], [1]).reshape(-1), want[:3])  # the construction is right
    for arr, axes in ((x, [1]), (np.ascontiguousarray(x.T), [0]), (np.ascontiguousarray(x.T)[::-1], [0])):
        before = _exact_count()
        got = reduce_prod(arr, axes).reshape(-1)
        assert same(got, want), (dt, axes, np.flatnonzero(got != want))
        if count:
            # every one of these outputs lies within the tier-1 error bound of a rounding
            # boundary, so tier 1 must not decide it: the exact path recomputes it
            assert _exact_count() - before == nrows


@pytest.mark.parametrize("sign_of_eps", [-1, 1])
def test_float64_products_next_to_a_midpoint(sign_of_eps):
    # dense 53-bit factors, rows of ~450 elements: tier 1's own error (~2^-100) is far
    # larger than the distance to the midpoint (~2^-137): only the bound saves the day
    primes = P144M if sign_of_eps < 0 else P144P
    check_near_ties(F64, primes, sign_of_eps, copies=150, nrows=45, seed=3 + sign_of_eps, spread=900)


def test_float64_short_rows_next_to_a_midpoint():
    check_near_ties(F64, P144M, -1, copies=2, nrows=13, seed=5, spread=300)


def test_float32_products_next_to_a_midpoint():
    # (1 - 2^-72)^k: 2^-49..2^-46 ulp below a float32 midpoint, inside tier 1's bound
    for k, seed in ((1, 1), (2, 2), (3, 3)):
        check_near_ties(F32, P72M, -1, copies=k, nrows=45, seed=seed, spread=100)


def test_float32_long_rows_next_to_a_midpoint():
    check_near_ties(F32, P72M, -1, copies=60, nrows=45, seed=9, spread=100, count=False)


# ------------------------------------------------------ random adversarial data
def _f64_values():
    specials = st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                                1.7976931348623157e308, 1.0, -1.0])
    subnormal = st.builds(lambda m: m * 2.0**-1074, st.integers(1, 2**52 - 1))
    huge = st.builds(lambda m, k: m * 2.0**k, st.floats(1, 2), st.integers(900, 1023))
    tiny = st.builds(lambda m, k: m * 2.0**k, st.floats(1, 2), st.integers(-1074, -900))
    near1 = st.builds(lambda k, j: 1 + k * 2.0**-j, st.integers(-3, 3), st.integers(25, 52))
    plain = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    return st.one_of(specials, subnormal, huge, tiny, near1, near1, plain)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_float64_random_adversarial(data):
    r = data.draw(st.integers(1, 40))
    c = data.draw(st.integers(1, 70))
    base = data.draw(st.lists(_f64_values(), min_size=8, max_size=8))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    x = rng.uniform(0.5, 2, (r, c)) * np.exp2(rng.integers(-60, 61, (r, c)))
    # sprinkle the drawn values: a few per array (most outputs stay finite and nonzero)
    for v in base:
        x[rng.integers(0, r), rng.integers(0, c)] = v
    for axes in ([0], [1], None):
        assert same(reduce_prod(x, axes), oracle(x, axes)), axes


def test_float64_huge_and_tiny_factors_cancel():
    rng = np.random.default_rng(8)
    k = rng.integers(-1000, 1001, (64, 96))
    k[:, -1] = -k[:, :-1].sum(axis=1).clip(-1074, 1023)  # mostly cancelling exponents
    with np.errstate(over="ignore"):
        x = rng.uniform(1, 2, (64, 96)) * np.exp2(k.astype(float))
    x[5, 7] = 5e-324
    x[6, :] = 2.0**-1074
    x[6, 0] = 2.0**1023
    for axes in ([0], [1], None):
        assert same(reduce_prod(x, axes), oracle(x, axes))


def test_float64_subnormal_and_overflowing_results():
    rng = np.random.default_rng(4)
    for target in (-1074, -1070, -1060, -1023, 1023, 1024):
        x = rng.uniform(1, 2, (40, 50))
        lg = np.log2(np.abs(x)).sum(axis=1)
        x[:, 0] *= np.exp2(np.round(target - lg))
        x[:, 1] *= rng.choice([-1.0, 1.0], 40)
        for axes in ([1], [0, 1]):
            assert same(reduce_prod(x, axes), oracle(x, axes))
        assert same(reduce_prod(x.T.copy(), [0]), oracle(x.T.copy(), [0]))


def test_float64_signed_zeros_inf_nan():
    x = np.full((50, 40), -1.5)
    x[0, 3], x[1, 3], x[2, 3] = -0.0, 0.0, -np.inf
    x[3, 3], x[3, 9] = 0.0, np.inf
    x[4, 3] = np.nan
    x[5, :] = -1.0
    x[5, 3] = 0.0
    for axes in ([0], [1], None):
        assert same(reduce_prod(x, axes), oracle(x, axes))
    r = reduce_prod(x, [1]).ravel()
    assert np.signbit(r[0]) == (np.signbit(x[0]).sum() % 2 == 1) and r[0] == 0
    assert np.isnan(r[3]) and np.isnan(r[4]) and np.isinf(r[2])


# ------------------------------------------------------------- every ISA variant
_ISA_SCRIPT = """
import sys
from tests.kernels import test_exactness as t
t.check_near_ties(t.F64, t.P144M, -1, copies=40, nrows=45, seed=11, spread=900)
t.check_near_ties(t.F64, t.P144P, 1, copies=40, nrows=13, seed=12, spread=900)
t.check_near_ties(t.F32, t.P72M, -1, copies=1, nrows=45, seed=13, spread=100)
t.test_float64_huge_and_tiny_factors_cancel()
t.test_float64_subnormal_and_overflowing_results()
from rewriter.kernels import _native
print(_native.ISA)
"""


@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
def test_every_isa_variant_rounds_correctly(isa):
    env = dict(os.environ, REWRITER_KERNEL_ISA=isa)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", _ISA_SCRIPT], env=env, cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


# ------------------------------------------------- the pure-Python fallback
@pytest.fixture
def no_native(monkeypatch):
    monkeypatch.setattr(kernels, "_native", None)
    monkeypatch.setattr(kernels, "_IMPORT_ERROR", ImportError("disabled by the test"))
    monkeypatch.setattr(kernels, "_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def test_fallback_warns_once(monkeypatch):
    monkeypatch.setattr(kernels, "_native", None)
    monkeypatch.setattr(kernels, "_IMPORT_ERROR", ImportError("disabled by the test"))
    monkeypatch.setattr(kernels, "_warned", False)
    with pytest.warns(RuntimeWarning, match="reference"):
        rewriter.reduce_prod(np.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rewriter.reduce_prod(np.ones(3))


def test_fallback_is_exact_on_large_float64(no_native):
    # (8, 10000) is above EXACT_LIMIT: the old fallback was off by up to 71 ulp here
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2, (8, 10000)) * np.exp2(rng.integers(-100, 101, (8, 10000)))
    x[1] = np.abs(x[1])
    x[2, 5] = -0.0
    x[3, 7] = np.inf
    x[4, 9] = 0.0
    x[4, 11] = -np.inf
    x[5, 13] = np.nan
    x[6, ::2] = 5e-324
    got = rewriter.reduce_prod(x, [1])
    assert same(got, oracle(x, [1]))
    assert np.signbit(got[2, 0]) == (np.signbit(x[2]).sum() % 2 == 1)


@pytest.mark.parametrize("dt", [F64, F32, F16, BF16])
def test_fallback_is_exact_on_adversarial_floats(no_native, dt):
    rng = np.random.default_rng(2)
    p, emin, emax, _ = FMT[dt]
    shape = (70, 1000)  # above EXACT_LIMIT
    k = rng.integers(emin - p + 1, emax + 1, shape)
    x = (rng.uniform(1, 2, shape) * np.exp2(k.astype(float)) * rng.choice([-1.0, 1.0], shape))
    x[:, -1] = 1.0
    with np.errstate(over="ignore"):
        x = x.astype(dt)
        # make most row products finite: compensate the exponents in the last column
        lg = np.round(np.log2(np.abs(x[:, :-1].astype(np.float64))).sum(axis=1))
        x[:, -1] = np.exp2(np.clip(-lg, emin - p + 1, emax)).astype(dt)
    x[0, 0], x[1, 1], x[2, 2], x[3, 3], x[3, 4], x[4, 4] = -0.0, 0.0, np.inf, 0.0, -np.inf, np.nan
    got = rewriter.reduce_prod(x, [1])
    assert same(got, oracle(x, [1]))
    assert same(rewriter.reduce_prod(x[:, :30], [1]), oracle(x[:, :30], [1]))  # below EXACT_LIMIT


@pytest.mark.parametrize("sign_of_eps", [-1, 1])
def test_fallback_next_to_a_midpoint(no_native, sign_of_eps):
    primes = P144M if sign_of_eps < 0 else P144P
    x, want = near_tie_rows(F64, 48, 400, primes, sign_of_eps, seed=7, spread=900)
    assert x.size > kernels.reference.EXACT_LIMIT
    assert same(rewriter.reduce_prod(x, [1]).reshape(-1), want)
    assert same(rewriter.reduce_prod(np.ascontiguousarray(x.T), [0]).reshape(-1), want)
    x32, want32 = near_tie_rows(F32, 44, 400, P72M, -1, seed=8, spread=100)
    assert x32.size > kernels.reference.EXACT_LIMIT
    assert same(rewriter.reduce_prod(x32, [1]).reshape(-1), want32)
