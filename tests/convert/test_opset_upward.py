"""The opset a runtime target gets: the newest at or below the model's where the runtime has every
op (or the conversion can write it), else the oldest above it that the runtime loads where it does
(LiteRT runs TopK-24 with k fed, not TopK-11). An op the project decomposes (Einsum) never holds
the choice back. ONNX Runtime, which runs the original, is the oracle for the results."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.errors import RewriterError


def _topk_model(opset: int, einsum: bool = False) -> onnx.ModelProto:
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, name="topk")]
    outputs = [helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 2]),
               helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2])]
    if einsum:
        nodes.append(helper.make_node("Einsum", ["x", "x"], ["e"], equation="ij,kj->ik", name="einsum"))
        outputs.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 2]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5]),
                                           helper.make_tensor_value_info("k", TensorProto.INT64, [1])], outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _profile(tmp_path, missing: dict, newest: int = 24) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"opsets": {"": newest}, "missing": {"": missing}}))
    return str(path)


def _run(model: onnx.ModelProto, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


FEEDS = {"x": np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.float32), "k": np.array([2], np.int64)}


def test_a_model_goes_up_when_no_opset_at_or_below_has_its_ops(tmp_path):
    model = _topk_model(16)
    out = rewriter.convert_opset(model, target=_profile(tmp_path, {"TopK": [1, 10, 11]}))
    assert out.opset_import[0].version == 24  # TopK-24: the first version the profile has
    onnx.checker.check_model(out, full_check=True)
    for got, want in zip(_run(out, FEEDS), _run(model, FEEDS)):
        np.testing.assert_array_equal(got, want)


def test_the_nearest_newer_opset_not_the_newest(tmp_path):
    out = rewriter.convert_opset(_topk_model(16), target=_profile(tmp_path, {"TopK": [1, 10, 11]}, newest=25))
    assert out.opset_import[0].version == 24


def test_down_is_preferred_when_an_opset_below_has_the_ops(tmp_path):
    out = rewriter.convert_opset(_topk_model(16), target=_profile(tmp_path, {"TopK": [11], "Relu": [14]}))
    assert out.opset_import[0].version == 10  # TopK-10 below, rather than TopK-24 above


def test_an_op_the_project_decomposes_does_not_hold_the_opset_back(tmp_path):
    model = _topk_model(16, einsum=True)
    out = rewriter.convert_opset(model, target=_profile(tmp_path, {"TopK": [1, 10, 11], "Einsum": [12]}))
    assert out.opset_import[0].version == 24
    assert {n.op_type for n in out.graph.node} >= {"TopK"} and "Einsum" not in {n.op_type for n in out.graph.node}
    for got, want in zip(_run(out, FEEDS), _run(model, FEEDS)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_nothing_above_either_still_names_the_node(tmp_path):
    with pytest.raises(RewriterError, match="topk"):
        rewriter.convert_opset(_topk_model(16), target=_profile(tmp_path, {"TopK": [1, 10, 11, 24]}))
