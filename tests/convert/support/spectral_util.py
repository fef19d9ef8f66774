"""Shared helpers of the DFT/STFT decomposition tests (test_spectral_*.py): model builders, the
numpy.fft oracles written from the operator docs, and the tolerance for reordered sums.

Tolerance: the decomposition sums in another order than an FFT (a dot product of n terms), so
results are compared with ``rtol`` and an ``atol`` that follows the output's magnitude (the
rounding of a sum grows with its terms, and outputs that are exactly 0 in one order are a few
ulps of the largest term in another): float ``1e-5 * max|expected|``, double ``1e-12 *``,
float16/bfloat16 ``4e-3 *`` (one rounding of a float result, as the reference's float64 FFT
rounded to float16).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx.reference
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from tests.oracle import assert_valid

__all__ = ["TOL", "close", "converted", "dft_numpy", "graph_model", "ort", "reference", "stft_numpy"]

TOL = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-10, 1e-12),
       np.dtype(np.float16): (4e-3, 4e-3), np.dtype(ml_dtypes.bfloat16): (3e-2, 3e-2)}


def close(got, want, dtype=None) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    rtol, scale = TOL[np.dtype(dtype or got.dtype)]
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=scale * max(1.0, float(np.abs(w).max(initial=0))))


def graph_model(op, inputs, attrs, feeds_spec, initializers=(), opset=17, out_rank=None, elem=None):
    """One ``op`` node; ``feeds_spec`` (name, elem_type, dims) graph inputs; the output's rank
    declared, its dims not (onnx's STFT inference gets absent ``onesided`` wrong)."""
    elem = elem or feeds_spec[0][1]
    node = helper.make_node(op, inputs, ["y"], name="spectral", **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(*f) for f in feeds_spec],
        [helper.make_tensor_value_info("y", elem, [None] * out_rank if out_rank else None)],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in initializers])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def ort(m, feeds):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def reference(m, feeds):
    return [np.asarray(o) for o in onnx.reference.ReferenceEvaluator(m).run(None, feeds)]


def converted(m, target):
    """``m`` converted to ``target``: valid (full check, strict inference), no DFT/STFT left."""
    result, _ = convert_model(m, target)
    assert_valid(result)
    assert not {n.op_type for n in result.graph.node} & {"DFT", "STFT"}
    assert next(o.version for o in result.opset_import if o.domain == "") == target
    return result


def _complex(x):
    x = np.asarray(x, dtype=np.float64)
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def _parts(z):
    return np.stack([z.real, z.imag], axis=-1)


def dft_numpy(x, axis=1, inverse=False, onesided=False, length=None):
    """ONNX DFT from its docs, with numpy.fft in float64: ``axis`` of the input (signal dims
    exclude the last); RFFT keeps floor(L/2)+1 bins; IRFFT is numpy.fft.irfft."""
    rank = np.ndim(x)
    axis %= rank
    z = _complex(x)
    n = x.shape[axis]
    if inverse and onesided:
        length = length or 2 * (n - 1)
        return np.fft.irfft(z, n=length, axis=axis)[..., None]
    length = length or n
    y = np.fft.ifft(z, n=length, axis=axis) if inverse else np.fft.fft(z, n=length, axis=axis)
    if onesided:
        y = np.take(y, np.arange(length // 2 + 1), axis=axis)
    return _parts(y)


def stft_numpy(signal, step, window=None, frame_length=None, onesided=True):
    """ONNX STFT from its docs: frames of frame_length every step, times the window, DFT."""
    s = np.asarray(signal, dtype=np.float64)
    if s.ndim == 2:
        s = s[..., None]
    z = _complex(s)
    n = frame_length or (len(window) if window is not None else z.shape[1])
    frames = (z.shape[1] - n) // step + 1
    f = np.stack([z[:, i * step:i * step + n] for i in range(frames)], axis=1)
    if window is not None:
        f = f * np.asarray(window, dtype=np.float64)
    y = np.fft.fft(f, axis=-1)
    if onesided:
        y = y[..., : n // 2 + 1]
    return _parts(y)


F, D, H, B, I64, I32 = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16,
                        TensorProto.INT64, TensorProto.INT32)
