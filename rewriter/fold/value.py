"""The value a ReduceProd folds to, under an integer-overflow policy: the one computation of it,
for rewriter's fold (on ModelProto) and for the optimizer's constant folder (on onnx_ir).

Two lists that sound alike mean different things:

- the kernel's *modes* (:data:`rewriter.kernels._common.KERNEL_INT_OVERFLOW_MODES`): what
  ``reduce_prod`` returns for an integer product that does not fit its type, ``"wrap"`` (the
  product modulo 2^bits), ``"saturate"`` (clamped to the type's range) or ``"raise"``;
- the fold's *policies* (:data:`FOLD_INT_OVERFLOW_POLICIES`): what folding does with a node whose
  product overflows, ``"skip"`` (leave the node: runtimes disagree), ``"wrap"`` or ``"saturate"``
  (fold that value).

Each policy is computed by exactly one kernel mode, :data:`KERNEL_MODE`: ``"skip"`` is the mode
``"raise"``, the overflow turned into :class:`NotFoldable` for that node only.
"""

from __future__ import annotations

import numpy as np

from rewriter import kernels

__all__ = ["FOLD_INT_OVERFLOW_POLICIES", "KERNEL_MODE", "NotFoldable", "reduce_prod_value", "OVERFLOW_WHY",
           "SETTLED"]

FOLD_INT_OVERFLOW_POLICIES = ("skip", "wrap", "saturate")
"""What folding does with an integer ReduceProd whose product overflows (see the module doc)."""

KERNEL_MODE = {"skip": "raise", "wrap": "wrap", "saturate": "saturate"}
"""The kernel ``int_overflow`` mode that computes each fold policy."""

SETTLED = "rewriter.fold.settled"
"""The ``onnx_ir.Node.meta`` key :func:`rewriter.optimize.optimize_proto` sets, to the reason, on
a ReduceProd the exact fold judged with constant inputs and left (an overflow under ``"skip"``, a
type): the optimizer's own folder leaves it too, so each ReduceProd is decided by one of them."""

OVERFLOW_WHY = ("runtimes disagree on integer overflow: NumPy and the ONNX reference wrap, "
                "ONNX Runtime's CPU kernel saturates; --int-overflow wrap or saturate folds it anyway "
                "(in Python: int_overflow=)")


class NotFoldable(Exception):
    """The node stays as it is; the message says why."""


def reduce_prod_value(data: np.ndarray, axes, keepdims: bool, noop_with_empty_axes: bool,
                      policy: str) -> np.ndarray:
    """ReduceProd of ``data`` by the exact kernel in the mode ``policy`` maps to.

    Raises :class:`NotFoldable` when the data type is not one ReduceProd has or, under ``"skip"``,
    the integer product overflows; :class:`rewriter.errors.KernelError` when the axes are invalid.
    """
    data = np.asarray(data)
    if data.dtype not in kernels.SUPPORTED_DTYPES:
        raise NotFoldable(f"data type {data.dtype} is not supported by ReduceProd")
    mode = KERNEL_MODE[policy]
    if mode != "raise":
        return np.asarray(kernels.reduce_prod(data, axes, keepdims, noop_with_empty_axes, int_overflow=mode))
    # "raise" without its KernelError, which an invalid axis raises too: the checked result
    result, overflowed = kernels.reduce_prod_checked(data, axes, keepdims, noop_with_empty_axes)
    if overflowed:
        raise NotFoldable(f"the {data.dtype} product overflows; {OVERFLOW_WHY}")
    return np.asarray(result)
