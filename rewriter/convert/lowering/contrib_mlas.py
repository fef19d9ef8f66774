"""Float functions of ONNX Runtime's MLAS written out in numpy, operation for operation, for the
tables a lowering builds as the kernel builds them (QLinearSigmoid's 256 entries):
``MlasComputeLogisticF32KernelFma3`` (``mlas/lib/x86_64/LogisticKernelFma3.S``, the constants of
``mlas/lib/logistic.cpp``)."""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering.contrib_common import fma32

__all__ = ["logistic"]

_F = np.float32
_LOWER, _UPPER = _F(-18.0), _F(18.0)
_ALPHA = [_F(v) for v in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
                          2.48287947061529e-01)]  # alpha_9, 7, 5, 3, 1
_BETA = [_F(v) for v in (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
                         1.16817656904453e-01, 9.93151921023180e-01)]  # beta_10, 8, 6, 4, 2, 0


def logistic(x: np.ndarray) -> np.ndarray:
    """The FMA3 kernel: clamp to [-18, 18], p/q rational polynomial with fused multiply-adds,
    p / q + 0.5, then max(0, .) (NaN passes through)."""
    x = np.asarray(x, _F)
    v = np.where(np.isnan(x), x, np.minimum(_UPPER, np.maximum(_LOWER, x))).astype(_F)
    x2 = (v * v).astype(_F)
    p = fma32(x2, _ALPHA[0], _ALPHA[1])
    for c in _ALPHA[2:]:
        p = fma32(x2, p, c)
    p = (v * p).astype(_F)
    q = fma32(x2, _BETA[0], _BETA[1])
    for c in _BETA[2:]:
        q = fma32(x2, q, c)
    with np.errstate(all="ignore"):
        r = ((p / q).astype(_F) + _F(0.5)).astype(_F)
    return np.where(np.isnan(r), r, np.maximum(_F(0), r)).astype(_F)
