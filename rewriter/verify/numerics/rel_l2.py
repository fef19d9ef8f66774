"""Comparing a half-precision rewrite with its float32 source: relative L2 error per output."""

from __future__ import annotations

import numpy as np
import onnx

__all__ = ["cast_feeds", "compare_rel_l2", "rel_l2_measure", "tolerance", "HALF_RMS_FLOOR"]

HALF_RMS_FLOOR = 1e-5  # an output whose values all lie near 0 (sigmoid of large negatives) compares by this


def cast_feeds(model: onnx.ModelProto, feeds: dict) -> dict:
    """``feeds`` with each float array cast to the float type ``model``'s input declares."""
    out = dict(feeds)
    for v in model.graph.input:
        elem = v.type.tensor_type.elem_type
        if v.name in out and out[v.name].dtype.kind == "f" and elem:
            out[v.name] = out[v.name].astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    return out


def rel_l2_measure(a: np.ndarray, b: np.ndarray) -> tuple:
    """(relative L2 error of ``b`` against ``a`` over the finite values, RMS difference, max abs
    difference, reason): the reason is "" or why the two cannot be compared by value (another
    shape, NaN or infinities elsewhere), and then the figures are None (inf for infinities)."""
    if a.shape != b.shape:
        return None, None, None, f"shape {a.shape} vs {b.shape}"
    x, y = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(x), np.isnan(y)):
        return None, None, None, "NaN in different places"
    if not np.array_equal(np.where(np.isinf(x), x, 0), np.where(np.isinf(y), y, 0)):
        return None, None, float("inf"), "infinities differ"
    finite = np.isfinite(x)
    delta = y[finite] - x[finite]  # the infinities (equal on both sides, checked above) left out
    diff = float(np.linalg.norm(delta))
    norm = float(np.linalg.norm(x[finite]))
    error = diff / norm if norm > 0 else diff
    rms = diff / np.sqrt(max(int(finite.sum()), 1))
    return error, rms, float(np.max(np.abs(delta))) if finite.any() else 0.0, ""


def tolerance(limit: float, floor: float | None) -> float:
    """A half-precision output's tolerance: ``max(limit, 2 x floor)``, the floor being the
    source's own error on its inputs rounded (:mod:`rewriter.precision.floor`); the limit when no
    floor is known or it is infinite (rounding the inputs alone changes the output's shape)."""
    if floor is None or not np.isfinite(floor):
        return limit
    return max(limit, 2.0 * floor)


def compare_rel_l2(a: np.ndarray, b: np.ndarray, limit: float, floor: float | None = None) -> tuple:
    """Relative L2 error of ``b`` against ``a``: (dtype text, max abs diff or None, tolerance
    text, ok, reason); NaN and infinities must be where they are in ``a``. ``floor``: the
    source's own error with its inputs rounded to half (:mod:`rewriter.precision.floor`): the
    limit is then max(limit, 2 x floor), and the text says the floor."""
    dtype = f"{a.dtype}" if a.dtype == b.dtype else f"{a.dtype} / {b.dtype}"
    allowed = tolerance(limit, floor)
    tol = f"relative L2 <= {allowed:.2g} (2 x floor)" if allowed > limit else f"relative L2 <= {limit:g}"
    shown = "" if floor is None else f", floor {floor:.2g}" if np.isfinite(floor) else \
        ", floor n/a (rounding the inputs alone changes it)"
    error, rms, largest, reason = rel_l2_measure(a, b)
    if reason:
        return (dtype, largest, tol + shown, False, reason)
    ok = error <= allowed or rms <= HALF_RMS_FLOOR  # outputs all near 0: the absolute noise of half precision
    return (dtype, largest, f"{tol} or RMS difference <= {HALF_RMS_FLOOR:g}, measured {error:.2g} (RMS {rms:.2g})"
            f"{shown}", ok, "" if ok else "beyond tolerance")
