"""Softmax / LogSoftmax / Hardmax across opset 13 (axis changed meaning): own adapters both ways."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, helper, model, np, refused,
                                        run_backend_case)

OPS = ["Softmax", "LogSoftmax", "Hardmax"]
X = np.random.default_rng(0).normal(size=[2, 3, 4]).astype(np.float32)


def _single(op, opset, shape=(2, 3, 4), name="sm", elem=TensorProto.FLOAT, **attrs):
    return model([helper.make_node(op, ["x"], ["y"], name=name, **attrs)], opset,
                 [("x", elem, list(shape))], [("y", elem, None)])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("source,target", [(11, 13), (13, 11), (7, LATEST), (LATEST, 7)])
@pytest.mark.parametrize("axis", [0, 1, -1, -2, None])
def test_every_axis_converts_exactly(op, source, target, axis):
    if source < 11 and axis is not None and axis < 0:
        return  # negative axes exist from opset 11
    attrs = {} if axis is None else {"axis": axis}
    m = _single(op, source, **attrs)
    result, report = converts(m, target, {"x": X})
    assert report.own[op] == 1 and not report.version_converter_called
    ops = [n.op_type for n in result.graph.node]
    last = axis in (2, -1) or (axis is None and source >= 13)
    assert (ops == [op]) if last else (len(ops) > 1), ops
    assert next(n for n in result.graph.node if "y" in n.output).name == "sm"


@pytest.mark.parametrize("source,target", [(11, 13), (13, 11)])
def test_the_nodes_a_rewrite_makes_at_the_target_are_not_counted_as_converted(source, target):
    """Flatten/Shape/Reshape going up, Transposes going down, written at the target: they take no
    step, so "converted by rewriter's adapters" lists the Softmax alone."""
    result, report = converts(_single("Softmax", source, axis=1), target, {"x": X})
    assert len(result.graph.node) > 1 and dict(report.own) == {"Softmax": 1}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("source,target", [(11, 13), (13, 11)])
def test_only_ones_after_the_axis_keeps_the_node(op, source, target):
    """[N, C, 1, 1] with axis=1 (a classification head): both meanings select the same C elements."""
    m = _single(op, source, shape=(2, 5, 1, 1), axis=1)
    x = np.random.default_rng(2).normal(size=[2, 5, 1, 1]).astype(np.float32)
    result, _ = converts(m, target, {"x": x})
    assert [n.op_type for n in result.graph.node] == [op]


@pytest.mark.parametrize("op", OPS)
def test_the_node_producing_y_keeps_the_name(op):
    result, _ = converts(_single(op, 11, axis=1), 13, {"x": X})
    producer = next(n for n in result.graph.node if "y" in n.output)
    assert producer.name == "sm" and producer.op_type == "Reshape"


def test_regression_opset_11_up_has_no_duplicate_node_names():
    """(a) several Softmax nodes, named alike-ish and unnamed, at 11 -> 13+: ORT refuses
    duplicate node names; converts() checks uniqueness and runs the result with ORT."""
    nodes = [helper.make_node("Softmax", ["x"], ["a"], name="Softmax", axis=1),
             helper.make_node("Softmax", ["a"], ["b"], name="Softmax_Flatten", axis=0),
             helper.make_node("LogSoftmax", ["b"], ["c"], axis=1),
             helper.make_node("Softmax", ["c"], ["y"], axis=1)]
    m = model(nodes, 11, [("x", TensorProto.FLOAT, [2, 3, 4])], [("y", TensorProto.FLOAT, None)])
    for target in (13, 17, LATEST):
        converts(m, target, {"x": X})


def _unknown_rank(op, opset, **attrs):
    """x reshaped by a runtime shape: the rank of the Softmax input is unknown."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node(op, ["r"], ["o"], name="sm", **attrs),
             helper.make_node("Flatten", ["o"], ["y"], name="flat", axis=0)]
    return model(nodes, opset, [("x", TensorProto.FLOAT, [2, 3, 4]), ("s", TensorProto.INT64, ["n"])],
                 [("y", TensorProto.FLOAT, ["a", "b"])])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("source,target", [(11, 13), (13, 11), (11, LATEST), (LATEST, 11)])
def test_regression_last_axis_with_unknown_rank_converts(op, source, target):
    """(b) axis=-1 is the last dim whatever the rank: nothing to rewrite, either way."""
    m = _unknown_rank(op, source, axis=-1)
    feeds = {"x": X, "s": np.array([6, 4], dtype=np.int64)}
    result, _ = converts(m, target, feeds)
    assert [n.op_type for n in result.graph.node] == ["Reshape", op, "Flatten"]


@pytest.mark.parametrize("op", OPS)
def test_other_axis_with_unknown_rank_converts_up_but_not_down(op):
    feeds = {"x": X, "s": np.array([2, 3, 4], dtype=np.int64)}
    converts(_unknown_rank(op, 11, axis=1), 13, feeds)  # Flatten/Reshape need no rank
    refused(_unknown_rank(op, 13, axis=1), 11, "'sm'", op, "13 -> 11", "axis=1", "unknown rank")


@pytest.mark.parametrize("op", OPS)
def test_bfloat16_is_refused_below_13(op):
    refused(_single(op, 13, elem=TensorProto.BFLOAT16, axis=-1), 11, "'sm'", "bfloat16", f"{op}-11")


def test_below_11_the_last_axis_needs_the_rank():
    refused(_unknown_rank("Softmax", 13, axis=-1), 9, "'sm'", "negative axis -1")
    result, _ = converts(_single("Softmax", 13, axis=-1), 9, {"x": X})
    assert result.graph.node[0].attribute[0].i == 2


def test_inside_if_branches_and_functions():
    then = helper.make_graph([helper.make_node("Softmax", ["x"], ["t"], name="inner", axis=0)], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3, 4])])
    other = helper.make_graph([helper.make_node("LogSoftmax", ["x"], ["e"], name="inner2", axis=1)], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3, 4])])
    fn = helper.make_function("local", "F", ["a"], ["b"],
                              [helper.make_node("Softmax", ["a"], ["b"], name="fsm", axis=1)],
                              [helper.make_opsetid("", 13)])
    nodes = [helper.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other, name="if"),
             helper.make_node("F", ["z"], ["y"], domain="local", name="call")]
    m13 = model(nodes, 13, [("c", TensorProto.BOOL, []), ("x", TensorProto.FLOAT, [2, 3, 4])],
                [("y", TensorProto.FLOAT, None)], functions=[fn])
    for c in (True, False):
        feeds = {"c": np.array(c), "x": X}
        down, _ = converts(m13, 11, feeds)
        assert len(down.functions[0].node) == 3  # Transpose, Softmax, Transpose
        back, _ = converts(down, 13, feeds)
        converts(back, LATEST, feeds, expected=None)


@pytest.mark.parametrize("case", cases(*OPS), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
