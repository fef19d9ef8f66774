"""Per-axis QuantizeLinear (opset 13+) going to opsets 11 and 12, where only per-tensor exists:
Cast(Clip(Round(x / scale) + zero_point)) along the axis, written for the target (Round exists
from 11); below 11 refused. Oracle: ONNX Runtime on the original, bit for bit, on values that
include exact ties (half to even) and values beyond the 8-bit range (saturation)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from rewriter.convert.planner import ConversionBlocked
from tests.oracle import assert_valid, run


def _model(axis, zero_point, shape, constant=True, opset=13):
    channels = shape[axis]
    scale = np.linspace(0.5, 2.0, channels).astype(np.float32)
    inputs = ["x", "scale"] + (["zp"] if zero_point is not None else [])
    inits = [numpy_helper.from_array(scale, "scale")] if constant else []
    if zero_point is not None:
        inits.append(numpy_helper.from_array(np.arange(channels).astype(zero_point) * 3, "zp"))
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    if not constant:
        graph_inputs.append(helper.make_tensor_value_info("scale", TensorProto.FLOAT, [channels]))
    out = TensorProto.INT8 if zero_point is np.int8 else TensorProto.UINT8
    graph = helper.make_graph([helper.make_node("QuantizeLinear", inputs, ["y"], name="q", axis=axis)], "g",
                              graph_inputs, [helper.make_tensor_value_info("y", out, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model, scale


def _feeds(shape, axis, scale, constant):
    rng = np.random.default_rng(0)
    x = rng.uniform(-300, 300, shape).astype(np.float32)
    ties = (np.arange(x.size).reshape(shape) % 7 - 3 + 0.5).astype(np.float32)  # k + 0.5 exactly
    bshape = [1] * len(shape)
    bshape[axis] = -1
    x = np.where(np.arange(x.size).reshape(shape) % 2 == 0, ties * scale.reshape(bshape), x).astype(np.float32)
    return {"x": x} | ({} if constant else {"scale": scale})


@pytest.mark.parametrize("target", [11, 12])
@pytest.mark.parametrize("axis, shape", [(1, [2, 3, 4]), (0, [3, 5]), (-1, [2, 4]), (2, [2, 3, 4])])
@pytest.mark.parametrize("zero_point", [None, np.uint8, np.int8])
@pytest.mark.parametrize("constant", [True, False])
def test_per_axis_quantize_converts_exactly(target, axis, shape, zero_point, constant):
    model, scale = _model(axis, zero_point, shape, constant)
    converted, report = convert_model(model, target)
    assert_valid(converted)
    assert report.changes["per-axis QuantizeLinear -> Div/Round/Add/Clip/Cast"] == 1
    assert "QuantizeLinear" not in {n.op_type for n in converted.graph.node}
    assert [n.name for n in converted.graph.node if "y" in n.output] == ["q"]
    feeds = _feeds(shape, axis, scale, constant)
    np.testing.assert_array_equal(run(converted, feeds)[0], run(model, feeds)[0])


def test_below_11_is_refused_naming_the_targets_that_work():
    model, _ = _model(1, np.uint8, [2, 3, 4])
    with pytest.raises(ConversionBlocked, match=r"'q'.*QuantizeLinear 13 -> 10.*Round.*targets 11 and 12"):
        convert_model(model, 10)


def test_per_tensor_still_just_drops_the_axis():
    graph = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s"], ["y"], name="q", axis=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3])],
                              [numpy_helper.from_array(np.array(0.5, np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    converted, _ = convert_model(model, 11)
    assert [n.op_type for n in converted.graph.node] == ["QuantizeLinear"]
