"""STFT (17) decomposed below opset 17: with and without a window (constant or computed), with
and without frame_length, onesided or not, real and complex and rank-2 signals, static (Gather,
MatMul) and dynamic (strided Conv) signal lengths; against numpy.fft (float64, from the docs, in
spectral_util.py) and ONNX Runtime running the original at opset 17; the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from tests.convert.support.feature_util import refused
from tests.convert.support.spectral_util import D, F, H, close, converted, graph_model, ort, reference, stft_numpy

RNG = np.random.default_rng(3)
REAL = RNG.normal(size=(2, 40, 1)).astype(np.float32)
COMPLEX = RNG.normal(size=(2, 40, 2)).astype(np.float32)
HANN = np.hanning(12).astype(np.float32)


def _stft(signal, step, window=None, frame_length=None, attrs=None, dims=None, window_input=False, elem=F):
    inputs, inits = ["x", "s"], [("s", np.array(step, dtype=np.int64))]
    specs = [("x", elem, dims if dims is not None else list(signal.shape))]
    inputs.append("w" if window is not None else "")
    if window is not None:
        if window_input:
            specs.append(("w", elem, [len(window)]))
        else:
            inits.append(("w", window))
    if frame_length is not None:
        inputs.append("l")
        inits.append(("l", np.array(frame_length, dtype=np.int64)))
    while inputs[-1] == "":
        inputs.pop()
    return graph_model("STFT", inputs, attrs or {}, specs, inits, out_rank=4, elem=elem)


def _both(m, feeds, target=11, *, ort_original=True, **numpy_args):
    result = converted(m, target)
    got = ort(result, feeds)[0]
    close(got, stft_numpy(feeds["x"], **numpy_args), np.float32)
    if ort_original:
        close(got, ort(m, feeds)[0], np.float32)
    return result, got


def _ops(m):
    return {n.op_type for n in m.graph.node}


@pytest.mark.parametrize("target", [7, 11, 13, 15, 16])
@pytest.mark.parametrize("onesided", [0, 1])
def test_window(target, onesided):
    m = _stft(REAL, 4, HANN, attrs={"onesided": onesided})
    result, _ = _both(m, {"x": REAL}, target, step=4, window=HANN, onesided=bool(onesided))
    assert {"Gather", "MatMul"} <= _ops(result) and "Mul" not in _ops(result)  # the window is in the matrix


@pytest.mark.parametrize("onesided", [0, 1])
def test_frame_length_without_window(onesided):
    m = _stft(REAL, 5, frame_length=10, attrs={"onesided": onesided})
    _both(m, {"x": REAL}, step=5, frame_length=10, onesided=bool(onesided))


def test_window_and_equal_frame_length():
    _both(_stft(REAL, 3, HANN, frame_length=12), {"x": REAL}, step=3, window=HANN)


def test_neither_window_nor_frame_length_takes_the_signal_length():
    """The docs (onnx 1.23): the frame length is then the signal's; ONNX Runtime 1.32 fails on
    such a node (a negative output size), so numpy and onnx.reference are the oracles."""
    m = _stft(REAL, 7)
    result, got = _both(m, {"x": REAL}, step=7, ort_original=False)
    assert got.shape == (2, 1, 21, 2)
    close(got, reference(m, {"x": REAL})[0], np.float32)


@pytest.mark.parametrize("step", [1, 2, 11, 12, 29])
def test_frame_steps(step):
    _both(_stft(REAL, step, HANN), {"x": REAL}, step=step, window=HANN)


@pytest.mark.parametrize("onesided", [0, 1])
def test_complex_signal(onesided):
    """onesided with a complex signal: the first n//2+1 bins of its full DFT (onnx.reference and
    ONNX Runtime both do that; the docs say it is 'not possible')."""
    m = _stft(COMPLEX, 4, HANN, attrs={"onesided": onesided})
    _both(m, {"x": COMPLEX}, step=4, window=HANN, onesided=bool(onesided))


@pytest.mark.parametrize("dims", [[2, 40, 1], [None, None, 1]], ids=["static", "dynamic"])
def test_computed_window(dims):
    m = _stft(REAL, 4, HANN, dims=dims, window_input=True)
    w = RNG.uniform(size=12).astype(np.float32)
    result, _ = _both(m, {"x": REAL, "w": w}, step=4, window=w)
    assert "Mul" in _ops(result)


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("signal", [REAL, COMPLEX], ids=["real", "complex"])
def test_dynamic_signal_length_is_a_strided_conv(signal, onesided):
    m = _stft(signal, 4, HANN, attrs={"onesided": onesided}, dims=[None, None, signal.shape[2]])
    result, _ = _both(m, {"x": signal}, step=4, window=HANN, onesided=bool(onesided))
    assert "Conv" in _ops(result) and "Gather" not in _ops(result)
    for length in (12, 13, 57):  # other lengths at run time, the frame count floor((T - n) / 4) + 1
        x = RNG.normal(size=(3, length, signal.shape[2])).astype(np.float32)
        got = ort(result, {"x": x})[0]
        assert got.shape[1] == (length - 12) // 4 + 1
        close(got, stft_numpy(x, 4, HANN, onesided=bool(onesided)), np.float32)


@pytest.mark.parametrize("dims", [[2, 40], [None, None]], ids=["static", "dynamic"])
def test_rank_two_signal_is_real(dims):
    """[batch, length], as audio front ends export it: ONNX Runtime reads it as a real signal
    (onnx.reference would take dim -2, the batch, as the length)."""
    x = REAL[..., 0]
    m = _stft(x, 4, HANN, dims=dims)
    _both(m, {"x": x}, step=4, window=HANN)


def test_double_static_and_dynamic():
    x = RNG.normal(size=(2, 40, 1))
    w = np.hanning(12)
    for dims in ([2, 40, 1], [None, None, 1]):
        result = converted(_stft(x, 4, w, dims=dims, elem=D), 11)
        got = (ort if dims[1] else reference)(result, {"x": x})[0]  # ONNX Runtime has no double Conv
        assert got.dtype == np.float64
        close(got, stft_numpy(x, 4, w))


@pytest.mark.parametrize("dims", [[2, 40, 1], [None, None, 1]], ids=["static", "dynamic"])
def test_float16(dims):
    x = REAL.astype(np.float16)
    w = HANN.astype(np.float16)
    result = converted(_stft(x, 4, w, dims=dims, elem=H), 11)
    got = ort(result, {"x": x})[0]
    assert got.dtype == np.float16
    close(got, stft_numpy(x, 4, w).astype(np.float16))


def test_declared_output_shape_of_onnx_inference_is_corrected():
    """onnx 1.23's shape inference gives an STFT without ``onesided`` frame_length bins (the
    default is 1: frame_length // 2 + 1); a model saved with that shape converts, declaring
    what the op computes."""
    import onnx

    m = onnx.shape_inference.infer_shapes(_stft(REAL, 4, frame_length=8))
    assert [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim] == [2, 9, 8, 2]
    result, got = _both(m, {"x": REAL}, step=4, frame_length=8)
    assert [d.dim_value for d in result.graph.output[0].type.tensor_type.shape.dim] == [2, 9, 5, 2]


@pytest.mark.parametrize("target", [5, 6])
def test_old_opsets_on_the_reference(target):
    for dims in ([2, 40, 1], [None, None, 1]):
        result = converted(_stft(REAL, 4, HANN, dims=dims), target)
        close(reference(result, {"x": REAL})[0], stft_numpy(REAL, 4, HANN), np.float32)


# ------------------------------------------------------------------ refusals


def test_refused_computed_frame_step():
    m = graph_model("STFT", ["x", "s", "w"], {}, [("x", F, [2, 40, 1]), ("s", 7, [])], [("w", HANN)], out_rank=4)
    refused(m, 13, "'spectral'", "STFT decompose", "frame_step input 's' is not a constant", "targets >= 17")


def test_refused_computed_frame_length():
    m = graph_model("STFT", ["x", "s", "", "l"], {}, [("x", F, [2, 40, 1]), ("l", 7, [])],
                    [("s", np.array(4))], out_rank=4)
    refused(m, 13, "frame_length input 'l' is not a constant")


def test_refused_window_of_dynamic_length():
    m = graph_model("STFT", ["x", "s", "w"], {}, [("x", F, [2, 40, 1]), ("w", F, [None])], [("s", np.array(4))],
                    out_rank=4)
    refused(m, 13, "the length of the window 'w' is not static")


def test_refused_no_frame_length_and_dynamic_signal():
    m = _stft(REAL, 4, dims=[2, None, 1])
    refused(m, 13, "neither window nor frame_length is given")


def test_refused_frame_longer_than_signal():
    m = _stft(REAL[:, :8], 4, HANN)
    refused(m, 13, "the frame length 12 exceeds the signal's length 8")
    refused(_stft(REAL[:, :11], 1, HANN), 13, "the frame length 12 exceeds the signal's length 11")  # no frame
    _both(_stft(REAL[:, :12], 5, HANN), {"x": REAL[:, :12]}, step=5, window=HANN)  # one frame


def test_refused_window_length_not_frame_length():
    m = graph_model("STFT", ["x", "s", "w", "l"], {}, [("x", F, [2, 40, 1])],
                    [("s", np.array(4)), ("w", HANN), ("l", np.array(10))], out_rank=4)
    refused(m, 13, "the window's length 12 differs from frame_length 10")


def test_refused_rank_four_signal():
    m = graph_model("STFT", ["x", "s"], {}, [("x", F, [2, 3, 40, 1])], [("s", np.array(4))], out_rank=4)
    refused(m, 13, "has rank 4")


def test_refused_zero_step():
    refused(_stft(REAL, 0, HANN), 13, "frame_step is 0")
