"""Constant across opsets: value_* forms (12), sparse_value (11), Constant-1's float-only types."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.convert import convert_model
from tests.oracle import assert_same_outputs, assert_valid, run


def _reshape_model(constant: onnx.NodeProto, opset: int) -> onnx.ModelProto:
    graph = helper.make_graph([constant, helper.make_node("Reshape", ["x", "c"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


FEEDS = {"x": np.arange(6, dtype=np.float32)}


@pytest.mark.parametrize("target", [5, 9, 11])
def test_value_ints_becomes_a_value_tensor_and_an_int64_constant_an_initializer_below_9(target):
    model = _reshape_model(helper.make_node("Constant", [], ["c"], name="k", value_ints=[2, 3]), 13)
    result, report = convert_model(model, target)
    assert_valid(result)
    assert_same_outputs(run(model, FEEDS), run(result, FEEDS))
    if target < 9:
        assert [t.name for t in result.graph.initializer] == ["c"]
        assert [n.op_type for n in result.graph.node] == ["Reshape"]
    else:
        const = result.graph.node[0]
        assert const.op_type == "Constant" and [a.name for a in const.attribute] == ["value"]
        assert const.name == "k"


def test_sparse_value_becomes_the_dense_tensor_below_11():
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "v"),
                                       numpy_helper.from_array(np.array([0, 1], dtype=np.int64), "i"), [2])
    model = _reshape_model(helper.make_node("Constant", [], ["c"], name="k", sparse_value=sparse), 13)
    result, _ = convert_model(model, 10)
    assert_valid(result)
    assert_same_outputs(run(model, FEEDS), run(result, FEEDS))
    assert list(numpy_helper.to_array(result.graph.node[0].attribute[0].t)) == [2, 3]


def test_int64_constant_in_a_function_cannot_go_below_9():
    body = [helper.make_node("Constant", [], ["c"], name="fk", value=numpy_helper.from_array(
                np.array([2, 3], dtype=np.int64))),
            helper.make_node("Reshape", ["x", "c"], ["y"])]
    fn = helper.make_function("local", "R", ["x"], ["y"], body, opset_imports=[helper.make_opsetid("", 13)])
    graph = helper.make_graph([helper.make_node("R", ["x"], ["y"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                              functions=[fn])
    model.ir_version = 8
    with pytest.raises(rewriter.RewriterError, match=r"'fk' \(Constant\) in function 'local:R'.*Constant-1 holds only"):
        convert_model(model, 7)
    result, _ = convert_model(model, 9)  # Constant-9 holds int64
    assert_valid(result)
    assert_same_outputs(run(model, FEEDS), run(result, FEEDS))


def test_loop_is_refused_below_11_and_kept_from_11():
    """Loop-11 changed what loop-carried values may do without changing its signature: the step
    is not type-only, so a Loop never goes below 11 as if nothing changed."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.ones(2, np.float32))),
         helper.make_node("Loop", ["n", "c", "v"], ["out"], name="loop", body=body)], "g",
        [helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    feeds = {"n": np.array(3, np.int64), "c": np.array(True), "v": np.zeros(2, np.float32)}
    result, _ = convert_model(model, 11)
    assert_valid(result)
    assert_same_outputs(run(model, feeds), run(result, feeds))
    with pytest.raises(rewriter.RewriterError, match=r"'loop' \(Loop\).*Loop 11 -> 1"):
        convert_model(model, 10)
