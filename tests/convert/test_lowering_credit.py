"""A refusal of a node a lowering wrote names the model's node it replaced: the user has no node
called 'g_Erf', but has 'g' (BiasGelu)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.cli.main import main
from rewriter.convert import convert_for
from rewriter.convert.planner import ConversionBlocked

H = 4


def _model() -> onnx.ModelProto:
    bias = numpy_helper.from_array(np.linspace(-1, 1, H).astype(np.float32), "b")
    nodes = [helper.make_node("Relu", ["X"], ["r"], name="relu"),
             helper.make_node("BiasGelu", ["r", "b"], ["Y"], name="g", domain="com.microsoft")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", T.FLOAT, [2, H])],
                              [helper.make_tensor_value_info("Y", T.FLOAT, [2, H])], initializer=[bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


@pytest.fixture()
def profile(tmp_path):
    data = {"name": "no-erf", "opsets": {"": 17}, "ir_version": 9, "missing": {"": {"Erf": [9, 13]}}}
    (tmp_path / "p.json").write_text(json.dumps(data))
    return str(tmp_path / "p.json")


def test_the_refusal_names_the_lowered_node_and_its_origin(profile):
    with pytest.raises(ConversionBlocked) as e:
        convert_for(_model(), runtime=profile)
    text = str(e.value)
    assert "(Erf)" in text and "a node the lowering of node 'g' (BiasGelu) wrote" in text
    assert "'relu'" not in text


def test_the_plan_names_it_too(profile, tmp_path, capsys):
    onnx.save(_model(), tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), "--target", profile, "--plan"]) == 2
    assert "a node the lowering of node 'g' (BiasGelu) wrote" in capsys.readouterr().out


def test_a_model_node_is_not_credited(tmp_path):
    """The model's own Erf, blocked, stays as it is named."""
    model = _model()
    model.graph.node[0].op_type = "Erf"
    model.graph.node[0].name = "g_own"  # a name that starts like the lowered node's owner
    data = {"name": "no-erf", "opsets": {"": 17}, "ir_version": 9, "missing": {"": {"Erf": [9, 13]}}}
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(ConversionBlocked) as e:
        convert_for(model, runtime=str(tmp_path / "p.json"))
    text = str(e.value)
    own = text.split("node 'g_own' (Erf)")[1].split("; node")[0]
    assert "does not implement Erf-13" in own and "a node the lowering" not in own and "a node the conversion" not in own
    assert text.count("a node the lowering of node 'g' (BiasGelu) wrote") == 1
