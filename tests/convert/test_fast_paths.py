"""The converter's shortcuts change how fast it works, never what it produces.

- Nodes whose every step keeps them whatever their types (per op and opset) are skipped
  without a per-node look: the result and the report are the same as with every node looked at.
- The input's shape inference runs only when a check or a step needs types, and once at most.
- Unused constants left by a conversion go without a sweep of the graph when they are plain
  initializers; the sweep still runs when a node must go.
- A refusal found through the memo of type verdicts names the refused node's own values.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter.convert.engine as engine
from rewriter.convert import convert_model
from rewriter.convert.paths import Keep
from rewriter.convert.planner import ConversionBlocked
from rewriter.graph.inferred import LazyInference
from rewriter.graph.unused_values import remove_unused
from tests.convert.test_export_like import MODELS, SCOPED, LATEST
from tests.oracle import assert_valid

F = TensorProto.FLOAT


def _cases():
    for name in MODELS:
        for target in (11, 13, 18, LATEST):
            yield name, target
    for name in SCOPED:
        for target in (11, 18, LATEST):
            yield name, target


def _build(name) -> onnx.ModelProto:
    if name in MODELS:
        return MODELS[name]()[0]
    opset, graph, functions, _ = SCOPED[name]
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("local", 1)] if functions else [])
    model = helper.make_model(graph, opset_imports=imports, functions=functions)
    model.ir_version = 8
    return model


@pytest.mark.parametrize("name, target", list(_cases()))
def test_skipping_kept_nodes_changes_nothing(name, target, monkeypatch):
    model = _build(name)
    fast, fast_report = convert_model(model, target, plan_only=True)
    monkeypatch.setattr(engine.Engine, "_keep_without_looking", lambda self, *args: Keep.LOOK)
    slow, slow_report = convert_model(model, target, plan_only=True)
    assert fast.SerializeToString() == slow.SerializeToString()
    assert fast_report.to_dict() == slow_report.to_dict()


def _chain(opset: int, with_reduce_prod: bool) -> onnx.ModelProto:
    mean = helper.make_node("ReduceMean", ["r"], ["m"], name="mean", axes=[1], keepdims=1) if opset < 18 else \
        helper.make_node("ReduceMean", ["r", "axes"], ["m"], name="mean", keepdims=1)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), mean]
    if with_reduce_prod:
        nodes.append(helper.make_node("ReduceProd", ["m"], ["y"], name="prod", axes=[0], keepdims=1))
    else:
        nodes.append(helper.make_node("Identity", ["m"], ["y"], name="id"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, [1, 1] if with_reduce_prod else [2, 1])],
                              [numpy_helper.from_array(np.array([1], np.int64), "axes")] if opset >= 18 else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _count_inferences(monkeypatch) -> list:
    calls = []
    original = onnx.shape_inference.infer_shapes

    def counting(*args, **kwargs):
        calls.append(kwargs.get("strict_mode", False))
        return original(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counting)
    return calls


def test_no_input_inference_when_nothing_needs_types(monkeypatch, tmp_path):
    from rewriter import cli

    path = tmp_path / "m.onnx"
    onnx.save(_chain(13, with_reduce_prod=False), path)
    calls = _count_inferences(monkeypatch)
    assert cli.main(["convert", str(path), "--opset", "18", "-o", str(tmp_path / "o.onnx"), "-q"]) == 0
    assert calls == [True]  # the result's strict inference (its verification) only


def test_one_input_inference_shared_by_the_checks_and_the_steps(monkeypatch, tmp_path):
    from rewriter import cli

    path = tmp_path / "m.onnx"
    onnx.save(_chain(18, with_reduce_prod=False), path)  # down: Relu 14 -> 13 needs the types
    calls = _count_inferences(monkeypatch)
    assert cli.main(["convert", str(path), "--opset", "13", "-o", str(tmp_path / "o.onnx"), "-q"]) == 0
    assert calls.count(False) == 1 and calls.count(True) == 1

    onnx.save(_chain(13, with_reduce_prod=True), path)  # the ReduceProd check needs ranks
    calls.clear()
    assert cli.main(["convert", str(path), "--opset", "11", "-o", str(tmp_path / "o.onnx"), "-q"]) == 0
    assert calls.count(False) == 1 and calls.count(True) == 1


def test_lazy_inference_runs_once_and_reports_failure_as_none(monkeypatch):
    model = _chain(13, with_reduce_prod=True)
    calls = _count_inferences(monkeypatch)
    lazy = LazyInference(model)
    assert not lazy.done and calls == []
    first = lazy()
    assert lazy() is first and len(calls) == 1 and lazy.done
    assert {v.name for v in first.graph.value_info} >= {"r", "m"}

    def broken(*args, **kwargs):
        raise onnx.shape_inference.InferenceError("boom")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", broken)
    assert LazyInference(model)() is None


def _with_unused(extra_node: bool) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array([1], np.int64), "axes_unused"),
             numpy_helper.from_array(np.array([2], np.int64), "kept_input"),
             numpy_helper.from_array(np.ones(3, np.float32), "w")]
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    if extra_node:
        nodes.append(helper.make_node("Constant", [], ["c_unused"], name="const",
                                      value=numpy_helper.from_array(np.array([0], np.int64))))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [3]),
                                           helper.make_tensor_value_info("kept_input", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", F, [3])], inits,
                              value_info=[helper.make_tensor_value_info("axes_unused", TensorProto.INT64, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("extra_node", [False, True])
def test_unused_constants_go_with_or_without_a_sweep(extra_node):
    model = _with_unused(extra_node)
    only = {"axes_unused", "kept_input", "w"} | ({"c_unused"} if extra_node else set())
    removed = remove_unused(model, only=only)
    assert [t.name for t in model.graph.initializer] == ["kept_input", "w"]  # an input stays; w is read
    assert not model.graph.value_info  # the declaration of what went, gone too
    assert [n.name for n in model.graph.node] == ["add"]
    assert len(removed) == (2 if extra_node else 1)
    onnx.checker.check_model(model)


def test_a_memoized_type_refusal_names_each_node():
    """Add-14 allows int8, Add-13 does not: both nodes refused, each with its own input."""
    i8 = TensorProto.INT8
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"], name="first"),
         helper.make_node("Add", ["s", "c"], ["t"], name="second")], "g",
        [helper.make_tensor_value_info(n, i8, [2]) for n in "abc"], [helper.make_tensor_value_info("t", i8, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    with pytest.raises(ConversionBlocked) as e:
        convert_model(model, 13)
    lines = [b.line() for b in e.value.blockers]
    assert len(lines) == 2
    assert "'first'" in lines[0] and "'a'" in lines[0] and "int8" in lines[0]
    assert "'second'" in lines[1] and "'s'" in lines[1] and "'a'" not in lines[1]


def test_kept_nodes_are_counted_as_type_only_in_the_report():
    model = _chain(13, with_reduce_prod=True)
    result, report = convert_model(model, LATEST)
    assert_valid(result)
    assert report.type_only["Relu"] == 1 and report.nodes["Relu"] == 1


# ---------------------------------------------------------------- ReduceProd ranks, waiting

def _reduce_prod_chain(axes, opset=13) -> onnx.ModelProto:
    """x -> Relu -> ReduceProd(axes): the data's rank is declared nowhere, only inference knows it."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("ReduceProd", ["r"], ["y"], name="prod", axes=axes, keepdims=1)], "g",
        [helper.make_tensor_value_info("x", F, [2, 3, 4])], [helper.make_tensor_value_info("y", F, [2, 1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_reduce_prod_ranks_come_from_the_results_inference(monkeypatch, tmp_path):
    from rewriter import cli

    path = tmp_path / "m.onnx"
    onnx.save(_reduce_prod_chain([1]), path)
    calls = _count_inferences(monkeypatch)
    assert cli.main(["convert", str(path), "--opset", "18", "-o", str(tmp_path / "o.onnx"), "-q"]) == 0
    assert calls == [True]  # no inference of the input: the result's strict one gave the rank


@pytest.mark.parametrize("flags", [[], ["--no-verify"], ["--verify"]])
@pytest.mark.parametrize("axes, message", [([3], "axes [3] out of range for data of rank 3"),
                                           ([1, -2], "duplicate axes [1, -2]")])
def test_reduce_prod_axes_checked_with_waiting_ranks(flags, axes, message, tmp_path, capsys):
    from rewriter import cli

    path, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(_reduce_prod_chain(axes), path)
    assert cli.main(["convert", str(path), "--opset", "18", "-o", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert "node 'prod' (ReduceProd)" in err and message in err
    assert not out.exists()


def test_reduce_prod_axes_checked_before_a_plan(tmp_path, capsys):
    from rewriter import cli

    path = tmp_path / "m.onnx"
    onnx.save(_reduce_prod_chain([5]), path)
    assert cli.main(["convert", str(path), "--opset", "18", "--plan"]) == 2
    assert "axes [5] out of range for data of rank 3" in capsys.readouterr().err
