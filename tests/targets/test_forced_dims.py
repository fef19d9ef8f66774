"""A symbol of a graph input's dims that a main-graph Concat meets with a value off its axis can only
be that value (onnxruntime-genai's "kv_cache_dim" against the head size 16): convert --target
tract==0.23 fixes it as --fix-dim would (``rewrite_forms`` Concat / ``forced_dims_fixed``,
rewriter/targets/forced_dims.py), where it refuses it symbolic.  The rules run without the
runtime; in its venv (skipped when absent) the result runs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.forced_dims import forced_dims, forced_dims_fixed
from tests.targets.runtime_runs import run_in, tool

forms = tool("symbolic_forms")
RELEASES = [("tract", "0.23")]


def _dims(model, name):
    value = next(v for v in model.graph.input if v.name == name)
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def _concat(past, new, axis=2, in_branch=False) -> onnx.ModelProto:
    vi, node = helper.make_tensor_value_info, helper.make_node
    concat = node("Concat", ["past", "new"], ["c"], axis=axis, name="cat")
    if in_branch:
        branch = lambda n: helper.make_graph([node("Concat", ["past", "new"], [f"c{n}"], axis=axis)], f"b{n}", [],
                                             [vi(f"c{n}", T.FLOAT, None)])
        concat = node("If", ["flag"], ["c"], then_branch=branch(0), else_branch=branch(1), name="if")
    inputs = [vi("past", T.FLOAT, past), vi("new", T.FLOAT, new)] + ([vi("flag", T.BOOL, [])] if in_branch else [])
    graph = helper.make_graph([concat], "g", inputs, [vi("c", T.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize(("runtime", "release"), RELEASES)
def test_the_form_runs_with_the_symbol_fixed_and_the_rest_left_symbolic(runtime, release):
    model, feeds = forms.concat_symbol_meets_value()
    _, plan = convert_for(model, runtime=f"{runtime}=={release}", plan_only=True)
    assert plan.blockers == []
    result, report = convert_for(model, runtime=f"{runtime}=={release}")
    assert _dims(result, "past") == [1, 2, "p", 4]
    assert any("d=4 (Concat" in note and f"{runtime} {release}" in note for note in report.target_notes)
    onnx.checker.check_model(result, full_check=True)
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    assert np.array_equal(ort.InferenceSession(result.SerializeToString()).run(None, feeds)[0], want)
    got = run_in(runtime, release, result, feeds)
    assert got["ok"], got
    assert np.array_equal(got["values"][0], want)
    assert not run_in(runtime, release, model, feeds)["ok"]  # (as the data says)


def test_only_a_graph_input_symbol_met_by_one_value_off_the_axis_is_fixed():
    assert forced_dims(_concat([1, "h", "p", "d"], [1, 2, 3, 4])) == {"d": (4, "cat"), "h": (2, "cat")}
    assert forced_dims(_concat([1, 2, "p", 4], [1, 2, 3, 4])) == {}  # on the axis: the lengths may differ
    assert forced_dims(_concat([1, 2, "p", "d"], [1, 2, 3, "d"])) == {}  # symbols on both sides
    assert forced_dims(_concat([1, 2, "p", "d"], [1, 2, 3, 4], in_branch=True)) == {}  # a branch may not run
    three = _concat([1, 2, "p", "d"], [1, 2, 3, 4])
    three.graph.input.append(helper.make_tensor_value_info("other", T.FLOAT, [1, 2, 3, 5]))
    three.graph.node.append(helper.make_node("Concat", ["past", "other"], ["c2"], axis=2, name="cat2"))
    three.graph.output.append(helper.make_tensor_value_info("c2", T.FLOAT, None))
    assert forced_dims(three) == {}  # d met by 4 and 5: no input runs, nothing fixed
    model = _concat([1, 2, "p", "d"], [1, 2, 3, 4])
    assert forced_dims_fixed(model, "tract 0.23") and _dims(model, "past") == [1, 2, "p", 4]
    assert forced_dims_fixed(model, "tract 0.23") == []


def test_a_symbol_shape_inference_made_is_not_fixed():
    """(the Concat meets a dim inference names, not one a graph input declares)"""
    vi, node = helper.make_tensor_value_info, helper.make_node
    graph = helper.make_graph([node("NonZero", ["m"], ["nz"]), node("Cast", ["nz"], ["f"], to=T.FLOAT),
                               node("Concat", ["f", "v"], ["c"], axis=0, name="cat")], "g",
                              [vi("m", T.BOOL, [2, 3]), vi("v", T.FLOAT, [1, 5])], [vi("c", T.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert forced_dims(model) == {}


def test_other_releases_keep_the_symbol():
    """(TVM 0.27 runs the form with the symbol fixed too, but on onnxruntime-genai's Llamas it then
    fails at load, unnamed, where convert names the Concat: not written for it)"""
    model, _ = forms.concat_symbol_meets_value()
    for runtime in ("openvino==2026.4", "tvm==0.27"):
        result, _ = convert_for(model, runtime=runtime, plan_only=runtime.startswith("tvm"))
        assert _dims(result, "past") == [1, 2, "p", "d"]
    for runtime, release in RELEASES:
        assert parse_target(f"{runtime}=={release}").rewrite_forms["Concat"]["form"] == "forced_dims_fixed"
