"""Reshape across opset 5 (shape attribute <-> input) and 14 (allowzero)."""

from __future__ import annotations

import pytest

from tests.convert.feature_util import (LATEST, TensorProto, cases, converts, helper, model, np, refused,
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


def test_allowzero_with_a_zero_is_refused():
    m = _reshape(LATEST, [0, 12], allowzero=1)
    refused(m, 13, "'reshape'", "14 -> 13", "allowzero=1", "0 in the shape")
    converts(_reshape(LATEST, [0, 12], allowzero=0), 13, {"x": X})  # 0 copies the dim: unchanged


def test_allowzero_with_a_computed_shape_is_refused():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape", allowzero=1)]
    m = model(nodes, 14, [("x", TensorProto.FLOAT, [2, 3, 4])], [("y", TensorProto.FLOAT, None)])
    refused(m, 13, "'reshape'", "allowzero=1", "not a constant")


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
