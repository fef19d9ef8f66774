"""The ReduceProd kernel used by the fold pass: exact, native, multi-threaded.

Public functions (``rewriter.reduce_prod`` is :func:`reduce_prod`):

``reduce_prod(data, axes=None, keepdims=True, noop_with_empty_axes=False, int_overflow="wrap")``
    ONNX ReduceProd on a numpy array of one of :data:`SUPPORTED_DTYPES` (float32,
    float64, float16, bfloat16 as ``ml_dtypes.bfloat16``, int32, int64, uint32, uint64),
    any rank (0-d included), any layout (strided, transposed, negative strides).
    ``axes`` follows ONNX: negative axes count from the end; duplicates or out-of-range
    axes raise :class:`rewriter.errors.KernelError`; ``None`` or empty reduces every axis,
    unless ``noop_with_empty_axes`` is true, in which case a copy of ``data`` is returned.
    Reducing zero elements gives 1.

    Floats: the exact product rounded once to the output type (nearest, ties to even),
    independent of element order; partial products never overflow or underflow.
    NaN anywhere or 0 x inf gives NaN; signs of zero/inf follow IEEE; results beyond
    the range are +-inf, tiny results are correctly rounded subnormals or +-0.

    Integers: the exact product modulo 2**bits (two's complement). Overflow means the
    true product is outside the type's range (a partial product that does not fit is
    not an overflow). ``int_overflow``: ``"wrap"`` (default) returns the wrapped product,
    ``"saturate"`` clamps to the type's range, ``"raise"`` raises KernelError naming the
    dtype, shape and axes.

``reduce_prod_checked(data, axes=None, keepdims=True, noop_with_empty_axes=False)``
    Returns ``(wrapped_result, overflowed)``: the ``"wrap"`` result and whether any
    output element overflowed (always False for floats; an infinite float result is
    not an integer overflow). The fold pass uses it to skip overflowing nodes.

``reduce_prod_reference(...)`` / ``reduce_prod_reference_checked(...)``
    The pure Python/numpy oracle (see :mod:`rewriter.kernels.reference`).

``NATIVE_AVAILABLE`` tells whether the C extension ``rewriter.kernels._native`` was
imported; without it the functions above warn once and run the reference instead.
The number of threads is the CPUs available to the process, or the environment
variable ``REWRITER_KERNEL_THREADS``.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from rewriter.errors import KernelError
from rewriter.kernels._common import (
    SUPPORTED_DTYPES,
    check_dtype,
    check_int_overflow,
    describe,
    normalize_axes,
    output_shape,
)
from rewriter.kernels.reference import reduce_prod_reference, reduce_prod_reference_checked

try:
    from rewriter.kernels import _native
except ImportError as exc:  # pragma: no cover - exercised only without a build
    _native = None
    _IMPORT_ERROR = exc
    NATIVE_AVAILABLE = False
else:
    _IMPORT_ERROR = None
    NATIVE_AVAILABLE = True

__all__ = [
    "reduce_prod",
    "reduce_prod_checked",
    "reduce_prod_reference",
    "reduce_prod_reference_checked",
    "SUPPORTED_DTYPES",
    "NATIVE_AVAILABLE",
    "kernel_threads",
    "native_extension",
]

# raw bit types handed to the extension, by type code
_RAW = (np.uint32, np.uint64, np.uint16, np.uint16, np.int32, np.int64, np.uint32, np.uint64)
_warned = False


def native_extension():
    """The native extension module, or None when it is not built. Besides ReduceProd it holds
    the rounding of weights to half that keeps sums, bound in :mod:`rewriter.precision.rounding`."""
    return _native


def kernel_threads() -> int:
    """Threads the native kernels use: ``REWRITER_KERNEL_THREADS``, else the CPUs available."""
    env = os.environ.get("REWRITER_KERNEL_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _canonical(arr: np.ndarray):
    """A C-contiguous array holding arr's elements with some axis order and flips.

    Returns (carr, perm, flips): carr == arr[flips].transpose(perm) (a view if possible).
    """
    nd = arr.ndim
    if arr.flags.c_contiguous:
        return arr, list(range(nd)), []
    flips = [i for i in range(nd) if arr.strides[i] < 0 and arr.shape[i] > 1]
    if flips:
        arr = arr[tuple(slice(None, None, -1) if i in flips else slice(None) for i in range(nd))]
    perm = sorted(range(nd), key=lambda i: -arr.strides[i] if arr.shape[i] > 1 else 0)
    t = arr.transpose(perm)
    if not t.flags.c_contiguous:
        t = np.ascontiguousarray(t)  # e.g. a strided slice: one copy, then memory order
    return t, perm, flips


def _native_reduce(arr: np.ndarray, code: int, axes: tuple[int, ...], keepdims: bool, mode: int):
    shape = arr.shape
    final = output_shape(shape, axes, keepdims)
    if arr.size == 0:
        return np.ones(final, dtype=arr.dtype), 0
    if arr.ndim == 0:
        arr = arr.reshape(1)
        axes = (0,)
    carr, perm, flips = _canonical(arr)
    mask = tuple(1 if p in axes else 0 for p in perm)
    kept = [p for p in perm if p not in axes]
    raw = np.empty(tuple(shape[p] for p in kept) if shape else (), dtype=_RAW[code])
    nover = _native.reduce(
        carr.view(_RAW[code]).reshape(-1), raw.reshape(-1), code,
        tuple(int(d) for d in carr.shape), mask, mode, kernel_threads(),
    )
    res = raw.view(arr.dtype)
    if kept != sorted(kept):
        res = res.transpose(np.argsort(kept))
    kept_sorted = sorted(kept)
    fk = [kept_sorted.index(i) for i in flips if i in kept_sorted]
    if fk:
        res = res[tuple(slice(None, None, -1) if j in fk else slice(None) for j in range(res.ndim))]
    return np.ascontiguousarray(res).reshape(final), nover


def _run(data, axes, keepdims, noop_with_empty_axes, int_overflow):
    arr = np.asarray(data)
    code = check_dtype(arr, axes)
    check_int_overflow(int_overflow)
    ax = normalize_axes(arr, axes, noop_with_empty_axes)
    if ax is None:
        return arr.copy(), False
    if _native is None:
        global _warned
        if not _warned:
            warnings.warn(
                f"rewriter.kernels._native could not be imported ({_IMPORT_ERROR}); "
                "using the slow pure-numpy reference ReduceProd",
                RuntimeWarning,
                stacklevel=3,
            )
            _warned = True
        return reduce_prod_reference_checked(arr, axes, keepdims, noop_with_empty_axes, saturate=int_overflow == "saturate")
    res, nover = _native_reduce(arr, code, ax, bool(keepdims), 1 if int_overflow == "saturate" else 0)
    return res, nover > 0


def reduce_prod(data, axes=None, keepdims=True, noop_with_empty_axes=False, int_overflow="wrap") -> np.ndarray:
    """ONNX ReduceProd, exact (see the module docstring)."""
    res, over = _run(data, axes, keepdims, noop_with_empty_axes, int_overflow)
    if over and int_overflow == "raise":
        arr = np.asarray(data)
        raise KernelError(f"{describe(arr, axes)}: integer overflow: the product does not fit in {arr.dtype}")
    return res


def reduce_prod_checked(data, axes=None, keepdims=True, noop_with_empty_axes=False):
    """(wrapped result, whether any integer output overflowed)."""
    return _run(data, axes, keepdims, noop_with_empty_axes, "wrap")
