"""Sum with broadcasting going below opset 8 (where Sum does not broadcast): a chain of Adds
with the legacy ``broadcast=1``, in Sum's own order; other broadcasting shapes stay refused.

Oracles: ONNX Runtime on the original (opset 8+) and onnx.reference on the result (opset 6/7)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model
from rewriter.convert.planner import ConversionBlocked
from tests.oracle import assert_valid, run

F = TensorProto.FLOAT
RNG = np.random.default_rng(3)


def _sum(shapes, opset=13):
    names = [f"x{i}" for i in range(len(shapes))]
    out = np.broadcast_shapes(*[tuple(s) for s in shapes])
    graph = helper.make_graph([helper.make_node("Sum", names, ["y"], name="sum")], "g",
                              [helper.make_tensor_value_info(n, F, s) for n, s in zip(names, shapes)],
                              [helper.make_tensor_value_info("y", F, list(out))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("target", [6, 7])
@pytest.mark.parametrize("shapes", [[[2, 3], [3]], [[3], [2, 3]], [[2, 3], []], [[2, 3, 4], [4], [3, 4], []],
                                    [[4, 5], [5], [4, 5]]])
def test_broadcasting_sum_becomes_adds(shapes, target):
    model = _sum(shapes)
    feeds = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    converted, report = convert_model(model, target)
    onnx.checker.check_model(converted, full_check=True)
    assert "Sum" not in {n.op_type for n in converted.graph.node}
    assert report.changes["Sum with broadcasting -> Add chain"] == 1
    expected = run(model, feeds)[0]
    actual = onnx.reference.ReferenceEvaluator(converted).run(None, feeds)[0]
    np.testing.assert_array_equal(actual, expected)  # the same additions in the same order
    assert [n.name for n in converted.graph.node if n.output[0] == "y"] == ["sum"]


@pytest.mark.parametrize("shapes", [[[2, 1], [1, 3]], [[3], [2, 3], [2, 3]], [[2, 3], [2, 1]]])
def test_other_broadcasts_are_refused(shapes):
    with pytest.raises(ConversionBlocked, match="'sum'.*Sum 8 -> 6.*broadcasts only from opset 8"):
        convert_model(_sum(shapes), 7)


def test_equal_shapes_stay_a_sum():
    converted, _ = convert_model(_sum([[2, 3], [2, 3], [2, 3]]), 7)
    assert_valid(converted)
    assert [n.op_type for n in converted.graph.node] == ["Sum"]
