"""consumed_inputs (1 <-> 6), Selu's changed defaults, Concat's axis (1 -> 4), GlobalLpPool p (2),
PRelu's slope broadcasting (7)."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, assert_valid, converts, helper, model, np, reference,
                                        refused)

X = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Abs", "Neg", "Exp", "Tanh", "Floor", "LeakyRelu", "Elu"])
def test_consumed_inputs_goes_up_and_types_are_checked_down(op):
    m = model([helper.make_node(op, ["x"], ["y"], name="n", consumed_inputs=[0])], 1,
              [("x", TensorProto.FLOAT, [3, 4])], [("y", TensorProto.FLOAT, [3, 4])])
    result, report = converts(m, 13, {"x": X}, expected=reference(m, {"x": X}))
    assert not result.graph.node[0].attribute or op in ("LeakyRelu", "Elu") and not report.version_converter_called
    down, _ = convert_model(result, 1)
    assert_valid(down)


def test_integer_abs_is_refused_below_6():
    m = model([helper.make_node("Abs", ["x"], ["y"], name="abs")], 13, [("x", TensorProto.INT32, [3])],
              [("y", TensorProto.INT32, [3])])
    refused(m, 5, "'abs'", "6 -> 1", "tensor(int32)")


def test_selu_keeps_its_defaults_across_6():
    m = model([helper.make_node("Selu", ["x"], ["y"], name="selu")], 1, [("x", TensorProto.FLOAT, [3, 4])],
              [("y", TensorProto.FLOAT, [3, 4])])
    alpha, gamma = 1.673200011253357, 1.0506999492645264
    expected = np.where(X > 0, gamma * X, gamma * (alpha * np.exp(X) - alpha)).astype(np.float32)
    result, _ = converts(m, 13, {"x": X}, expected=[expected], rtol=1e-6)
    assert {a.name for a in result.graph.node[0].attribute} == {"alpha", "gamma"}
    down, _ = convert_model(model([helper.make_node("Selu", ["x"], ["y"], name="selu")], 13,
                                  [("x", TensorProto.FLOAT, [3, 4])], [("y", TensorProto.FLOAT, [3, 4])]), 5)
    assert {a.name: round(a.f, 7) for a in down.graph.node[0].attribute} == {"alpha": 1.6732632, "gamma": 1.050701}


def test_concat_default_axis_written_going_up():
    m = model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat")], 1,
              [("a", TensorProto.FLOAT, [3, 4]), ("b", TensorProto.FLOAT, [3, 2])], [("y", TensorProto.FLOAT, [3, 6])])
    result, _ = converts(m, 13, {"a": X, "b": X[:, :2]}, expected=[np.concatenate([X, X[:, :2]], axis=1)])
    assert result.graph.node[0].attribute[0].i == 1


def test_global_lp_pool_p():
    m = model([helper.make_node("GlobalLpPool", ["x"], ["y"], name="glp", p=3)], 13,
              [("x", TensorProto.FLOAT, [1, 3, 4])], [("y", TensorProto.FLOAT, [1, 3, 1])])
    down, _ = convert_model(m, 1)
    assert down.graph.node[0].attribute[0].f == 3.0
    x = X.reshape(1, 3, 4)
    expected = (np.abs(x) ** 3).sum(axis=2, keepdims=True) ** (1 / 3)
    converts(down, 13, {"x": x}, expected=[expected.astype(np.float32)], rtol=1e-5)


@pytest.mark.parametrize("slope_shape,ok", [([3, 4], True), ([1], True), ([4], False), ([3, 1], False)])
def test_prelu_slope_below_7(slope_shape, ok):
    inits = [helper.make_tensor("s", TensorProto.FLOAT, slope_shape, np.full(slope_shape, 0.1).flatten().tolist())]
    m = model([helper.make_node("PRelu", ["x", "s"], ["y"], name="prelu")], 13, [("x", TensorProto.FLOAT, [3, 4])],
              [("y", TensorProto.FLOAT, [3, 4])], initializers=inits)
    if ok:
        down, _ = convert_model(m, 6)
        assert_valid(down)
        converts(down, LATEST, {"x": X}, expected=reference(m, {"x": X}))
    else:
        refused(m, 6, "'prelu'", "7 -> 6", "broadcasts the slope only from opset 7")


def test_refusals_write_shapes_as_people_read_them():
    from onnx import TensorProto, helper

    from rewriter.convert import convert_model
    from rewriter.errors import ConversionError

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 256])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [3, "k"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("PRelu", ["x", "s"], ["y"], name="p")], "g",
                                                [x, s], [y]), opset_imports=[helper.make_opsetid("", 9)])
    try:
        convert_model(model, 6)
    except ConversionError as e:
        message = str(e)
    else:
        raise AssertionError("PRelu with a broadcasting slope converted to 6")
    assert "[?,256]" in message and "[3,?]" in message and "None" not in message, message
