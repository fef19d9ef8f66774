"""The optimizer reads a Constant node's ``value_floats`` / ``value_float`` as float32 (issue 27):
lifted to initializers, folded into what reads them and merged with equal constants, they stay
float32 tensors of the attribute's numbers, and the model computes what it computed.

Oracles: numpy's float32 arithmetic on the attribute's numbers; ONNX Runtime running source and
result; onnx.checker with strict shape inference.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.optimize import optimize_proto

FLOATS = [0.1, 1 / 3, -2.5, 16777217.0]


def _ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _model() -> onnx.ModelProto:
    nodes = [h.make_node("Constant", [], ["c"], name="cs", value_floats=FLOATS),
             h.make_node("Constant", [], ["k"], name="ck", value_float=0.7),
             h.make_node("Add", ["c", "k"], ["ck_sum"], name="fold_me"),  # constant: folded
             h.make_node("Mul", ["x", "ck_sum"], ["t"], name="mul"),
             h.make_node("Sub", ["t", "c"], ["y"], name="sub"),
             h.make_node("Mul", ["x", "k"], ["z"], name="scale")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [len(FLOATS)])],
                         [h.make_tensor_value_info("y", T.FLOAT, [len(FLOATS)]),
                          h.make_tensor_value_info("z", T.FLOAT, [len(FLOATS)])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _constants(model) -> list[np.ndarray]:
    found = [nh.to_array(t) for t in model.graph.initializer]
    found += [nh.to_array(n.attribute[0].t) for n in model.graph.node
              if n.op_type == "Constant" and n.attribute[0].name == "value"]
    return found


def test_optimized_float_constants_are_float32_of_the_attribute_numbers():
    model = _model()
    result, report = optimize_proto(model)
    assert report.failed_passes == []
    onnx.checker.check_model(result, full_check=True)
    assert "Add" not in [n.op_type for n in result.graph.node]  # the premise: the constant Add folded
    assert not [n for n in result.graph.node if n.op_type == "Constant" and n.attribute[0].name != "value"]
    constants = _constants(result)
    assert constants and all(c.dtype == np.float32 for c in constants), [c.dtype for c in constants]
    c, k = np.array(FLOATS, np.float32), np.float32(0.7)
    values = {tuple(np.atleast_1d(v).tolist()) for v in constants}
    assert tuple((c + k).tolist()) in values  # folded in float32
    assert tuple(c.tolist()) in values and (float(k),) in values
    x = np.array([1.0, -3.0, 0.5, 2.0], np.float32)
    expected = _ort(model, {"x": x})
    got = _ort(result, {"x": x})
    for e, g in zip(expected, got):
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(got[0], x * (c + k) - c)
    np.testing.assert_array_equal(got[1], x * k)
    public = rewriter.optimize_model(model)
    for e, g in zip(expected, _ort(public, {"x": x})):
        np.testing.assert_array_equal(g, e)
