"""Split-18 ``num_outputs`` going below 18 when the static dim cannot be split that way (sizes
2, 2, 2, -1 for 5 into 4): Split-18 fails on it when it runs, so it can only sit in a branch
never taken (AffineGrid's function body has one). The sizes are then computed at run time, as
for a dynamic dim: the taken branch computes the same, and the untaken one would fail alike.

Oracles: ONNX Runtime on the original and on the result; the checker with full_check."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model

F = TensorProto.FLOAT


def _model() -> onnx.ModelProto:
    """If c: -(first quarter of x[5] split into 4), never valid; else: Identity x."""
    split = helper.make_graph([helper.make_node("Split", ["x"], ["a", "b", "c2", "d"], name="bad_split",
                                                axis=0, num_outputs=4),
                               helper.make_node("Neg", ["a"], ["t"], name="neg")],
                              "then", [], [helper.make_tensor_value_info("t", F, ["m"])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="id")], "else", [],
                              [helper.make_tensor_value_info("e", F, [5])])
    graph = helper.make_graph([helper.make_node("If", ["c"], ["y"], name="if", then_branch=split, else_branch=other)],
                              "g", [helper.make_tensor_value_info("x", F, [5]),
                                    helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", F, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _run(model, c):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.arange(5, dtype=np.float32), "c": np.array(c)})[0]


@pytest.mark.parametrize("target", [13, 17])
def test_an_impossible_static_split_in_an_untaken_branch_converts(target):
    model = _model()
    converted, report = convert_model(model, target)
    onnx.checker.check_model(converted, full_check=True)
    assert report.changes["Split num_outputs that cannot split its static dim: sizes computed at run time"] == 1
    np.testing.assert_array_equal(_run(converted, False), _run(model, False))
    for m in (model, converted):  # taken, both fail: Split-18 refuses, Split-13 is given a negative size
        with pytest.raises(Exception, match="(?i)split"):
            _run(m, True)
