"""onnx2tf 2.6.9 drops an Identity that writes a graph output by naming its input tensor after the
output, and the other readers of that input read a tensor nothing writes: LiteRT refuses the model
at run ("Input tensor N lacks data").  convert --target litert==2.6 (``rewrite_forms`` Identity /
``producer_writes_output``) makes the node before write the output (rewriter/targets/output_identity.py).
The rules run without the runtime; with the LiteRT venv (skipped when absent) the small model and a
tree-ensemble classifier (whose scores go out through such an Identity and feed its label) run."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.output_identity import producer_writes_output
from tests.convert.support.lowering_oracle import one_node
from tests.convert.support.lowering_trees import random_forest, random_inputs
from tests.targets.runtime_runs import ROOT, run_in

DATA = json.loads((ROOT / "rewriter" / "targets" / "data" / "litert.json").read_text())["releases"]


def _model(nodes, outputs, inputs=("x",), opset=13) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi(i, T.FLOAT, [5, 3]) for i in inputs],
                              [vi(o, T.FLOAT, [5, 3]) for o in outputs],
                              [numpy_helper.from_array(np.ones(3, np.float32), "one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _shared(chain: int = 1) -> onnx.ModelProto:
    """Add -> (Identity ->)* y, the Add's output also read by a Neg -> z."""
    node = helper.make_node
    nodes, last = [node("Add", ["x", "one"], ["a"], name="add")], "a"
    for i in range(chain):
        out = "y" if i == chain - 1 else f"p{i}"
        nodes.append(node("Identity", [last], [out], name=f"id{i}"))
        last = out
    nodes.append(node("Neg", ["a"], ["z"], name="neg"))
    return _model(nodes, ["y", "z"])


def _ort(model: onnx.ModelProto, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _feeds():
    return {"x": np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)}


def test_the_data_rewrites_it_for_litert_2_6():
    assert parse_target("litert==2.6").rewrite_forms["Identity"]["form"] == "producer_writes_output"
    assert "Input tensor 2 lacks data" in DATA["2.6"]["rewrite_forms"]["Identity"]["measured"]
    assert "Identity" not in parse_target("openvino==2026.4").rewrite_forms


@pytest.mark.parametrize("chain", [1, 2, 3])
def test_the_producer_writes_the_output_and_its_readers_read_it(chain):
    model = _shared(chain)
    result, report = convert_for(model, runtime="litert==2.6")
    assert [n.op_type for n in result.graph.node] == ["Add", "Neg"]
    assert list(result.graph.node[0].output) == ["y"] and list(result.graph.node[1].input) == ["y"]
    assert [o.name for o in result.graph.output] == ["y", "z"]
    assert any(f"{chain} Identity node(s) writing a graph output removed" in note and "'id0'" in note
               for note in report.target_notes)
    onnx.checker.check_model(result, full_check=True)
    for got, want in zip(_ort(result, _feeds()), _ort(model, _feeds())):
        assert np.array_equal(got, want)


def test_value_info_of_the_old_name_goes():
    model = _shared()
    model.graph.value_info.extend([helper.make_tensor_value_info("a", T.FLOAT, [5, 3]),
                                   helper.make_tensor_value_info("q", T.FLOAT, [5, 3])])
    assert producer_writes_output(model, "litert 2.6")
    assert [v.name for v in model.graph.value_info] == ["q"]


def _kept(model: onnx.ModelProto) -> None:
    before = model.SerializeToString()
    assert producer_writes_output(model, "litert 2.6") == []
    assert model.SerializeToString() == before


def test_an_identity_of_a_graph_input_an_initializer_or_an_output_is_kept():
    node = helper.make_node
    _kept(_model([node("Identity", ["x"], ["y"]), node("Neg", ["x"], ["z"])], ["y", "z"]))
    _kept(_model([node("Identity", ["one"], ["y"]), node("Add", ["x", "one"], ["z"])], ["y", "z"]))
    _kept(_model([node("Add", ["x", "one"], ["a"]), node("Identity", ["a"], ["y"])], ["y", "a"]))
    _kept(_model([node("Add", ["x", "one"], ["a"]), node("Identity", ["a"], ["p"]), node("Neg", ["p"], ["y"])],
                 ["y"]))
    _kept(_model([node("Add", ["x", "one"], ["a"]), node("Identity", ["a"], ["y"], domain="other")], ["y"]))


def test_an_input_a_subgraph_reads_is_kept():
    node, vi = helper.make_node, helper.make_tensor_value_info
    branch = helper.make_graph([node("Neg", ["a"], ["b"])], "b", [], [vi("b", T.FLOAT, [5, 3])])
    model = _model([node("Add", ["x", "one"], ["a"]), node("Identity", ["a"], ["y"]),
                    node("ReduceMin", ["x"], ["m"], keepdims=0), node("Cast", ["m"], ["c"], to=T.BOOL),
                    node("If", ["c"], ["z"], then_branch=branch, else_branch=branch)], ["y", "z"])
    _kept(model)


def test_other_releases_keep_the_identity():
    result, _ = convert_for(_shared(), runtime="openvino==2026.4")
    assert "Identity" in [n.op_type for n in result.graph.node]


def test_litert_refuses_the_form_and_runs_the_rewrite():
    model, feeds = _shared(), _feeds()
    as_is = run_in("litert", "2.6", model, feeds)
    assert not as_is["ok"] and "lacks data" in as_is["error"]
    converted = run_in("litert", "2.6", convert_for(model, runtime="litert==2.6")[0], feeds)
    assert converted["ok"]
    for got, want in zip(converted["values"], _ort(model, feeds)):
        assert np.array_equal(got, want)


def test_litert_runs_a_tree_classifier_converted_bit_for_bit():
    rng = np.random.default_rng(3)
    attrs = random_forest(rng, trees=3, depth=3, targets=3, prefix="class")
    model = one_node("TreeEnsembleClassifier", [("X", T.FLOAT, [None, 4])], [("Y", T.INT64, [None]),
                     ("Z", T.FLOAT, [None, 3])], classlabels_int64s=[4, 7, 9], **attrs)
    x = random_inputs(rng, 40, 4, nan=0.0)
    result, _ = convert_for(model, runtime="litert==2.6")
    got = run_in("litert", "2.6", result, {"X": x})
    assert got["ok"], got
    for g, want in zip(got["values"], _ort(model, {"X": x})):
        assert np.array_equal(g.astype(want.dtype), want)
