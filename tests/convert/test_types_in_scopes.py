"""Types the type-only steps need, where ONNX's inference of the whole model leaves them unknown.

- the graph attribute of an op whose inference does not type it (the score_mod of the
  ai.onnx.preview FlexAttention): the subgraph is inferred on its own, from its declared inputs;
- constants a rewrite adds (Pad 18 -> 13 builds its pads with a Concat of constants): typed
  from their value, without running any inference up front;
- a value sharing a type parameter with a typed one (Add's output is its inputs' type).

Oracles: each backend case's own expected outputs (onnx.reference runs the converted model),
ONNX Runtime on the original, the checker with full_check.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from rewriter.convert.type_only import step_types_allowed
from tests.oracle import assert_same_outputs, assert_valid, backend_cases, run


def _case(name):
    return next(c for c in backend_cases("FlexAttention") if c.name == name)


@pytest.mark.parametrize("target", [11, 13, 17, 18])
@pytest.mark.parametrize("name", ["test_flexattention_relative_positional", "test_flexattention_causal_mask",
                                  "test_flexattention_soft_cap"])
def test_score_mod_subgraph_converts_down(name, target):
    case = _case(name)
    converted, report = convert_model(case.model, target)  # FlexAttention is ai.onnx.preview's
    assert_valid(converted)
    assert sum(report.nodes.values()) >= 3  # the score_mod nodes went through their steps
    for inputs, expected in case.data_sets:
        feeds = {i.name: v for i, v in zip(converted.graph.input, inputs)}
        actual = [np.asarray(o) for o in onnx.reference.ReferenceEvaluator(converted).run(None, feeds)]
        assert_same_outputs(list(expected), actual)


@pytest.mark.parametrize("target", [11, 13])
def test_pad_axes_rewrite_constants_are_typed(target):
    """Pad-18 with axes: the rewrite's Concat of constants takes Concat 13 -> 11 by its types."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], name="pad", mode="constant")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 4])],
        [numpy_helper.from_array(np.array([1, 2], np.int64), "pads"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    converted, _ = convert_model(model, target)
    assert_valid(converted)
    np.testing.assert_array_equal(run(converted, {"x": x})[0], run(model, {"x": x})[0])


def test_an_unknown_type_bound_by_a_known_one_is_known():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    known = {"a": helper.make_tensor_type_proto(TensorProto.FLOAT, [2]),
             "b": helper.make_tensor_type_proto(TensorProto.FLOAT, [2])}
    assert step_types_allowed(node, 14, 13, known.get) is None  # c shares T with a and b: float
    known = {"a": helper.make_tensor_type_proto(TensorProto.INT8, [2])}
    reason = step_types_allowed(node, 14, 13, known.get)
    assert reason is not None and "'a' is tensor(int8)" in reason
    assert step_types_allowed(node, 14, 13, {}.get) is not None  # nothing known: refused as before
