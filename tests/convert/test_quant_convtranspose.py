"""A QDQ group's float ConvTranspose written as ONNX Runtime sums it (``sequential_fma_in_double``, tract
0.23's quantized_forms): the rewritten graph gives ONNX Runtime's float ConvTranspose bit for bit (MLAS:
one fused multiply-add per input channel, in channel order), also in tract; other geometries are left."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.convert.lowering.quant_convtranspose import MAX_CHANNELS, sequential_conv_transposes

RNG = np.random.default_rng(7)


def _model(cin=24, cout=5, kernel=(2, 2), strides=(2, 2), bias=False, group=1, hw=(6, 7)):
    w = RNG.integers(-127, 128, size=(cin, cout // group, *kernel)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "wq"), numpy_helper.from_array(np.float32(0.0123), "ws"),
             numpy_helper.from_array(np.int8(0), "wz"), numpy_helper.from_array(np.float32(0.0371), "xs"),
             numpy_helper.from_array(np.uint8(118), "xz"), numpy_helper.from_array(np.float32(0.0517), "ys"),
             numpy_helper.from_array(np.uint8(121), "yz")]
    inputs = ["xd", "wd"]
    if bias:  # (quantized as QDQ exporters write it: int32 codes at x_scale * w_scale)
        inits.append(numpy_helper.from_array(RNG.integers(-999, 999, size=cout).astype(np.int32), "bq"))
        inits.append(numpy_helper.from_array(np.float32(0.0371 * 0.0123), "bs"))
        inputs.append("b")
    nodes = [helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"], name="dq_b")] if bias else []
    nodes += [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dq_w"),
             helper.make_node("ConvTranspose", inputs, ["y"], name="up", kernel_shape=list(kernel), strides=list(strides),
                              group=group),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"], name="q_y"),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"], name="dq_y")]
    dims = [1, cout, *((d - 1) * s + k for d, s, k in zip(hw, strides, kernel))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.UINT8, [1, cin, *hw])],
                              [helper.make_tensor_value_info("out", T.FLOAT, dims),
                               helper.make_tensor_value_info("y", T.FLOAT, dims)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def _feeds(cin=24, hw=(6, 7)):
    return {"x": RNG.integers(0, 256, size=(1, cin, *hw)).astype(np.uint8)}


def _ort(model, feeds, optimized=True):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_the_written_chain_is_onnx_runtimes_convtranspose_bit_for_bit():
    model, feeds = _model(), _feeds()
    want = _ort(model, feeds)
    assert sequential_conv_transposes(model) == 1
    assert "ConvTranspose" not in {n.op_type for n in model.graph.node}
    got = _ort(model, feeds, optimized=False)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.int32), w.view(np.int32))
    # (a plain float32 sum in the same order is not: the chain's multiply-adds are what matches)
    x = (feeds["x"].astype(np.float32) - 118) * np.float32(0.0371)
    wd = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "wq").astype(np.float32) * np.float32(0.0123)
    plain = np.zeros((1, 5, 6, 7), np.float32)
    for c in range(24):
        plain = (plain + x[:, c:c + 1] * wd[c, :, 0, 0].reshape(1, 5, 1, 1)).astype(np.float32)
    assert np.count_nonzero(plain != want[1][:, :, ::2, ::2]) > 0


@pytest.mark.parametrize("change", [{"kernel": (3, 3), "strides": (2, 2)}, {"strides": (1, 1)}, {"bias": True},
                                    {"group": 2, "cin": 24, "cout": 6}, {"cin": MAX_CHANNELS + 1}])
def test_other_geometries_are_left(change):
    model = _model(**change)
    assert sequential_conv_transposes(model) == 0
    assert "ConvTranspose" in {n.op_type for n in model.graph.node}


def test_a_convtranspose_of_float_inputs_is_left():
    """Only a QDQ group's (both inputs DequantizeLinear outputs): a float model's sums are the runtime's own."""
    model = _model()
    model.graph.node[0].CopyFrom(helper.make_node("Cast", ["x"], ["xd"], name="dq_x", to=T.FLOAT))
    assert sequential_conv_transposes(model) == 0


def test_tract_runs_it_as_onnx_runtime_computes_it():
    from rewriter.convert.for_target import convert_for
    from tests.targets.runtime_runs import run_in

    model, feeds = _model(), _feeds()
    want = _ort(model, feeds)
    result, report = convert_for(model, runtime="tract==0.23")
    assert any("float ConvTranspose written as ONNX Runtime sums it" in n for n in report.target_notes)
    ran = run_in("tract", "0.23", result, feeds)
    assert ran.get("ok"), ran
    for got, w in zip(ran["values"], want):
        np.testing.assert_array_equal(np.asarray(got).reshape(w.shape), w)
