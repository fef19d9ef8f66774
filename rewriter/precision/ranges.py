"""How a float32 constant fares in float16: its largest and smallest magnitudes (read in
chunks), whether it leaves float16's range, and where flushing tiny values to 0 is harmless."""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.io.deferred import chunks
from rewriter.precision.rounding import F16_MAX

__all__ = ["magnitudes", "out_of_range", "only_huge", "flush_matters"]

_F16 = np.finfo(np.float16)
_F16_TINY = float(_F16.smallest_subnormal)  # anything nonzero below it becomes 0
_F16_NORMAL = float(_F16.smallest_normal)


def magnitudes(value: np.ndarray) -> tuple[float, float]:
    """(largest, smallest nonzero) finite magnitude of ``value``, read in chunks (a weight
    mapped from its file is never read whole into memory); (0, inf) when it has none."""
    top, low = 0.0, float("inf")
    for part in chunks(value):
        a = np.abs(np.asarray(part, dtype=np.float32))
        finite = np.isfinite(a)
        top = max(top, float(np.max(a, where=finite, initial=0.0)))
        low = min(low, float(np.min(a, where=finite & (a > 0), initial=np.inf)))
    return top, low


def out_of_range(value: np.ndarray, flush_matters: bool = True) -> bool:
    """Whether a float32 constant loses more than rounding in float16: finite values beyond
    its range (they become inf), or all its nonzero values below float16's normal range (an
    epsilon of 1e-12 becomes 0; a few tiny weights among larger ones flush to 0 harmlessly).
    ``flush_matters`` False: the constant is a bias added to a sum (tiny values vanish beside
    it in float32 too), only the upper bound counts."""
    top, _ = magnitudes(value)
    return top > F16_MAX or (flush_matters and 0 < top < _F16_NORMAL)


def only_huge(value: np.ndarray) -> bool:
    """Out of range only by magnitudes beyond float16's (mask fills: -1e9, float32's lowest)."""
    return magnitudes(value)[1] >= _F16_TINY


# (op, input) where a constant is a bias added to a computed sum: Conv/ConvTranspose/Gemm's
# bias; a tiny one (BatchNorm folded with a mean equal to the batch's) flushing to 0 changes
# the result by less than float16's rounding of the sum
_BIAS_SLOTS = frozenset({("Conv", 2), ("ConvTranspose", 2), ("Gemm", 2)})


def flush_matters(node: onnx.NodeProto, i: int, value: np.ndarray) -> bool:
    """Whether flushing an all-tiny constant to 0 changes what ``node`` computes beyond
    rounding: not for a bias (above), nor for a per-element Add/Sub operand of more than one
    value (a folded bias); yes for scalars (epsilons added before a Sqrt or a Div) and for
    every other use (scales, weights)."""
    if (node.op_type, i) in _BIAS_SLOTS:
        return False
    return not (node.op_type in ("Add", "Sub") and np.asarray(value).size > 1)
