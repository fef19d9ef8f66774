"""A Constant node's ``value_floats`` / ``value_float`` are float32 tensors, wherever the
conversion reads them (issue 27): written as the ``value`` tensor going below opset 12, and read
as constants by the adapters of later steps (GroupNormalization 18 -> 21 repeats them per
channel). A float64 reading would make double tensors where float ones belong.

Oracles: numpy's float32 of the attribute's numbers; onnx.checker; ONNX Runtime and
onnx.reference running source and result on the same inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from tests.oracle import assert_valid

FLOATS = [0.1, 1 / 3, -2.5, 1e-30, 16777217.0]  # none but -2.5 is a float32 exactly
ONE = 0.7


def _ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _forms_model(opset: int = 13) -> onnx.ModelProto:
    nodes = [h.make_node("Constant", [], ["c"], name="cs", value_floats=FLOATS),
             h.make_node("Constant", [], ["k"], name="ck", value_float=ONE),
             h.make_node("Mul", ["x", "c"], ["t"], name="mul"),
             h.make_node("Add", ["t", "k"], ["y"], name="add")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [len(FLOATS)])],
                         [h.make_tensor_value_info("y", T.FLOAT, [len(FLOATS)])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _constant_tensor(model, name):
    node = next(n for n in model.graph.node if n.op_type == "Constant" and n.output[0] == name)
    (attr,) = node.attribute
    assert attr.name == "value", attr.name
    return attr.t


def test_value_floats_and_value_float_become_float32_value_tensors_below_12():
    model = _forms_model()
    x = np.array([1.0, 3.0, -0.5, 1e30, 1.0], np.float32)
    for target in (11, 9, 7):
        result = rewriter.convert_opset(model, target)
        assert_valid(result)
        c, k = _constant_tensor(result, "c"), _constant_tensor(result, "k")
        assert c.data_type == T.FLOAT and k.data_type == T.FLOAT
        np.testing.assert_array_equal(nh.to_array(c), np.array(FLOATS, np.float32))
        assert nh.to_array(k).shape == () and nh.to_array(k) == np.float32(ONE)
        (expected,) = _ort(model, {"x": x})
        (got,) = _ort(result, {"x": x})
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got, x * np.array(FLOATS, np.float32) + np.float32(ONE))  # numpy in float32


def _group_norm_model() -> onnx.ModelProto:
    nodes = [h.make_node("Constant", [], ["s"], name="cs", value_floats=[0.1, 3.0]),
             h.make_node("Constant", [], ["b"], name="cb", value_floats=[1 / 3, -0.7]),
             h.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn", num_groups=2, epsilon=1e-5)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 2, 2])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 2, 2])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=8)  # GN-18: deprecated, valid


def test_group_normalization_up_to_21_repeats_value_floats_as_float32():
    model = _group_norm_model()
    # onnx.checker refuses GroupNormalization-18 (deprecated at 18): processed as --allow-invalid-input
    result = rewriter.convert_opset(model, 21, allow_invalid_input=True)
    assert_valid(result)
    (gn,) = [n for n in result.graph.node if n.op_type == "GroupNormalization"]
    tensors = {t.name: t for t in result.graph.initializer}
    tensors.update({n.output[0]: n.attribute[0].t for n in result.graph.node
                    if n.op_type == "Constant" and n.attribute[0].name == "value"})
    scale, bias = tensors[gn.input[1]], tensors[gn.input[2]]
    assert scale.data_type == T.FLOAT and bias.data_type == T.FLOAT
    np.testing.assert_array_equal(nh.to_array(scale), np.repeat(np.array([0.1, 3.0], np.float32), 2))
    np.testing.assert_array_equal(nh.to_array(bias), np.repeat(np.array([1 / 3, -0.7], np.float32), 2))
    x = np.random.default_rng(0).normal(size=[1, 4, 2, 2]).astype(np.float32)
    expected = onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(_ort(result, {"x": x})[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(onnx.reference.ReferenceEvaluator(result).run(None, {"x": x})[0], expected,
                               rtol=1e-6, atol=1e-7)
