"""The floor of a half-precision result's integer and boolean outputs (the labels of detections
after a score threshold and NMS, an ArgMax): the share of their values that change when only
the float32 source's float inputs are rounded to the half type. Such an output is judged as
its float neighbours are, within twice its floor: at most ``2 x floor`` of its values may
differ; with a floor of 0 it must be equal. An output whose shape rounding the inputs alone
changes has no floor (infinite): it must be equal, as before (see
:mod:`rewriter.precision.floor` for the float outputs). A floor of 0.5 or more, float or
integer, lets any output pass: such an output is not verified (:func:`floor_checks_nothing`).
"""

from __future__ import annotations

import math

import numpy as np

from rewriter.verify.numerics.report import OutputComparison

__all__ = ["compare_integers", "floor_checks_nothing", "integer_floors", "is_exact_kind"]

NO_FLOOR = ", floor n/a (rounding the inputs alone changes it)"


def is_exact_kind(array) -> bool:
    """An integer or boolean array (compared value by value, not by relative L2 error)."""
    return np.asarray(array).dtype.kind in "iub"


def _share_differing(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return math.inf
    return float(np.mean(a != b)) if a.size else 0.0


def integer_floors(floors: list | None, want: list, got: list) -> list | None:
    """``floors`` with each integer or boolean output's floor: the share of ``want`` (the source's
    outputs) that ``got`` (the source on its inputs rounded) changes; infinity for another shape.
    Unchanged when ``got`` is empty (no input rounded, or no floor known)."""
    if floors is None or not got:
        return floors
    return [_share_differing(np.asarray(a), np.asarray(b)) if is_exact_kind(a) else f
            for f, a, b in zip(floors, want, got)]


def floor_checks_nothing(floor: float | None) -> str:
    """Why an output judged within ``2 x floor`` was checked for nothing: a floor of 0.5 or more
    (a relative L2 error of 1 is an output of zeros; a share of 1 is every value changed) lets
    any output pass; "" otherwise."""
    if floor is None or not math.isfinite(floor) or floor < 0.5:
        return ""
    return (f"rounding only the inputs to half moves the float32 model's output by {floor:.2g}, and "
            f"2 x floor lets any output pass: --keep-io-precision computes the nodes reading them in float32")


def compare_integers(name: str, dtype: str, a: np.ndarray, b: np.ndarray, floor: float) -> OutputComparison:
    """``b`` against ``a`` (the source's output) for an output whose floor is above 0."""
    largest = None
    if a.shape == b.shape and a.size and a.dtype.kind in "iu" and b.dtype.kind in "iu":
        largest = float(np.max(np.abs(a.astype(object) - b.astype(object))))
    elif a.shape == b.shape:
        largest = float(not np.array_equal(a, b))
    if not math.isfinite(floor):
        same = a.shape == b.shape and np.array_equal(a, b)
        reason = "" if same else f"shape {a.shape} vs {b.shape}" if a.shape != b.shape else "integers differ"
        return OutputComparison(name, dtype, largest, "exact" + NO_FLOOR, same, reason, floor=floor)
    allowed = min(1.0, 2.0 * floor)
    tol = f"at most {allowed:.2g} of the values differ (2 x floor)"
    if a.shape != b.shape:
        return OutputComparison(name, dtype, None, f"{tol}, floor {floor:.2g}", False,
                                f"shape {a.shape} vs {b.shape}", floor=floor)
    share = _share_differing(a, b)
    ok = share <= allowed
    return OutputComparison(name, dtype, largest, f"{tol}, measured {share:.2g}, floor {floor:.2g}", ok,
                            "" if ok else "integers differ", floor=floor)
