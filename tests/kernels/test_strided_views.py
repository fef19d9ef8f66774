"""ReduceProd kernel on non-contiguous views.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

The oracle is exact arithmetic: Python integers (``math.prod`` over object arrays) for the
integer types, and for floats small integers whose products float64 and float32 hold
exactly, so that np.prod in float64 on a contiguous copy is the exact value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewriter import reduce_prod as public_reduce_prod
from rewriter.kernels import NATIVE_AVAILABLE, reduce_prod, reduce_prod_checked


def _exact(x: np.ndarray, axes, keepdims=True) -> np.ndarray:
    """The exact product, by Python integers on a contiguous copy, as an object array."""
    c = np.ascontiguousarray(x).astype(object)
    axes = tuple(range(c.ndim)) if not axes else tuple(a % c.ndim for a in axes)
    out = np.empty([1 if i in axes else d for i, d in enumerate(c.shape)], dtype=object)
    for idx in np.ndindex(*out.shape):
        sel = tuple(slice(None) if i in axes else slice(j, j + 1) for i, j in enumerate(idx))
        out[idx] = math.prod(int(v) for v in c[sel].reshape(-1))
    if not keepdims:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in axes])
    return out


def _data(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    # values in -3..3 without 0: products of a few of them are exact in every type used here
    v = rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)
    if np.dtype(dtype).kind == "u":
        v = np.abs(v)
    return v.astype(dtype)


def _check(view: np.ndarray, axes, keepdims=True) -> None:
    assert not view.flags.c_contiguous or view.ndim < 2  # the premise: a real strided view
    want = _exact(view, axes, keepdims)
    for fn in (reduce_prod, public_reduce_prod):
        got = fn(view, axes, keepdims=keepdims)
        assert got.dtype == view.dtype
        assert got.shape == want.shape, (got.shape, want.shape)
        assert [int(v) for v in got.reshape(-1)] == [int(v) for v in want.reshape(-1)], (axes, got, want)
        # and the kernel agrees with itself on a contiguous copy of the same elements
        same = fn(np.ascontiguousarray(view), axes, keepdims=keepdims)
        np.testing.assert_array_equal(got, same)
    got, over = reduce_prod_checked(view, axes, keepdims=keepdims)
    assert not over
    assert [int(v) for v in got.reshape(-1)] == [int(v) for v in want.reshape(-1)]


DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64]


def test_native_kernel_is_the_one_tested():
    assert NATIVE_AVAILABLE


@pytest.mark.parametrize("dtype", DTYPES)
def test_reversed_rows_reduced_along_the_columns(dtype):
    """x[::-1] has a negative stride on the kept axis 0: the rows' products come in x[::-1]'s order."""
    x = _data(dtype, (5, 4))
    view = x[::-1]
    _check(view, [1])
    _check(view, [1], keepdims=False)
    _check(view, [-1])
    # by hand: row i of the result is the product of row 4 - i of x
    got = reduce_prod(view, [1], keepdims=False)
    for i in range(5):
        assert int(got[i]) == math.prod(int(v) for v in x[4 - i])


@pytest.mark.parametrize("dtype", DTYPES)
def test_flipped_kept_axes_in_three_dims(dtype):
    x = _data(dtype, (3, 4, 5), seed=1)
    _check(x[:, ::-1, :], [0])
    _check(x[:, ::-1, :], [2], keepdims=False)
    _check(x[::-1, :, ::-1], [1])
    _check(x[::-1, ::-1, ::-1], [0])
    _check(x[::-1, ::-1, ::-1], [1, 2])
    _check(x[::-1, :, ::-2], [1])
    _check(x[:, ::-1, :].transpose(2, 0, 1), [1])  # transposed and flipped
    _check(x[::-1].transpose(1, 2, 0), [0], keepdims=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_other_non_contiguous_views(dtype):
    x = _data(dtype, (6, 5), seed=2)
    for axes in ([0], [1], None):
        _check(x[:, ::2], axes)
        _check(x.T, axes)
        _check(x[::2, 1:], axes)
        _check(x.T[::-1], axes)


def test_reversed_view_of_a_float_product_is_exact():
    """float32 products computed exactly and rounded once, on a reversed view: compared with
    float64 np.prod on a contiguous copy (exact here: at most 24 bits of product)."""
    x = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    view = x[::-1]
    got = reduce_prod(view, [1], keepdims=False)
    want = np.prod(np.ascontiguousarray(view).astype(np.float64), axis=1)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    np.testing.assert_array_equal(got, [10 * 11 * 12, 7 * 8 * 9, 4 * 5 * 6, 1 * 2 * 3])
