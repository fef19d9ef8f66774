"""16-bit QuantizeLinear / DequantizeLinear (opset 21) below 21 as arithmetic, per tensor and per
axis, and the int32 (bias) DequantizeLinear per axis below 13. Oracles: ONNX Runtime on the
original (opset 21) and on the result, onnx.reference on both, bit for bit; exact numpy
arithmetic for the edge values (0 and 65535, negative int16, zero points at the extremes,
saturation, ties)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from tests.convert.support.expressible import why_inexpressible
from tests.convert.support.feature_util import model, reference, refused
from tests.oracle import assert_valid, run

U16, I16 = TensorProto.UINT16, TensorProto.INT16
NP = {U16: np.uint16, I16: np.int16}
LIMITS = {U16: (0, 65535), I16: (-32768, 32767)}


def _dq_model(elem, x_shape, scale, zero_point=None, axis=None, constant=True, scale_elem=TensorProto.FLOAT):
    inputs = ["x", "s"] + (["zp"] if zero_point is not None else [])
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("DequantizeLinear", inputs, ["y"], name="dq", **attrs)
    sdt = helper.tensor_dtype_to_np_dtype(scale_elem)
    inits = [numpy_helper.from_array(np.asarray(scale, sdt), "s")]
    graph_inputs = [("x", elem, x_shape)]
    if zero_point is not None:
        if constant:
            inits.append(numpy_helper.from_array(np.asarray(zero_point, NP.get(elem, np.int32)), "zp"))
        else:
            graph_inputs.append(("zp", elem, list(np.shape(zero_point))))
    return model([node], 21, graph_inputs, [("y", scale_elem, None)], initializers=inits)


def _q_model(elem, x_shape, scale, zero_point=None, axis=None, output_dtype=None):
    inputs = ["x", "s"] + (["zp"] if zero_point is not None else [])
    attrs = {} if axis is None else {"axis": axis}
    if output_dtype:
        attrs["output_dtype"] = output_dtype
    node = helper.make_node("QuantizeLinear", inputs, ["y"], name="q", **attrs)
    inits = [numpy_helper.from_array(np.asarray(scale, np.float32), "s")]
    if zero_point is not None:
        inits.append(numpy_helper.from_array(np.asarray(zero_point, NP[elem]), "zp"))
    return model([node], 21, [("x", TensorProto.FLOAT, x_shape)], [("y", elem, None)], initializers=inits)


def _bit_for_bit(m, target, feeds, want=None):
    result, report = convert_model(m, target)
    assert_valid(result)
    assert result.opset_import[0].version == target
    assert not {"QuantizeLinear", "DequantizeLinear"} & {n.op_type for n in result.graph.node}
    assert [n.name for n in result.graph.node if "y" in n.output] == [m.graph.node[0].name]
    outputs = [run(m, feeds)[0], reference(m, feeds)[0], run(result, feeds)[0], reference(result, feeds)[0]]
    if want is not None:
        outputs.append(want)
    for got in outputs[1:]:
        assert got.dtype == outputs[0].dtype and got.shape == outputs[0].shape
        np.testing.assert_array_equal(got, outputs[0])
    return result, report


@pytest.mark.parametrize("target", [10, 11, 13, 19])
@pytest.mark.parametrize("elem, zero_point", [(U16, 0), (U16, 65535), (U16, 30000), (I16, -32768), (I16, 32767),
                                              (I16, -5), (U16, None), (I16, None)])
def test_dequantize_16_bit_per_tensor_edges(elem, zero_point, target):
    lo, hi = LIMITS[elem]
    x = np.array([lo, hi, 0 if lo else 1, lo + 1, hi - 1, 12345 if hi > 40000 else -12345], NP[elem])
    scale = np.float32(0.0123)
    m = _dq_model(elem, [6], scale, zero_point)
    zp = 0 if zero_point is None else zero_point
    want = ((x.astype(np.float64) - zp) * np.float64(scale)).astype(np.float32)  # one rounding: exact difference
    _, report = _bit_for_bit(m, target, {"x": x}, want)
    assert report.changes["16-bit DequantizeLinear -> Cast/Sub/Mul"] == 1


@pytest.mark.parametrize("target", [10, 11, 13, 19])
@pytest.mark.parametrize("axis, shape", [(1, [2, 3, 4]), (0, [3, 5]), (-1, [2, 4]), (2, [2, 3, 4])])
@pytest.mark.parametrize("elem", [U16, I16])
@pytest.mark.parametrize("constant", [True, False])
def test_dequantize_16_bit_per_axis(elem, axis, shape, target, constant):
    channels = shape[axis]
    lo, hi = LIMITS[elem]
    rng = np.random.default_rng(channels)
    x = rng.integers(lo, hi + 1, size=shape).astype(NP[elem])
    x.reshape(-1)[:2] = [lo, hi]
    zp = np.linspace(lo, hi, channels).astype(NP[elem])
    scale = np.linspace(0.001, 3.0, channels).astype(np.float32)
    m = _dq_model(elem, shape, scale, zp, axis=axis, constant=constant)
    feeds = {"x": x} | ({} if constant else {"zp": zp})
    _, report = _bit_for_bit(m, target, feeds)
    assert report.changes["per-axis DequantizeLinear -> Cast/Sub/Mul"] == 1


def test_dequantize_16_bit_float16_scale():
    x = np.array([0, 65535, 40000, 7], np.uint16)
    m = _dq_model(U16, [4], np.float16(0.01), 32768, scale_elem=TensorProto.FLOAT16)
    result, _ = convert_model(m, 19)
    assert_valid(result)
    want = reference(m, {"x": x})[0]  # ONNX Runtime's float16 kernel rounds the product itself
    assert want.dtype == np.float16
    np.testing.assert_array_equal(reference(result, {"x": x})[0], want)
    np.testing.assert_array_equal(run(result, {"x": x})[0], want)


@pytest.mark.parametrize("target", [11, 13, 19])
@pytest.mark.parametrize("elem, zero_point", [(U16, 0), (U16, 65535), (U16, 1000), (I16, -32768), (I16, 32767),
                                              (I16, 0), (U16, None)])
def test_quantize_16_bit_per_tensor_saturation_and_ties(elem, zero_point, target):
    scale = np.float32(0.5)
    x = np.array([-1e9, 1e9, -40000.25, 40000.25, 0.25, 0.75, -0.25, -0.75, 1.25, 16383.75, -16384.25, 3e7,
                  -3e7, 12.0, -12.0, 1e-30], np.float32)  # k.5 exactly after the division: half to even
    m = _q_model(elem if zero_point is not None else U16, [16], scale, zero_point,
                 output_dtype=None if zero_point is not None else U16)
    lo, hi = LIMITS[elem]
    want = np.clip(np.rint(x.astype(np.float64) / 0.5) + (zero_point or 0), lo, hi).astype(NP[elem])
    _, report = _bit_for_bit(m, target, {"x": x}, want)
    assert report.changes["16-bit QuantizeLinear -> Div/Round/Add/Clip/Cast"] == 1


@pytest.mark.parametrize("target", [11, 12, 13, 19])
@pytest.mark.parametrize("axis, shape", [(1, [2, 3, 4]), (0, [3, 5]), (-1, [2, 4])])
@pytest.mark.parametrize("elem", [U16, I16])
def test_quantize_16_bit_per_axis(elem, axis, shape, target):
    channels = shape[axis]
    lo, hi = LIMITS[elem]
    scale = np.linspace(0.01, 2.0, channels).astype(np.float32)
    zp = np.linspace(lo, hi, channels).astype(NP[elem])
    rng = np.random.default_rng(0)
    x = rng.uniform(-70000, 70000, shape).astype(np.float32)
    m = _q_model(elem, shape, scale, zp, axis=axis)
    _, report = _bit_for_bit(m, target, {"x": x})
    assert report.changes["per-axis QuantizeLinear -> Div/Round/Add/Clip/Cast"] == 1


def test_quantize_16_bit_below_11_is_refused():
    m = _q_model(U16, [4], np.float32(0.5), 7)
    refused(m, 10, "'q'", "QuantizeLinear 21 -> 19", "16-bit", "Round", "opset 11")


def test_dequantize_16_bit_blocked_is_refused():
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dq", axis=1, block_size=2)
    m = model([node], 21, [("x", U16, [2, 4])], [("y", TensorProto.FLOAT, None)],
              initializers=[numpy_helper.from_array(np.ones([2, 2], np.float32), "s")])
    refused(m, 19, "'dq'", "block_size=2")


@pytest.mark.parametrize("target", [11, 12])
def test_int32_bias_per_axis_below_13(target):
    """The biases onnxruntime.quantization writes per channel: int32 with a zero zero point."""
    x = np.array([[2 ** 24 + 1, -(2 ** 31), 2 ** 31 - 1], [5, -7, 0]], np.int32).T.copy()
    scale = np.array([0.001, 3.5, 1e-7], np.float32)
    m = _dq_model(TensorProto.INT32, [3, 2], scale, np.zeros(3, np.int32), axis=0)
    m.opset_import[0].version = 13
    result, _ = convert_model(m, target)
    assert_valid(result)
    for got in (run(result, {"x": x})[0], reference(result, {"x": x})[0]):
        np.testing.assert_array_equal(got, run(m, {"x": x})[0])
    nonzero = _dq_model(TensorProto.INT32, [3, 2], scale, np.array([1, 0, 0], np.int32), axis=0)
    nonzero.opset_import[0].version = 13
    refused(nonzero, target, "'dq'", "int32 only with a zero zero point")


# ---------------------------------------------------------------- the oracle agrees

@pytest.mark.parametrize("target", [7, 9, 10, 11, 13, 19])
@pytest.mark.parametrize("m", [
    _dq_model(U16, [4], 0.5, 3), _dq_model(I16, [2, 3], [0.5, 1, 2], [1, 2, 3], axis=1),
    _dq_model(U16, [4], 0.5, 3, scale_elem=TensorProto.FLOAT16), _q_model(U16, [4], 0.5, 3),
    _q_model(I16, [2, 3], [0.5, 1, 2], [1, 2, 3], axis=1), _q_model(U16, [4], 0.5, output_dtype=U16)],
    ids=lambda m: f"{m.graph.node[0].op_type}-{len(m.graph.node[0].input)}-{m.graph.initializer[0].data_type}")
def test_oracle_routes_match_the_converter(m, target):
    g = onnx.shape_inference.infer_shapes(m).graph
    types = {vi.name: vi.type for vi in [*g.input, *g.output, *g.value_info]}
    types.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    why = why_inexpressible(g.node[0], 21, target, types.get, consts.get)
    try:
        convert_model(m, target)
        converted = True
    except Exception:  # noqa: BLE001
        converted = False
    assert converted == (why is None), why
