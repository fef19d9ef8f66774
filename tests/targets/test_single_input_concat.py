"""A Concat of one input (torch's exports write one for a view's shape) becomes an Identity for a
release whose ``form_verdicts`` say it refuses that form (LiteRT: onnx2tf writes a custom op,
``ONNX_CONCAT``), and stays a Concat elsewhere. ONNX Runtime on the original is the oracle; the
LiteRT venv, when present, runs the result."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper

from rewriter.convert.for_target import convert_for
from rewriter.targets.single_input import single_input_concats
from tests.targets.runtime_runs import run_in

X = np.arange(12, dtype=np.float32).reshape(3, 4)
FEEDS = {"x": X, "w": X.ravel() * 2}  # y: w in x's shape


def _model(two: bool = False, in_if: bool = False) -> onnx.ModelProto:
    inputs = ["s", "s"] if two else ["s"]
    body = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
            helper.make_node("Concat", inputs, ["c"], axis=0, name="view_shape"),
            helper.make_node("Reshape", ["w", "c"] if not two else ["w", "x_shape"], ["y"], name="view")]
    inits = [onnx.numpy_helper.from_array(np.array([3, 4], np.int64), "x_shape")] if two else []
    if in_if:
        branch = helper.make_graph(body, "then", [], [helper.make_tensor_value_info("y", T.FLOAT, ["a", "b"])])
        other = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "else", [],
                                  [helper.make_tensor_value_info("z", T.FLOAT, ["a", "b"])])
        nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other, name="if")]
        graph_inputs = [helper.make_tensor_value_info("x", T.FLOAT, ["a", "b"]),
                        helper.make_tensor_value_info("w", T.FLOAT, ["n"]), helper.make_tensor_value_info("cond", T.BOOL, [])]
    else:
        nodes = body
        graph_inputs = [helper.make_tensor_value_info("x", T.FLOAT, ["a", "b"]), helper.make_tensor_value_info("w", T.FLOAT, ["n"])]
    graph = helper.make_graph(nodes, "g", graph_inputs, [helper.make_tensor_value_info("y", T.FLOAT, ["a", "b"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def _ops(model: onnx.ModelProto) -> list[str]:
    from rewriter.graph import traversal

    return [n.op_type for s in traversal.iter_scopes(model) for n in s.body.node]


def _ort(model: onnx.ModelProto, feeds: dict):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _shape_out() -> onnx.ModelProto:
    """The Concat's result is a graph output: no Reshape reads it (nothing else folds it away)."""
    graph = helper.make_graph([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                               helper.make_node("Concat", ["s"], ["c"], axis=0, name="view_shape")], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, ["a", "b"])],
                              [helper.make_tensor_value_info("c", T.INT64, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def test_litert_gets_an_identity_that_computes_the_same():
    model = _shape_out()
    out, report = convert_for(model, runtime="litert==2.6")
    assert "Concat" not in _ops(out) and _ops(out).count("Identity") == 1
    assert [n.name for n in out.graph.node if n.op_type == "Identity"] == ["view_shape"]
    assert any("1 Concat node(s) of one input written as Identity for litert 2.6" in n for n in report.target_notes)
    onnx.checker.check_model(out, full_check=True)
    np.testing.assert_array_equal(_ort(out, {"x": X})[0], [3, 4])


def test_the_reshape_form_computes_the_same_whatever_else_litert_rewrites():
    model = _model()
    out, _ = convert_for(model, runtime="litert==2.6")
    assert "Concat" not in _ops(out)
    np.testing.assert_array_equal(_ort(out, FEEDS)[0], _ort(model, FEEDS)[0])


def test_inside_a_branch_too():
    out, _ = convert_for(_model(in_if=True), runtime="litert==2.6")
    assert "Concat" not in _ops(out)
    np.testing.assert_array_equal(_ort(out, {**FEEDS, "cond": np.array(True)})[0], X * 2)


def test_a_concat_of_two_and_releases_that_run_the_form_keep_it():
    out, report = convert_for(_model(two=True), runtime="litert==2.6")
    assert "Concat" in _ops(out) and not any("written as Identity" in n for n in report.target_notes)
    for target in ("openvino==2026.4", "tract==0.23"):
        assert "Concat" in _ops(convert_for(_model(), runtime=target)[0]), target


def test_the_verdict_decides_per_version():
    model = _model()
    assert single_input_concats(model, {"": {"Concat": {"13": {"single_input": "ok"}}}}, "r") == []
    assert single_input_concats(model, {"": {"Concat": {"11": {"single_input": "refused: x"}}}}, "r") == []
    assert "Concat" in _ops(model)
    assert single_input_concats(model, {"": {"Concat": {"13": {"single_input": "refused: x"}}}}, "r")
    assert "Concat" not in _ops(model) and not model.graph.node[1].attribute


def test_litert_runs_it():
    out, _ = convert_for(_model(), runtime="litert==2.6")
    result = run_in("litert", "2.6", out, FEEDS)
    assert result["ok"], result
    np.testing.assert_array_equal(result["values"][0], X * 2)
