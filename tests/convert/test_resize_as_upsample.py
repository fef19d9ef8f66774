"""Resize going below opset 10, where it does not exist: Resize-10 is Upsample-9 under its new
name, so the node goes down to Resize-10 by its own steps (which refuse what 10 cannot say),
becomes Upsample and goes on down (scales an attribute again below 9).

Oracle: ONNX Runtime on the original and on the result."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from rewriter.convert.planner import ConversionBlocked
from tests.oracle import assert_valid, run

F = TensorProto.FLOAT
X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)


def _resize(opset, mode="nearest", **attrs):
    attrs = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"} | attrs \
        if mode == "nearest" else {"coordinate_transformation_mode": "asymmetric"} | attrs
    inputs = ["x", "", "scales"] if opset >= 13 else ["x", "roi", "scales"]  # roi required at 11
    graph = helper.make_graph([helper.make_node("Resize", inputs, ["y"], name="up", mode=mode, **attrs)], "g",
                              [helper.make_tensor_value_info("x", F, [2, 3, 4, 5])],
                              [helper.make_tensor_value_info("y", F, [2, 3, 8, 15])],
                              [numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales"),
                               numpy_helper.from_array(np.zeros([0], np.float32), "roi")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("source", [11, 13, 18])
@pytest.mark.parametrize("target", [7, 8, 9])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_below_10_becomes_upsample(source, target, mode):
    model = _resize(source, mode)
    converted, report = convert_model(model, target)
    assert_valid(converted)
    assert [n.op_type for n in converted.graph.node] == ["Upsample"]
    assert converted.graph.node[0].name == "up"
    assert report.changes["Resize-10 -> Upsample"] == 1
    np.testing.assert_array_equal(run(converted, {"x": X})[0], run(model, {"x": X})[0])


def test_what_resize_10_cannot_say_is_refused_at_its_step():
    model = _resize(13, "cubic")
    with pytest.raises(ConversionBlocked, match="'up'.*Resize 11 -> 10.*cubic"):
        convert_model(model, 9)
