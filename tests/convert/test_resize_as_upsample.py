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
from rewriter.targets.spec import TargetSpec
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


@pytest.mark.parametrize("source", [11, 13])
def test_a_runtime_lacking_resize_at_every_version_of_its_opsets_is_a_named_refusal(tmp_path, source):
    """A profile whose runtime lacks every Resize and Upsample from 9 on: Upsample cannot stand for
    Resize at opset 10 or later (it is deprecated there and becomes Resize again), so the node is
    refused by name, not taken round that circle."""
    from rewriter.cli.main import main

    profile = {"name": "no-resize", "opsets": {"": source}, "min_opsets": {"": 10}, "ir_version": 8,
               "missing": {"": {"Resize": [10, 11, 13, 18, 19], "Upsample": [9, 10]}}}
    (tmp_path / "p.json").write_text(__import__("json").dumps(profile))
    onnx.save(_resize(source), tmp_path / "m.onnx")
    code = main(["convert", str(tmp_path / "m.onnx"), "--target", str(tmp_path / "p.json"),
                 "-o", str(tmp_path / "out.onnx"), "-q"])
    assert code == 2 and not (tmp_path / "out.onnx").exists()
    with pytest.raises(ConversionBlocked, match="'up' \\(Resize\\).*does not implement Resize"):
        convert_model(_resize(source), TargetSpec.parse(source, target=str(tmp_path / "p.json")))
