"""The constant matrices of the DFT and STFT decompositions (``spectral.py``), in float64.

A matrix ``A`` of shape ``[n, channels, bins, out_channels]`` maps a signal of ``n`` samples
(``channels`` 1 for real, 2 for real and imaginary parts) to ``bins`` outputs of
``out_channels`` parts (2: complex; 1: the real signal of an IRFFT):
``y[k, p] = sum_{j, c} x[j, c] * A[j, c, k, p]``, the definition of ONNX's DFT written out:

- forward: ``y[k] = sum_j x[j] e^{-2 pi i jk/L}``, i.e. ``re = xr cos + xi sin``,
  ``im = xi cos - xr sin``; onesided keeps ``k < floor(L/2) + 1``;
- inverse: ``x[j] = 1/L sum_k y[k] e^{+2 pi i jk/L}``, i.e. ``re = (xr cos - xi sin)/L``,
  ``im = (xr sin + xi cos)/L``;
- inverse onesided (IRFFT, ``numpy.fft.irfft``): the one-sided spectrum stands for the Hermitian
  full one, so ``x[t] = 1/L sum_k w_k (Re X_k cos - Im X_k sin)`` with ``w_k`` 1 for the DC bin and,
  for even L, the Nyquist bin (whose imaginary parts are ignored), 2 for the others.

``L`` is the DFT length: samples past it are dropped (zero rows), a shorter signal is zero-padded
(rows that would multiply the padding are simply absent). Angles are reduced exactly
(``jk mod L``) before the cosine and sine are taken, so every entry is the float64 rounding of its
exact value.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dft_matrix", "conv_weights"]


def _cos_sin(rows: int, cols: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    m = (np.arange(rows, dtype=np.int64)[:, None] * np.arange(cols, dtype=np.int64)[None, :]) % length
    theta = (2.0 * np.pi / length) * m
    return np.cos(theta), np.sin(theta)


def dft_matrix(n: int, channels: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """``A[j, c, k, p]`` (float64) of the DFT of ``n`` samples of ``channels`` parts at DFT
    length ``length``; see the module docstring."""
    if inverse and onesided:  # IRFFT: the first floor(L/2)+1 input bins, a real output of L samples
        used = min(n, length // 2 + 1)
        cos, sin = _cos_sin(used, length, length)
        weight = np.full(used, 2.0)
        weight[0] = 1.0
        sin[0] = 0.0
        if length % 2 == 0 and used > length // 2:
            weight[length // 2] = 1.0
            sin[length // 2] = 0.0
        a = np.zeros((n, channels, length, 1))
        a[:used, 0, :, 0] = weight[:, None] * cos / length
        if channels == 2:
            a[:used, 1, :, 0] = -weight[:, None] * sin / length
        return a
    bins = length // 2 + 1 if onesided else length
    used = min(n, length)
    cos, sin = _cos_sin(used, bins, length)
    a = np.zeros((n, channels, bins, 2))
    if not inverse:
        a[:used, 0, :, 0], a[:used, 0, :, 1] = cos, -sin
        if channels == 2:
            a[:used, 1, :, 0], a[:used, 1, :, 1] = sin, cos
    else:
        a[:used, 0, :, 0], a[:used, 0, :, 1] = cos / length, sin / length
        if channels == 2:
            a[:used, 1, :, 0], a[:used, 1, :, 1] = -sin / length, cos / length
    return a


def conv_weights(a: np.ndarray) -> np.ndarray:
    """``A[j, c, k, p]`` as Conv weights ``[bins * parts, channels, n]``: output channel
    ``k * parts + p`` of a 1-D convolution over the samples is ``y[k, p]``."""
    n, channels, bins, parts = a.shape
    return np.ascontiguousarray(a.transpose(2, 3, 1, 0).reshape(bins * parts, channels, n))
