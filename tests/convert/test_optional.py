"""OptionalHasElement / OptionalGetElement across 18 (plain tensor/sequence or no input)."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import TensorProto, cases, converts, helper, model, np, reference, run_backend_case

X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("with_input", [True, False])
def test_has_element_of_a_plain_tensor_or_nothing_becomes_a_constant(with_input):
    node = helper.make_node("OptionalHasElement", ["x"] if with_input else [], ["y"], name="has")
    m = model([node], 18, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.BOOL, [])])
    result, report = converts(m, 15, {"x": X}, runner=reference)
    assert [n.op_type for n in result.graph.node] == ["Constant"] and result.graph.node[0].name == "has"


def test_get_element_of_a_plain_tensor_becomes_identity():
    node = helper.make_node("OptionalGetElement", ["x"], ["y"], name="get")
    m = model([node], 18, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 3])])
    result, _ = converts(m, 15, {"x": X}, runner=reference)
    assert [n.op_type for n in result.graph.node] == ["Identity"]


def test_optional_inputs_keep_the_nodes():
    nodes = [helper.make_node("Optional", ["x"], ["o"], name="opt"),
             helper.make_node("OptionalHasElement", ["o"], ["h"], name="has"),
             helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")]
    m = model(nodes, 18, [("x", TensorProto.FLOAT, [2, 3])],
              [("h", TensorProto.BOOL, []), ("y", TensorProto.FLOAT, [2, 3])])
    result, _ = converts(m, 15, {"x": X}, runner=reference)
    assert [n.op_type for n in result.graph.node] == ["Optional", "OptionalHasElement", "OptionalGetElement"]


@pytest.mark.parametrize("case", cases("OptionalHasElement", "OptionalGetElement"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
