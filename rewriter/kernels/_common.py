"""Argument checking and shape rules shared by the native kernel and the reference."""

from __future__ import annotations

import numbers

import ml_dtypes
import numpy as np

from rewriter.errors import KernelError

__all__ = [
    "SUPPORTED_DTYPES",
    "KERNEL_INT_OVERFLOW_MODES",
    "INT_OVERFLOW_MODES",
    "check_dtype",
    "check_int_overflow",
    "normalize_axes",
    "output_shape",
    "describe",
]

#: The 8 ReduceProd element types, in the order of the native kernel's type codes.
SUPPORTED_DTYPES: tuple[np.dtype, ...] = tuple(
    np.dtype(t)
    for t in (
        np.float32,
        np.float64,
        np.float16,
        ml_dtypes.bfloat16,
        np.int32,
        np.int64,
        np.uint32,
        np.uint64,
    )
)
#: What ``reduce_prod`` returns for an integer product that does not fit its type: the wrapped
#: product, the clamped one, or a KernelError (the fold's policies are rewriter.fold's list).
KERNEL_INT_OVERFLOW_MODES = ("wrap", "saturate", "raise")
INT_OVERFLOW_MODES = KERNEL_INT_OVERFLOW_MODES  # the old name


def describe(data: np.ndarray, axes) -> str:
    return f"ReduceProd(dtype={data.dtype}, shape={tuple(data.shape)}, axes={axes!r})"


def check_dtype(data: np.ndarray, axes=None) -> int:
    """Return the type code of data's dtype, or raise KernelError."""
    for code, dt in enumerate(SUPPORTED_DTYPES):
        if data.dtype == dt:
            return code
    raise KernelError(
        f"{describe(data, axes)}: unsupported dtype {data.dtype}; "
        f"supported: {', '.join(str(d) for d in SUPPORTED_DTYPES)}"
    )


def check_int_overflow(mode) -> str:
    if not isinstance(mode, str) or mode not in KERNEL_INT_OVERFLOW_MODES:
        raise KernelError(
            f"int_overflow must be one of {', '.join(KERNEL_INT_OVERFLOW_MODES)}, got {mode!r}"
        )
    return mode


def normalize_axes(data: np.ndarray, axes, noop_with_empty_axes: bool) -> tuple[int, ...] | None:
    """Sorted non-negative reduced axes, or None when the reduction is an identity."""
    rank = data.ndim
    if axes is None:
        ax: list = []
    elif isinstance(axes, (numbers.Integral, np.integer)) and not isinstance(axes, bool):
        ax = [axes]
    else:
        try:
            ax = list(np.asarray(axes).reshape(-1).tolist()) if isinstance(axes, np.ndarray) else list(axes)
        except TypeError:
            raise KernelError(f"{describe(data, axes)}: axes must be a sequence of integers") from None
    if not ax:
        if noop_with_empty_axes:
            return None
        return tuple(range(rank))
    out = []
    for a in ax:
        if isinstance(a, bool) or not isinstance(a, (numbers.Integral, np.integer)):
            raise KernelError(f"{describe(data, axes)}: axis {a!r} is not an integer")
        a = int(a)
        if not -rank <= a < rank:
            raise KernelError(
                f"{describe(data, axes)}: axis {a} is out of range for rank {rank} "
                f"(valid range [{-rank}, {rank - 1}])"
            )
        a = a + rank if a < 0 else a
        if a in out:
            raise KernelError(f"{describe(data, axes)}: axis {a} appears more than once")
        out.append(a)
    return tuple(sorted(out))


def output_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)
