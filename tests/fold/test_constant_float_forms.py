"""Folding reads a Constant node's ``value_floats`` / ``value_float`` as float32 (issue 27): a
ReduceProd of them folds to a float32 value, the one ONNX computes; a float64 reading would
fold a double (the wrong type for the graph) or a product rounded differently.

Oracles: onnx.reference and ONNX Runtime running the unfolded source; numpy's float32 of the
attribute's numbers; onnx.checker with strict shape inference on the folded model.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter

FLOATS = [0.1, 1 / 3, -2.5, 3.0e-5, 7.1]


def _model(attr: str, opset: int = 13) -> onnx.ModelProto:
    value = FLOATS if attr == "value_floats" else 0.1
    nodes = [h.make_node("Constant", [], ["c"], name="c", **{attr: value}),
             h.make_node("ReduceProd", ["c"], ["p"], name="rp", keepdims=0),
             h.make_node("Mul", ["x", "p"], ["y"], name="mul")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2]), h.make_tensor_value_info("p", T.FLOAT, [])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _folded_value(model) -> onnx.TensorProto:
    for t in model.graph.initializer:
        if t.name == "p":
            return t
    node = next(n for n in model.graph.node if n.output and n.output[0] == "p")
    assert node.op_type == "Constant", node.op_type
    return node.attribute[0].t


@pytest.mark.parametrize("attr", ["value_floats", "value_float"])
def test_reduce_prod_of_a_float_constant_folds_to_float32(attr):
    model = _model(attr)
    x = np.array([1.5, -4.0], np.float32)
    reference = onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})
    runtime = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    folded = rewriter.fold_reduce_prod(model)
    onnx.checker.check_model(folded, full_check=True)
    assert "ReduceProd" not in [n.op_type for n in folded.graph.node]  # the premise: it folded
    value = _folded_value(folded)
    assert value.data_type == T.FLOAT
    got = nh.to_array(value)
    assert got.dtype == np.float32 and got.shape == ()
    np.testing.assert_allclose(got, reference[1], rtol=1e-6)  # ONNX's value, computed in float32
    floats = np.array(FLOATS if attr == "value_floats" else [0.1], np.float32)
    np.testing.assert_allclose(got, np.prod(floats), rtol=1e-6)
    out = ort.InferenceSession(folded.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for e, g in zip(runtime, out):
        assert g.dtype == e.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-6)
