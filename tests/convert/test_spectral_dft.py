"""DFT (17, 20) decomposed below opset 17: each attribute and input one by one, against numpy.fft
(float64, written from the operator docs in spectral_util.py) and against ONNX Runtime running the
original at opset 17/20; the types; opsets below 7 on onnx.reference; the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from tests.convert.support.feature_util import refused
from tests.convert.support.spectral_util import B, D, F, H, I32, close, converted, dft_numpy, graph_model, ort, reference

RNG = np.random.default_rng(7)
X_REAL = RNG.normal(size=(2, 6, 5, 1)).astype(np.float32)
X_COMPLEX = RNG.normal(size=(2, 6, 5, 2)).astype(np.float32)


def _dft(x, attrs=None, length=None, opset=17, axis_input=None, elem=F, dims=None):
    inputs, inits = ["x"], []
    if length is not None or axis_input is not None:
        inputs.append("" if length is None else "L")
        if length is not None:
            inits.append(("L", np.array(length, dtype=np.int64)))
    if axis_input is not None:
        inputs.append("a")
        inits.append(("a", np.array(axis_input, dtype=np.int64)))
    return graph_model("DFT", inputs, attrs or {}, [("x", elem, dims or list(x.shape))], inits, opset=opset,
                       out_rank=np.ndim(x))


def _both(m, x, target, **numpy_args):
    """Converted to ``target``: equals numpy.fft and ONNX Runtime on the original."""
    result = converted(m, target)
    got = ort(result, {"x": x})[0]
    close(got, dft_numpy(x, **numpy_args), np.float32)
    close(got, ort(m, {"x": x})[0], np.float32)
    return result


@pytest.mark.parametrize("target", [7, 11, 13, 15, 16])
@pytest.mark.parametrize("x", [X_REAL, X_COMPLEX], ids=["real", "complex"])
def test_forward(x, target):
    _both(_dft(x), x, target, axis=1)


@pytest.mark.parametrize("axis", [0, 1, 2, -2, -3, -4])
@pytest.mark.parametrize("x", [X_REAL, X_COMPLEX], ids=["real", "complex"])
def test_axis_attribute(x, axis):
    result = _both(_dft(x, {"axis": axis}), x, 11, axis=axis)
    moved = axis % 4 != 2
    assert ("Transpose" in {n.op_type for n in result.graph.node}) == moved


@pytest.mark.parametrize("axis", [None, 0, 1, -2, -3])
def test_axis_input_of_dft_20(axis):
    m = _dft(X_COMPLEX, opset=20, axis_input=axis)
    _both(m, X_COMPLEX, 13, axis=-2 if axis is None else axis)


def test_absent_axis_input_of_dft_20_is_minus_two():
    m = graph_model("DFT", ["x"], {}, [("x", F, list(X_REAL.shape))], opset=20, out_rank=4)
    _both(m, X_REAL, 11, axis=-2)


@pytest.mark.parametrize("x", [X_REAL, X_COMPLEX], ids=["real", "complex"])
def test_inverse(x):
    _both(_dft(x, {"inverse": 1, "axis": 2}), x, 11, axis=2, inverse=True)


@pytest.mark.parametrize("length", [None, 3, 6, 10, 11])
def test_onesided_rfft(length):
    _both(_dft(X_REAL, {"onesided": 1}, length=length), X_REAL, 11, onesided=True, length=length)


def test_onesided_inverse_irfft_default_length():
    _both(_dft(X_COMPLEX, {"onesided": 1, "inverse": 1}), X_COMPLEX, 11, inverse=True, onesided=True)


@pytest.mark.parametrize("length", [4, 5, 6, 8, 9, 10, 11, 12, 13])
def test_onesided_inverse_irfft_lengths_against_numpy(length):
    """The docs' IRFFT is numpy.fft.irfft: the first floor(L/2)+1 bins are used (cut or
    zero-padded), DC's and an even L's Nyquist bin's imaginary parts ignored. ONNX Runtime 1.32
    agrees only when the input has exactly floor(L/2)+1 bins of an even L (0.88 off numpy for L=4
    on these 6 bins, 0.43 for L=11): numpy and onnx.reference are the oracles here."""
    m = _dft(X_COMPLEX, {"onesided": 1, "inverse": 1}, length=length)
    got = ort(converted(m, 11), {"x": X_COMPLEX})[0]
    close(got, dft_numpy(X_COMPLEX, inverse=True, onesided=True, length=length), np.float32)
    close(got, reference(m, {"x": X_COMPLEX})[0], np.float32)
    if length == 10:
        close(got, ort(m, {"x": X_COMPLEX})[0], np.float32)


@pytest.mark.parametrize("length", [1, 2, 3, 6, 9, 16])
@pytest.mark.parametrize("x", [X_REAL, X_COMPLEX], ids=["real", "complex"])
def test_dft_length_crops_or_pads(x, length):
    _both(_dft(x, {}, length=length), x, 11, length=length)
    _both(_dft(x, {"inverse": 1}, length=length), x, 13, inverse=True, length=length)


def test_dft_length_int32():
    m = graph_model("DFT", ["x", "L"], {}, [("x", F, list(X_REAL.shape))], [("L", np.array(4, dtype=np.int32))],
                    out_rank=4)
    _both(m, X_REAL, 11, length=4)


@pytest.mark.parametrize("length", [3, 6, 9])
def test_dynamic_length_along_the_axis_with_dft_length(length):
    m = _dft(X_REAL, {"axis": 1}, length=length, dims=[None, None, 5, 1])
    result = _both(m, X_REAL, 11, axis=1, length=length)
    assert {"Pad", "Slice"} <= {n.op_type for n in result.graph.node}
    x = RNG.normal(size=(3, 2, 5, 1)).astype(np.float32)  # another length at run time
    close(ort(result, {"x": x})[0], dft_numpy(x, axis=1, length=length), np.float32)


def test_dynamic_other_dims():
    m = _dft(X_COMPLEX, {"axis": 2}, dims=[None, None, 5, 2])
    result = converted(m, 11)
    x = RNG.normal(size=(1, 3, 5, 2)).astype(np.float32)
    close(ort(result, {"x": x})[0], dft_numpy(x, axis=2), np.float32)


def test_rank_two_signal():
    x = RNG.normal(size=(7, 2)).astype(np.float32)
    _both(_dft(x, {"axis": 0}), x, 11, axis=0)


def test_double():
    x = RNG.normal(size=(2, 9, 2))
    result = converted(_dft(x, {"inverse": 1}, elem=D), 11)
    got = ort(result, {"x": x})[0]
    assert got.dtype == np.float64
    close(got, dft_numpy(x, inverse=True))


def test_float16_is_summed_in_float():
    x = RNG.normal(size=(2, 16, 1)).astype(np.float16)
    result = converted(_dft(x, {"onesided": 1}, elem=H), 11)
    assert [n.op_type for n in result.graph.node][0] == "Cast"
    got = ort(result, {"x": x})[0]
    assert got.dtype == np.float16
    close(got, dft_numpy(x, onesided=True).astype(np.float16))
    close(got, reference(_dft(x, {"onesided": 1}, elem=H), {"x": x})[0])


def test_bfloat16_at_13_and_refused_below():
    import ml_dtypes

    x = RNG.normal(size=(2, 8, 1)).astype(ml_dtypes.bfloat16)
    m = _dft(x, {}, elem=B)
    got = reference(converted(m, 13), {"x": x})[0]
    close(got, dft_numpy(x.astype(np.float32)), ml_dtypes.bfloat16)
    refused(m, 11, "'spectral'", "bfloat16, which no op takes below opset 13")


@pytest.mark.parametrize("target", [5, 6])
def test_old_opsets_on_the_reference(target):
    result = converted(_dft(X_COMPLEX, {"axis": 2, "inverse": 1}), target)
    close(reference(result, {"x": X_COMPLEX})[0], dft_numpy(X_COMPLEX, axis=2, inverse=True), np.float32)


@pytest.mark.parametrize("target", [1, 2, 4])
def test_below_5_reshape_takes_the_shape_attribute(target):
    """No runtime here runs Reshape below 5 (onnx.reference starts at Reshape-5): valid, and the
    shape is Reshape-1's attribute."""
    result = converted(_dft(X_COMPLEX, {"axis": 2, "inverse": 1}), target)
    reshapes = [n for n in result.graph.node if n.op_type == "Reshape"]
    assert reshapes and all(len(n.input) == 1 and n.attribute[0].name == "shape" for n in reshapes)


def test_float16_refused_below_6():
    refused(_dft(X_REAL.astype(np.float16), elem=H), 5, "float16", "Cast takes a numeric 'to' only from opset 6")


def test_runtime_target_without_dft(tmp_path):
    """A runtime that lacks DFT at the model's own opset: decomposed, the opset kept."""
    import json

    import rewriter

    profile = tmp_path / "npu.json"
    profile.write_text(json.dumps({"opsets": {"": 17}, "ir_version": 8, "unsupported": {"": ["DFT"]}}))
    m = _dft(X_REAL, {"onesided": 1})
    result = rewriter.convert_opset(m, target=str(profile))
    assert "DFT" not in {n.op_type for n in result.graph.node}
    assert next(o.version for o in result.opset_import if o.domain == "") == 17
    close(ort(result, {"x": X_REAL})[0], dft_numpy(X_REAL, onesided=True), np.float32)


# ------------------------------------------------------------------ refusals


def test_refused_dynamic_length_without_dft_length():
    m = _dft(X_REAL, {"axis": 1}, dims=[2, None, 5, 1])
    refused(m, 13, "'spectral'", "DFT decompose", "not static and no dft_length is given", "targets >= 17")


def test_refused_computed_dft_length():
    m = graph_model("DFT", ["x", "L"], {}, [("x", F, [2, 6, 5, 1]), ("L", 7, [])], out_rank=4)
    refused(m, 11, "dft_length input 'L' is not a constant")


def test_refused_computed_axis():
    m = graph_model("DFT", ["x", "", "a"], {}, [("x", F, [2, 6, 5, 1]), ("a", 7, [])], opset=20, out_rank=4)
    refused(m, 11, "axis input 'a' is not a constant")


def test_refused_unknown_rank():
    m = graph_model("DFT", ["x"], {}, [("x", F, None)], out_rank=None)
    refused(m, 11, "the rank of input 'x' is unknown")


def test_refused_dynamic_last_dim():
    m = graph_model("DFT", ["x"], {}, [("x", F, [2, 6, None])], out_rank=3)
    refused(m, 11, "not a static 1 or 2")


def test_refused_huge_matrix():
    m = graph_model("DFT", ["x"], {}, [("x", F, [1, 8192, 2])], out_rank=3)
    refused(m, 11, "the DFT matrix would hold", "limit")


def test_refused_integer_type():
    m = graph_model("DFT", ["x"], {}, [("x", I32, [2, 6, 1])], out_rank=3, elem=F)
    refused(m, 11, "int32", "float, double, float16 or bfloat16")
