"""Conversion: Softmax's axis with symbolic dims, the IR version chosen.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

Oracles: ONNX Runtime runs the original and the converted model on the same feeds;
``onnx.helper.find_min_ir_version_for`` says which IR an opset needs; the checker with
full_check says whether a file is valid.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter import convert_opset
from rewriter.convert import convert_model

F = TensorProto.FLOAT


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


# ------------------------------------------------------------------ Softmax: dims after the axis

def _softmax(op: str, opset: int, dims: list, axis: int) -> onnx.ModelProto:
    graph = h.make_graph([h.make_node(op, ["x"], ["y"], axis=axis)], "g",
                         [h.make_tensor_value_info("x", F, dims)], [h.make_tensor_value_info("y", F, dims)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=7)
    onnx.checker.check_model(model, full_check=True)
    return model


# [N, 3, H, W] with symbolic dims: only a static 1 after the axis makes the axis "the last one"
SHAPES = [
    (["N", 3, "H", "W"], (2, 3, 4, 5)),
    ([2, 3, "H", "W"], (2, 3, 4, 5)),
    (["N", 3, 1, "W"], (2, 3, 1, 4)),
    (["N", 3, "H", 1], (2, 3, 4, 1)),
    (["N", 3, "H", "W"], (2, 3, 1, 3)),  # symbols that happen to be fed small
]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("dims,fed", SHAPES)
def test_softmax_13_axis_1_with_symbolic_dims_after_it_down_to_11(op, dims, fed):
    model = _softmax(op, 13, dims, axis=1)
    result, _ = convert_model(model, 11)
    assert _opset(result) == 11
    onnx.checker.check_model(result, full_check=True)
    x = np.random.default_rng(0).standard_normal(fed).astype(np.float32)
    want, got = _ort(model, {"x": x}), _ort(result, {"x": x})
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    if op == "Softmax":  # the premise: 13's axis 1 sums to 1 over dim 1 alone
        np.testing.assert_allclose(want[0].sum(axis=1), 1, rtol=1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("dims,fed", SHAPES)
def test_softmax_11_axis_1_with_symbolic_dims_after_it_up_to_13(op, dims, fed):
    model = _softmax(op, 11, dims, axis=1)
    result, _ = convert_model(model, 13)
    assert _opset(result) == 13
    onnx.checker.check_model(result, full_check=True)
    x = np.random.default_rng(1).standard_normal(fed).astype(np.float32)
    want, got = _ort(model, {"x": x}), _ort(result, {"x": x})
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_softmax_13_axis_1_with_symbolic_trailing_dims_through_the_public_api():
    model = _softmax("Softmax", 13, ["N", 3, "H", "W"], axis=1)
    result = convert_opset(model, 11)
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(_ort(result, {"x": x})[0], _ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ the IR version chosen

def _relu_model(opset: int, ir_version: int) -> onnx.ModelProto:
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", F, [2, 3])], [h.make_tensor_value_info("y", F, [2, 3])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=ir_version)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("target", [13, 11, 9, 7])
def test_going_down_lowers_the_ir_version_to_what_the_opset_needs(target):
    model = _relu_model(18, 10)
    result, _ = convert_model(model, target)
    need = onnx.helper.find_min_ir_version_for([h.make_opsetid("", target)])
    assert result.ir_version == need, (result.ir_version, need)
    if target == 13:
        assert result.ir_version == 7
    onnx.checker.check_model(result, full_check=True)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_ort(result, {"x": x})[0], _ort(model, {"x": x})[0])


def test_going_down_lowers_the_ir_version_through_the_public_api():
    result = convert_opset(_relu_model(18, 10), 13)
    assert result.ir_version == 7
    ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"])


def test_going_up_keeps_a_newer_ir_version():
    """Control: going up the input's IR version is kept (not lowered to the opset's need)."""
    result, _ = convert_model(_relu_model(11, 8), 13)
    assert result.ir_version == 8


def _ir3(nodes, inputs, outputs, inits, opset) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", inputs, outputs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=3)
    onnx.checker.check_model(model, full_check=True)
    return model


def _assert_ir3_valid(result: onnx.ModelProto) -> None:
    inputs = {i.name for i in result.graph.input}
    outside = [t.name for t in result.graph.initializer if t.name not in inputs]
    assert result.ir_version >= 4 or not outside, (result.ir_version, outside)
    onnx.checker.check_model(result, full_check=True)


# Steps that turn an attribute into a constant input: each conversion adds a constant
UP_CASES = {
    "Upsample 7 -> 9 (scales)": (
        lambda: _ir3([h.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 2.0], mode="nearest")],
                     [h.make_tensor_value_info("x", F, [1, 1, 2, 2])],
                     [h.make_tensor_value_info("y", F, [1, 1, 4, 4])], [], 7), 9, (1, 1, 2, 2)),
    "Slice 9 -> 10 (starts, ends, axes)": (
        lambda: _ir3([h.make_node("Slice", ["x"], ["y"], starts=[1], ends=[3], axes=[1])],
                     [h.make_tensor_value_info("x", F, [2, 4])],
                     [h.make_tensor_value_info("y", F, [2, 2])], [], 9), 10, (2, 4)),
    "Pad 10 -> 11 (pads, value)": (
        lambda: _ir3([h.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 1], value=1.5)],
                     [h.make_tensor_value_info("x", F, [2, 3])],
                     [h.make_tensor_value_info("y", F, [2, 5])], [], 10), 11, (2, 3)),
    "Unsqueeze 12 -> 13 (axes)": (
        lambda: _ir3([h.make_node("Unsqueeze", ["x"], ["y"], axes=[0])],
                     [h.make_tensor_value_info("x", F, [2, 3])],
                     [h.make_tensor_value_info("y", F, [1, 2, 3])], [], 12), 13, (2, 3)),
}


@pytest.mark.parametrize("name", sorted(UP_CASES))
def test_an_ir3_model_whose_conversion_adds_constants_stays_valid(name):
    make, target, fed = UP_CASES[name]
    model = make()
    result, _ = convert_model(model, target)
    assert _opset(result) == target
    _assert_ir3_valid(result)
    x = np.arange(np.prod(fed), dtype=np.float32).reshape(fed)
    np.testing.assert_array_equal(_ort(result, {"x": x})[0], _ort(model, {"x": x})[0])


@pytest.mark.parametrize("source,target", [(4, 5), (1, 5), (4, 8), (1, 6)])
def test_an_ir3_reshape_whose_shape_attribute_becomes_an_initializer_stays_valid(source, target):
    """Reshape-1's shape attribute becomes Reshape-5's input, a new initializer; opsets 5..8
    need only IR 3, where every initializer must be a graph input (or the IR becomes 4)."""
    model = _ir3([h.make_node("Reshape", ["x"], ["y"], shape=[3, 2])],
                 [h.make_tensor_value_info("x", F, [2, 3])], [h.make_tensor_value_info("y", F, [3, 2])], [], source)
    result, _ = convert_model(model, target)
    assert _opset(result) == target
    assert len(result.graph.initializer) == 1
    _assert_ir3_valid(result)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = onnx.reference.ReferenceEvaluator(result).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, x.reshape(3, 2))


def test_an_ir3_model_with_its_weights_as_inputs_converted_down_stays_valid():
    """IR 3, opset 7 -> 6 with a weight that is an initializer and a graph input."""
    w = nh.from_array(np.array([1.0, -2.0, 3.0], np.float32), "w")
    model = _ir3([h.make_node("Add", ["x", "w"], ["y"])],
                 [h.make_tensor_value_info("x", F, [2, 3]), h.make_tensor_value_info("w", F, [3])],
                 [h.make_tensor_value_info("y", F, [2, 3])], [w], 7)
    result, _ = convert_model(model, 6)
    assert _opset(result) == 6
    assert result.ir_version == 3
    _assert_ir3_valid(result)
    x = np.ones((2, 3), np.float32)
    got = onnx.reference.ReferenceEvaluator(result).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, x + nh.to_array(w))
