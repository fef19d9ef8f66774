"""The ``post_transform`` of ``ai.onnx.ml`` models as standard ONNX, the way ONNX Runtime writes
scores (``ml_common.h``): its scalar ComputeLogistic, ComputeProbit (ErfInv's approximation in
float), ComputeSoftmax and ComputeSoftmaxZero (running maximum from -FLT_MAX, sums left to right),
and where its linear kernels call MLAS (``batched_update_scores_inplace``) the ops whose ONNX
Runtime kernels call the same routine: Sigmoid (MlasComputeLogistic), Softmax (MlasComputeSoftmax).

Exactness: the arithmetic is the kernel's, operation for operation; exp and log are the runtime's
(ONNX Runtime's Exp/Log kernels against the C library's expf/logf), so transformed scores agree
to a few units in the last place (docs/lowering.md states the tolerance)."""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering.emit import Emitter

__all__ = ["TRANSFORMS", "transform", "logistic", "probit"]

TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
TOLERANCE = "exp/log are the runtime's: within a few ulp of onnxruntime's C library results"

_F = np.float32
_PI = _F(np.pi)
_A = _F(2) / (_PI * _F(0.147))  # 2 / (M_PI * 0.147f), in float as the kernel folds it
_B = _F(1) / _F(0.147)
_SQRT2 = _F(np.sqrt(2.0))


def _c(e: Emitter, v, hint="c") -> str:
    return e.const(_F(v), hint=hint)


def logistic(e: Emitter, x: str, out: str | None = None) -> str:
    """ComputeLogistic: v = 1 / (1 + exp(-|x|)); x < 0 ? 1 - v : v."""
    one = _c(e, 1, "one")
    v = e.op("Div", [one, e.op("Add", [one, e.op("Exp", [e.op("Neg", [e.op("Abs", [x])])])])])
    return e.op("Where", [e.op("Less", [x, _c(e, 0, "zero")]), e.op("Sub", [one, v]), v], out=out)


def probit(e: Emitter, x: str, out: str | None = None) -> str:
    """ComputeProbit: sqrt(2) * ErfInv(2x - 1), ErfInv by its log/sqrt approximation in float."""
    one = _c(e, 1, "one")
    y = e.op("Sub", [e.op("Mul", [_c(e, 2, "two"), x]), one])
    sgn = e.op("Where", [e.op("Less", [y, _c(e, 0, "zero")]), _c(e, -1, "minus_one"), one])
    t = e.op("Mul", [e.op("Sub", [one, y]), e.op("Add", [one, y])])
    log = e.op("Log", [t])
    v = e.op("Add", [_c(e, _A, "erfinv_a"), e.op("Mul", [_c(e, 0.5, "half"), log])])
    v2 = e.op("Mul", [_c(e, _B, "erfinv_b"), log])
    v3 = e.op("Add", [e.op("Neg", [v]), e.op("Sqrt", [e.op("Sub", [e.op("Mul", [v, v]), v2])])])
    erfinv = e.op("Mul", [sgn, e.op("Sqrt", [v3])])
    return e.op("Mul", [_c(e, _SQRT2, "sqrt2"), erfinv], out=out)


def _softmax(e: Emitter, x: str, width: int, zero_aware: bool, out: str | None) -> str:
    cols = e.columns(x, -1, width)
    m = e.running_max(cols, _c(e, -np.finfo(np.float32).max, "minus_max"))
    ex = e.op("Exp", [e.op("Sub", [x, m])])
    if not zero_aware:
        return e.op("Div", [ex, e.sequential_sum(e.columns(ex, -1, width))], out=out)
    eps = _c(e, _F(0.0000001), "eps")
    nonzero = e.op("Or", [e.op("Greater", [x, eps]), e.op("Less", [x, e.op("Neg", [eps])])])
    scaled = e.op("Mul", [x, e.op("Exp", [e.op("Neg", [m])])])
    values = e.op("Where", [nonzero, ex, scaled])
    terms = e.op("Where", [nonzero, ex, _c(e, 0, "zero")])
    return e.op("Div", [values, e.sequential_sum(e.columns(terms, -1, width))], out=out)


def transform(e: Emitter, x: str, width: int, how: str, *, mlas: bool, out: str | None = None) -> str:
    """Scores ``x`` ([..., width] float) after post_transform ``how`` on each row of ``width`` values:
    ``mlas`` for the linear kernels' batched form (LOGISTIC through MLAS always, SOFTMAX through
    MLAS from 5 columns), else the scalar form tree ensembles write."""
    if how == "NONE":
        return e.identity(x, out) if out is not None else x
    if how == "PROBIT":
        return probit(e, x, out)
    if how == "LOGISTIC":
        return e.op("Sigmoid", [x], out=out) if mlas else logistic(e, x, out)
    if how == "SOFTMAX" and mlas and width >= 5:
        return e.op("Softmax", [x], out=out, axis=-1)
    return _softmax(e, x, width, how == "SOFTMAX_ZERO", out)
