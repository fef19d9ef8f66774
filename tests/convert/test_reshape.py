"""Reshape across opset 5 (shape attribute <-> input) and 14 (allowzero)."""

from __future__ import annotations

import onnx
import pytest

from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, helper, model, np, refused,
                                        run_backend_case)

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def _reshape(opset, shape, allowzero=None, x_shape=(2, 3, 4)):
    attrs = {} if allowzero is None else {"allowzero": allowzero}
    init = [helper.make_tensor("shape", TensorProto.INT64, [len(shape)], shape)]
    return model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape", **attrs)], opset,
                 [("x", TensorProto.FLOAT, list(x_shape))], [("y", TensorProto.FLOAT, None)], initializers=init)


@pytest.mark.parametrize("allowzero", [None, 0, 1])
@pytest.mark.parametrize("target", [13, 5, 1])
def test_allowzero_dropped_when_it_changes_nothing(allowzero, target):
    m = _reshape(LATEST, [4, -1, 3], allowzero)
    if target >= 7:
        result, _ = converts(m, target, {"x": X})
    else:
        from rewriter.convert import convert_model
        result, _ = convert_model(m, target)
    node = result.graph.node[0]
    assert not any(a.name == "allowzero" for a in node.attribute)
    if target < 5:
        assert list(node.input) == ["x"] and list(node.attribute[0].ints) == [4, -1, 3]
        assert not result.graph.initializer  # the shape initializer no node reads went
        back, _ = converts(result, 13, {"x": X}, expected=[X.reshape(4, 2, 3)])


def test_allowzero_with_one_zero_writes_it_as_minus_one():
    """A 0 under allowzero=1 is an empty dim: the input is empty, and -1 works out to 0."""
    # the input's dim 0 is 3: copying it (a 0 below opset 14) would fail on 36 != 0 elements
    m = _reshape(LATEST, [0, 12], allowzero=1, x_shape=(3, 0, 4))
    empty = np.zeros((3, 0, 4), np.float32)
    result, _ = converts(m, 13, {"x": empty}, expected=[np.zeros((0, 12), np.float32)])
    shape = next(t for t in result.graph.initializer if t.name == result.graph.node[0].input[1])
    assert onnx.numpy_helper.to_array(shape).tolist() == [-1, 12]
    converts(_reshape(LATEST, [0, 12], allowzero=0), 13, {"x": X})  # 0 copies the dim: unchanged


def test_allowzero_with_two_zeros_or_a_zero_and_minus_one_is_refused():
    refused(_reshape(LATEST, [0, 0, 12], allowzero=1, x_shape=(0, 0, 12)), 13, "'reshape'", "14 -> 13",
            "allowzero=1", "[0, 0, 12]")
    refused(_reshape(LATEST, [0, -1], allowzero=1, x_shape=(0, 3, 4)), 13, "'reshape'", "allowzero=1")


@pytest.mark.parametrize("target", [13, 11, 9])
def test_allowzero_with_a_computed_shape_maps_its_zero_to_minus_one(target):
    # x: [3, n, 4] viewed as [n, 3, 4, 1]: with n = 0 the shape's 0 stands where x has a 3
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "order"], ["swapped"], axis=0),
             helper.make_node("Concat", ["swapped", "one"], ["s1"], axis=0),
             helper.make_node("Reshape", ["x", "s1"], ["y"], name="reshape", allowzero=1)]
    init = [helper.make_tensor("one", TensorProto.INT64, [1], [1]),
            helper.make_tensor("order", TensorProto.INT64, [3], [1, 0, 2])]
    m = model(nodes, 14, [("x", TensorProto.FLOAT, [3, "n", 4])], [("y", TensorProto.FLOAT, ["n", 3, 4, 1])],
              initializers=init)
    for n in (2, 0):  # an empty batch: the 0 must stay an empty dim
        x = np.arange(n * 12, dtype=np.float32).reshape(3, n, 4)
        result, _ = converts(m, target, {"x": x}, expected=[x.reshape(n, 3, 4, 1)])
    assert {"Equal", "Where"} <= {n.op_type for n in result.graph.node}


def test_allowzero_with_a_computed_shape_needs_where_below_9():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape", allowzero=1)]
    m = model(nodes, 14, [("x", TensorProto.FLOAT, [2, 3, 4])], [("y", TensorProto.FLOAT, None)])
    refused(m, 8, "Where")


def test_computed_shape_cannot_go_below_5():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")]
    m = model(nodes, 13, [("x", TensorProto.FLOAT, [2, 3, 4])], [("y", TensorProto.FLOAT, None)])
    refused(m, 4, "'reshape'", "5 -> 1", "'s' is not a constant")


def test_integer_reshape_cannot_go_below_5():
    init = [helper.make_tensor("shape", TensorProto.INT64, [1], [-1])]
    m = model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], 13,
              [("x", TensorProto.INT32, [2, 3])], [("y", TensorProto.INT32, None)], initializers=init)
    refused(m, 4, "'reshape'", "tensor(int32)", "Reshape-1")


def test_up_from_1_moves_the_attribute_to_an_input():
    node = helper.make_node("Reshape", ["x"], ["y"], name="reshape", shape=[6, 4], consumed_inputs=[0])
    m = model([node], 1, [("x", TensorProto.FLOAT, [2, 3, 4])], [("y", TensorProto.FLOAT, [6, 4])])
    result, report = converts(m, 13, {"x": X}, expected=[X.reshape(6, 4)])
    assert len(result.graph.node[0].input) == 2 and not result.graph.node[0].attribute
    assert not report.version_converter_called


@pytest.mark.parametrize("case", cases("Reshape"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
