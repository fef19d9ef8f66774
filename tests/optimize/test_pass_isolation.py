"""A pass that fails is reported by name, its changes are undone, and the other passes still
optimize the model (the optimize runner's isolation); the T5 layer-norm case that first showed it."""

from __future__ import annotations

import json
import logging

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter import cli
from rewriter.optimize import OptimizeOptions, optimize_proto
from rewriter.optimize import neutral_constants
from rewriter.optimize.cse import CommonSubexpressionEliminationPass
from rewriter.optimize.neutral_constants import RemoveNeutralArithmeticPass
from rewriter.optimize.pipeline import OptimizePass
from rewriter.optimize.static_noops import RemoveStaticNoOpsPass
from tests import oracle
from tests.optimize.common import feeds_for, ops, optimize_and_compare, run_pass

F = onnx.TensorProto.FLOAT


def t5_layer_norm(weight=None, opset: int = 13) -> onnx.ModelProto:
    """T5's RMS norm at the end of the encoder: ``y = w * (x / sqrt(mean(x^2) + eps))``; ``y`` is
    the encoder's output and the decoder reads it too (here a Relu). An untrained export's ``w``
    is all ones, which makes the last Mul (``final_layer_norm/Mul_1``) neutral."""
    weight = np.ones(4, np.float32) if weight is None else weight
    nodes = [h.make_node("Pow", ["x", "two"], ["p"]),
             h.make_node("ReduceMean", ["p"], ["m"], axes=[-1]),
             h.make_node("Add", ["m", "eps"], ["v"]), h.make_node("Sqrt", ["v"], ["s"]),
             h.make_node("Reciprocal", ["s"], ["r"]), h.make_node("Mul", ["x", "r"], ["n"]),
             h.make_node("Mul", ["w", "n"], ["y"], name="final_layer_norm/Mul_1"),
             h.make_node("Relu", ["y"], ["z"])]
    inits = [nh.from_array(np.array(2, np.float32), "two"), nh.from_array(np.array(1e-6, np.float32), "eps"),
             nh.from_array(weight, "w")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [2, 4])],
                         [h.make_tensor_value_info("y", F, [2, 4]), h.make_tensor_value_info("z", F, [2, 4])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


# ---------------------------------------------------------------- the T5 case

def test_a_neutral_mul_making_an_output_that_other_nodes_read_goes_and_they_read_its_input():
    result, modified = run_pass(onnx.shape_inference.infer_shapes(t5_layer_norm()), RemoveNeutralArithmeticPass())
    assert modified and ops(result).count("Mul") == 1
    relu = next(n for n in result.graph if n.op_type == "Relu")
    assert relu.inputs[0] is result.graph.outputs[0] and result.graph.outputs[0].name == "y"
    assert relu.inputs[0].producer().op_type == "Mul"


def test_t5s_last_layer_norm_optimizes_to_the_same_outputs_under_the_same_names():
    result, report = optimize_and_compare(t5_layer_norm())
    assert report.failed_passes == [] and [o.name for o in result.graph.output] == ["y", "z"]
    assert [n.op_type for n in result.graph.node].count("Mul") == 1


def test_t5s_last_layer_norm_with_trained_weights_keeps_its_mul():
    result, report = optimize_and_compare(t5_layer_norm(np.array([1, 2, 1, 1], np.float32)))
    assert report.failed_passes == [] and [n.op_type for n in result.graph.node].count("Mul") == 2


def test_a_neutral_mul_making_a_branch_output_that_the_branch_reads_too():
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] x, bool c) => (float[2,3] y, float[2,3] z) <float[3] one = {1, 1, 1}> {
          y, z = If(c) <
            then_branch = t () => (float[2,3] b, float[2,3] n) { r = Relu(x)  b = Mul(r, one)  n = Neg(b) },
            else_branch = e () => (float[2,3] b2, float[2,3] n2) { b2 = Neg(x)  n2 = Relu(x) }> }""")
    onnx.checker.check_model(model, full_check=True)
    for flag in (True, False):
        feeds = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32), "c": np.array(flag)}
        result, report = optimize_proto(model)
        assert report.failed_passes == []
        oracle.assert_valid(result)
        for got, want in zip(oracle.run(result, feeds), oracle.run(model, feeds)):
            np.testing.assert_array_equal(got, want)
    branch = next(a.g for a in result.graph.node[0].attribute if a.name == "then_branch")
    assert [n.op_type for n in branch.node] == ["Relu", "Neg"] and [o.name for o in branch.output] == ["b", "n"]


# ---------------------------------------------------------------- isolation

def _mul_by_ones_and_repeats() -> onnx.ModelProto:
    """Work for two passes: a Mul by ones (neutral arithmetic) and a repeated Relu (CSE)."""
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] x) => (float[2,3] y) <float[3] one = {1, 1, 1}> {
          a = Mul(x, one)  b = Relu(a)  c = Relu(a)  y = Add(b, c) }""")
    onnx.checker.check_model(model, full_check=True)
    return model


def test_a_pass_that_raises_is_named_and_the_others_still_optimize(monkeypatch, caplog):
    def broken(self, model):
        raise ValueError("the cse broke on purpose")

    monkeypatch.setattr(CommonSubexpressionEliminationPass, "call", broken)
    with caplog.at_level(logging.WARNING, logger="rewriter"):
        result, report = optimize_and_compare(_mul_by_ones_and_repeats())
    assert report.failed_passes == [("CommonSubexpressionEliminationPass", "the cse broke on purpose")]
    assert ops(result) == ["Relu", "Relu", "Add"]  # the Mul by ones went; the repeat stays
    assert any("CommonSubexpressionEliminationPass" in r.getMessage() and "the cse broke on purpose" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)
    assert report.merged == 0 and report.rounds >= 1


def test_a_pass_that_fails_half_way_has_its_changes_undone(monkeypatch):
    """The neutral-arithmetic pass before the T5 fix: the graph output was handed over, then the
    removal failed on the Relu still reading the Mul. Nothing of that stays."""
    def handover_only(graph, out, value):  # the old _take_output: graph outputs, not the readers
        for i, o in enumerate(graph.outputs):
            if o is out:
                graph.outputs[i] = value
        name, out.name = out.name, None
        value.name = name

    monkeypatch.setattr(neutral_constants, "_take_output", handover_only)
    model = t5_layer_norm()
    result, report = optimize_and_compare(model)
    assert [name for name, _ in report.failed_passes] == ["RemoveNeutralArithmeticPass"]
    assert "still being used" in report.failed_passes[0][1]
    assert [o.name for o in result.graph.output] == ["y", "z"]
    assert [n.op_type for n in result.graph.node].count("Mul") == 2  # the neutral Mul stays


def _wrong_then_raise(self, scope, node):
    """Rewires the Relu's readers to its input (computes something else), then fails."""
    node.outputs[0].replace_all_uses_with(node.inputs[0])
    raise RuntimeError("changed my mind")


_RELU_READ = """<ir_version: 8, opset_import: ["": 13]>
    g (float[2,3] x) => (float[2,3] y) <float[3] one = {1, 1, 1}> {
      a = Mul(x, one)  b = Sub(a, one)  r = Relu(b)  y = Neg(r) }"""


def test_what_a_failing_pass_changed_before_it_failed_is_undone(monkeypatch):
    monkeypatch.setattr(RemoveStaticNoOpsPass, "OPS", frozenset({"Relu"}))
    monkeypatch.setattr(RemoveStaticNoOpsPass, "visit", _wrong_then_raise)
    result, report = optimize_and_compare(onnx.parser.parse_model(_RELU_READ))  # outputs as the source's
    assert report.failed_passes == [("RemoveStaticNoOpsPass", "changed my mind")]
    assert ops(result) == ["Sub", "Relu", "Neg"]


def test_optimize_pass_on_an_ir_model_undoes_what_a_failing_pass_changed(monkeypatch):
    monkeypatch.setattr(RemoveStaticNoOpsPass, "OPS", frozenset({"Relu"}))
    monkeypatch.setattr(RemoveStaticNoOpsPass, "visit", _wrong_then_raise)
    source = onnx.shape_inference.infer_shapes(onnx.parser.parse_model(_RELU_READ))
    model = ir.serde.deserialize_model(source)
    optimize = OptimizePass()
    assert optimize(model).model is model
    assert optimize.report.failed_passes == [("RemoveStaticNoOpsPass", "changed my mind")]
    proto = ir.serde.serialize_model(model)
    oracle.assert_valid(proto)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}
    np.testing.assert_array_equal(oracle.run(proto, feeds)[0], oracle.run(source, feeds)[0])
    assert [n.op_type for n in model.graph] == ["Sub", "Relu", "Neg"]


def test_a_pass_that_leaves_a_read_of_a_removed_value_is_caught(monkeypatch):
    def careless(self, scope, node):  # drops a Relu without rewiring its readers
        scope.graph.remove(node, safe=False)
        self.count += 1

    monkeypatch.setattr(RemoveStaticNoOpsPass, "OPS", frozenset({"Relu"}))
    monkeypatch.setattr(RemoveStaticNoOpsPass, "visit", careless)
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] x) => (float[2,3] y) <float[3] one = {1, 1, 1}> {
          a = Mul(x, one)  r = Relu(a)  y = Neg(r) }""")
    result, report = optimize_and_compare(model)
    assert [name for name, _ in report.failed_passes] == ["RemoveStaticNoOpsPass"]
    reason = report.failed_passes[0][1]
    assert reason.startswith("it left the model invalid: Neg node") and "'r'" in reason
    assert ops(result) == ["Relu", "Neg"]  # the other passes ran: the Mul by ones went


def test_a_pass_that_removes_what_makes_a_graph_output_is_caught(monkeypatch):
    def careless(self, scope, node):  # drops the Neg making the output
        scope.graph.remove(node, safe=False)
        self.count += 1

    monkeypatch.setattr(RemoveStaticNoOpsPass, "OPS", frozenset({"Neg"}))
    monkeypatch.setattr(RemoveStaticNoOpsPass, "visit", careless)
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] x) => (float[2,3] y) <float[3] one = {1, 1, 1}> { a = Mul(x, one)  y = Neg(a) }""")
    result, report = optimize_and_compare(model)
    assert report.failed_passes == [("RemoveStaticNoOpsPass", "it left the model invalid: the output 'y' is made by nothing")]
    assert ops(result) == ["Neg"]


def test_two_failing_passes_are_both_left_out(monkeypatch):
    def broken(self, model):
        raise RuntimeError(f"{type(self).__name__} broke")

    monkeypatch.setattr(CommonSubexpressionEliminationPass, "call", broken)
    monkeypatch.setattr(RemoveNeutralArithmeticPass, "call", broken)
    result, report = optimize_and_compare(_mul_by_ones_and_repeats())
    assert sorted(n for n, _ in report.failed_passes) == ["CommonSubexpressionEliminationPass",
                                                           "RemoveNeutralArithmeticPass"]
    assert ops(result) == ["Mul", "Relu", "Relu", "Add"]


def test_a_failure_in_a_pass_run_after_the_rounds_is_isolated_too(monkeypatch):
    from rewriter.optimize.dedupe import MergeEqualInitializersPass

    def broken(self, model):
        raise RuntimeError("dedupe broke")

    _, clean = optimize_proto(_mul_by_ones_and_repeats())
    monkeypatch.setattr(MergeEqualInitializersPass, "call", broken)
    result, report = optimize_and_compare(_mul_by_ones_and_repeats())
    assert report.failed_passes == [("MergeEqualInitializersPass", "dedupe broke")]
    assert ops(result) == ["Relu", "Add"]
    # what the report counts is the run that was kept, not both
    assert (report.rounds, report.fused, report.merged, report.removed_nodes) == \
        (clean.rounds, clean.fused, clean.merged, clean.removed_nodes)


def test_without_a_pass_the_result_must_not_hold_the_model_is_written_as_it_came(monkeypatch):
    """IR 3 cannot hold initializers that are not inputs: without the pass that makes Constant
    nodes of what the folds made, nothing of the run is kept."""
    from rewriter.optimize.ir3_initializers import InitializersToConstantsPass

    def broken(self, model):
        raise RuntimeError("no constants today")

    monkeypatch.setattr(InitializersToConstantsPass, "call", broken)
    model = onnx.parser.parse_model("""<ir_version: 3, opset_import: ["": 8]>
        g (float[2,3] x) => (float[2,3] y) {
          c = Constant<value = float[3] {1, 2, 3}>()  d = Neg(c)  a = Add(x, d)  y = Relu(a) }""")
    result, report = optimize_proto(model)
    assert report.failed_passes == [("InitializersToConstantsPass", "no constants today")]
    onnx.checker.check_model(result, full_check=True)
    assert ops(result) == ["Constant", "Neg", "Add", "Relu"]
    feeds = feeds_for(model)
    np.testing.assert_array_equal(oracle.run(result, feeds)[0], oracle.run(model, feeds)[0])


def test_optimize_pass_on_an_ir_model_undoes_a_failing_pass_in_place(monkeypatch):
    monkeypatch.setattr(neutral_constants, "_take_output", lambda graph, out, value: (_ for _ in ()).throw(
        RuntimeError("half way")))
    model = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(t5_layer_norm()))
    optimize = OptimizePass()
    result = optimize(model)
    assert result.model is model and optimize.report.failed_passes == [("RemoveNeutralArithmeticPass", "half way")]
    proto = ir.serde.serialize_model(model)
    oracle.assert_valid(proto)
    feeds = feeds_for(proto)
    for got, want in zip(oracle.run(proto, feeds), oracle.run(t5_layer_norm(), feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert [o.name for o in model.graph.outputs] == ["y", "z"]


def test_the_cli_warns_with_the_pass_name_and_reports_it_in_json(monkeypatch, tmp_path, capsys):
    def broken(self, model):
        raise ValueError("the cse broke on purpose")

    monkeypatch.setattr(CommonSubexpressionEliminationPass, "call", broken)
    src, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_mul_by_ones_and_repeats(), src)
    assert cli.main(["optimize", src, "-o", out, "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning:" in captured.err and "CommonSubexpressionEliminationPass" in captured.err
    doc = json.loads(captured.out)
    assert doc["changes"]["failed_passes"] == [{"pass": "CommonSubexpressionEliminationPass",
                                                "error": "the cse broke on purpose"}]
    assert doc["after"]["node_count"] == 3


def test_no_failure_no_failed_passes():
    _, report = optimize_proto(_mul_by_ones_and_repeats(), OptimizeOptions())
    assert report.failed_passes == [] and report.to_dict()["failed_passes"] == []
