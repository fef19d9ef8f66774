"""The shape rule's exact answers, where a looser answer would still look consistent."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.verify.shapes.rule import DYNAMIC_AXES, reduce_prod_output_shape
from rewriter.verify.shapes.check import verify_reduce_prod_shapes


@pytest.mark.parametrize("shape,expected", [((1, 3), (1, None)), ((4, 1, 2), (None, 1, None)), ((), ())])
def test_dynamic_axes_keep_a_dim_of_one_known(shape, expected):
    """Whatever the axes are, a dim of 1 stays 1 with keepdims: the rule says so, and ORT agrees."""
    assert reduce_prod_output_shape(shape, DYNAMIC_AXES, keepdims=True, version=18) == expected
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x", "axes"], ["y"], keepdims=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
                               helper.make_tensor_value_info("axes", TensorProto.INT64, [None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.ones(shape, dtype=np.float32)
    for axes in ([], *([a] for a in range(len(shape)))):
        (y,) = session.run(None, {"x": x, "axes": np.array(axes, dtype=np.int64)})
        assert all(e is None or e == d for e, d in zip(expected, y.shape))


def test_a_declared_dim_that_contradicts_a_kept_dim_of_one_is_a_problem():
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x", "axes"], ["y"], name="rp", keepdims=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                               helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    problems = verify_reduce_prod_shapes(model)
    assert problems and "rp" in str(problems[0])
