"""The type-only step rule for ops other than ReduceProd, against onnx.defs and ORT."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.convert import convert_model
from tests.oracle import assert_same_outputs, assert_valid, run


def _node_model(op, opset, elem=TensorProto.FLOAT, **attrs):
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", elem, [2, 3])],
        [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


@pytest.mark.parametrize("target", [11, 13, 18, 28])
def test_mixed_sample_down_and_up_computes_the_same(target):
    model = onnx.load("models/mixed_opset13.onnx")
    result, report = convert_model(model, target)
    assert_valid(result)
    feeds = {"data": np.random.default_rng(0).uniform(-1, 2, size=[3, 2, 2]).astype(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("source,target", [(13, 11), (11, 13), (12, 13), (13, 12), (9, 18), (18, 9)])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family_across_13(op, source, target, axis):
    """axis changed meaning at 13 (flatten to 2-D at axis before, one axis from 13): rewriter's
    own adapters convert every axis of a known-rank input exactly, both ways, without onnx's
    converter (Flatten/op/Reshape going up, Transpose/op/Transpose going down)."""
    if source < 11 and axis < 0:
        return  # negative axes exist from opset 11
    model = _node_model(op, source, axis=axis)
    feeds = {"x": np.random.default_rng(1).normal(size=[2, 3]).astype(np.float32)}
    result, report = convert_model(model, target)
    assert report.own[op] == 1 and not report.delegated and not report.version_converter_called
    assert_valid(result)
    assert_same_outputs(run(model, feeds), run(result, feeds))


@pytest.mark.parametrize("source,target", [(18, 13), (14, 13), (13, 18), (21, 13), (16, 11)])
def test_identity_across_its_type_only_steps(source, target):
    """Identity-14 renamed its type parameter (T -> V) and added sequences: still type-only."""
    model = _node_model("Identity", source)
    result, report = convert_model(model, target)
    assert report.type_only == {"Identity": 1} and not report.version_converter_called
    assert_valid(result)
    feeds = {"x": np.random.default_rng(2).normal(size=[2, 3]).astype(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_loop_with_identity_body_goes_down_from_18():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "acc_in"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop"),
         helper.make_node("ReduceProd", ["y"], ["z"], name="prod", keepdims=0)], "g",
        [helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    result, report = convert_model(model, 13)
    assert not report.version_converter_called
    assert_valid(result)
    feeds = {"n": np.array(3, dtype=np.int64), "x": np.array([1.5, -2.0], dtype=np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def _if_model(then_shape, else_shape, opset=13):
    def branch(name, shape):
        return helper.make_graph([helper.make_node("Identity", ["x_" + name], [name])],
                                 name, [], [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch("t", then_shape),
                          else_branch=branch("e", else_shape), name="choose")], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, then_shape),
         helper.make_tensor_value_info("x_e", TensorProto.FLOAT, else_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_if_below_11_is_refused_when_its_branches_differ_in_shape():
    """If-1 wants both branches' outputs of the same shape; If-11 lets them differ."""
    differ = _if_model([2], [3])
    assert convert_model(differ, 11)[0] is not None
    with pytest.raises(rewriter.RewriterError, match="If"):
        convert_model(differ, 10)


