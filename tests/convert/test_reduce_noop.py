"""noop_with_empty_axes=1 with empty axes (opset 18) going below 18: each element is reduced on its
own, which is the element itself only for Sum, Mean, Max, Min, Prod and LogSumExp; ReduceSumSquare
squares it, ReduceL1/L2 take its magnitude, ReduceLogSum its log. Oracles: ONNX Runtime and
onnx.reference on the opset-18 source (they agree)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rewriter

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
       "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"]
X = np.array([[-2.0, 0.5, 3.0], [1.0, -0.25, 100.0]], np.float32)


def _model(op: str, axes_given: bool = True):
    inputs = ["x", "ax"] if axes_given else ["x"]
    inits = [numpy_helper.from_array(np.array([], np.int64), "ax")] if axes_given else []
    node = helper.make_node(op, inputs, ["y"], name="r", noop_with_empty_axes=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _ort(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]


@pytest.mark.parametrize("target", [13, 11, 7])
@pytest.mark.parametrize("axes_given", [True, False])
@pytest.mark.parametrize("op", OPS)
def test_reducing_nothing_below_18_computes_what_18_does(op, axes_given, target):
    model = _model(op, axes_given)
    want = ReferenceEvaluator(model).run(None, {"x": X})[0]
    np.testing.assert_array_equal(_ort(model), want)
    result = rewriter.convert_opset(model, target)
    assert all(n.op_type not in OPS or n.op_type == op for n in result.graph.node)
    np.testing.assert_array_equal(_ort(result), want)
    np.testing.assert_array_equal(ReferenceEvaluator(result).run(None, {"x": X})[0], want)
