"""onnx2tf 2.6.9 writes a Where that is not float as TFLite SELECT when the condition has the first
branch's shape, and SELECT takes no broadcasting between the branches; LiteRT has no SELECT on
strings at all.  convert --target litert==2.6 (``rewrite_forms`` Where / ``branches_swapped`` and
``strings_gathered``, rewriter/targets/where_branches.py) swaps such branches under a Not, and
gathers a choice between two string constants.  The rules run without the runtime; with the LiteRT
venv (skipped when absent) the small models run: refused as they are, right converted."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.where_branches import branches_swapped, strings_gathered
from tests.targets.runtime_runs import ROOT, run_in

DATA = json.loads((ROOT / "rewriter" / "targets" / "data" / "litert.json").read_text())["releases"]


def _where(elem, x_shape, first="v", second="k", k=-1, cond_shape=None) -> onnx.ModelProto:
    """c = x > 0; v = Cast(x) (or x > -1 for bool); Where(c, first, second) with k a constant of ``elem``."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    value = node("Greater", ["x", "m"], ["v"]) if elem == T.BOOL else node("Cast", ["x"], ["v"], to=elem)
    np_type = onnx.helper.tensor_dtype_to_np_dtype(elem) if elem != T.STRING else object
    inits = [numpy_helper.from_array(np.array(0, np.float32), "z"), numpy_helper.from_array(np.array(-1, np.float32), "m"),
             numpy_helper.from_array(np.array(k, np_type), "k"), numpy_helper.from_array(np.array("b", object), "s")]
    nodes = [node("Greater", ["x", "z"], ["c"], name="gt"), value, node("Where", ["c", first, second], ["y"], name="w")]
    graph = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, x_shape)], [vi("y", elem, x_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _ort(model, feeds):
    """ONNX Runtime's outputs (onnx.reference's for a bool Where, which ONNX Runtime does not implement)."""
    if any(n.op_type == "Where" for n in model.graph.node) and model.graph.output[0].type.tensor_type.elem_type == T.BOOL:
        return ReferenceEvaluator(model).run(None, feeds)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _feeds(shape=(5,)):
    return {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}


def test_the_data_rewrites_them_for_litert_2_6():
    entry = parse_target("litert==2.6").rewrite_forms["Where"]
    assert entry["form"] == ["branches_swapped", "strings_gathered", "constant_branch_broadcast"]  # (the last: test_nan_fill)
    assert "HaveSameShapes" in DATA["2.6"]["rewrite_forms"]["Where"]["measured"]
    assert "Where" not in parse_target("openvino==2026.4").rewrite_forms


@pytest.mark.parametrize("elem,shape", [(T.INT64, ["n"]), (T.INT32, ["n", 1]), (T.BOOL, ["n"]), (T.INT64, [5])])
def test_a_broadcast_second_branch_is_swapped_under_a_not(elem, shape):
    model = _where(elem, shape, k=True if elem == T.BOOL else -1)
    result, report = convert_for(model, runtime="litert==2.6")
    where = next(n for n in result.graph.node if n.op_type == "Where")
    producers = {o: n for n in result.graph.node for o in n.output}
    assert producers[where.input[0]].op_type == "Not" and producers[where.input[0]].input[0] == "c"
    assert list(where.input[1:]) == ["k", "v"] and where.name == "w"
    assert any("1 Where node(s) that are not float" in note and "'w'" in note for note in report.target_notes)
    onnx.checker.check_model(result, full_check=True)
    feeds = _feeds(tuple(5 if isinstance(d, str) else d for d in shape))
    assert np.array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])


@pytest.mark.parametrize("case", ["float", "one shape", "first scalar", "both scalars", "unknown rank"])
def test_other_where_nodes_are_kept(case):
    model = {"float": lambda: _where(T.FLOAT, ["n"]),
             "one shape": lambda: _where(T.INT64, ["n"], second="v"),
             "first scalar": lambda: _where(T.INT64, ["n"], first="k", second="v"),
             "both scalars": lambda: _where(T.INT64, ["n"], first="k", second="k"),
             "unknown rank": lambda: _where(T.INT64, None)}[case]()
    before = model.SerializeToString()
    assert branches_swapped(model, "litert 2.6") == []
    assert model.SerializeToString() == before


def _three(c, a, b, elem=T.INT64) -> onnx.ModelProto:
    node, vi = helper.make_node, helper.make_tensor_value_info
    graph = helper.make_graph([node("Where", ["c", "a", "b"], ["y"], name="w")], "g",
                              [vi("c", T.BOOL, c), vi("a", elem, a), vi("b", elem, b)], [vi("y", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("c,a,b", [([3], [3, 3], []), ([None], [None], []), (["n", 2], ["n", None], [1]),
                                   ([4], [4], [1])])
def test_a_first_branch_select_may_take_is_swapped(c, a, b):
    """onnx2tf's SELECT: the condition of the first branch's shape or of rank 1 as long as its first
    dim (dims not known count as maybe); the second branch then of another rank or a known other dim."""
    model = _three(c, a, b)
    assert branches_swapped(model, "litert 2.6")
    assert [n.op_type for n in model.graph.node] == ["Not", "Where"]
    assert list(model.graph.node[1].input) == ["w_not", "b", "a"]


@pytest.mark.parametrize("c,a,b", [([3], [2], []), (["n", 2], ["n", 3], []), ([4], [4], [4]), ([4], [4], [None]),
                                   (["n"], [], [])])
def test_where_the_first_branch_is_not_select_or_the_second_is_too_it_is_kept(c, a, b):
    assert branches_swapped(_three(c, a, b), "litert 2.6") == []


def test_a_second_branch_that_select_also_takes_is_kept():
    node, vi = helper.make_node, helper.make_tensor_value_info
    graph = helper.make_graph([node("Where", ["c", "a", "b"], ["y"])], "g",
                              [vi("c", T.BOOL, ["n"]), vi("a", T.INT64, ["n"]), vi("b", T.INT64, ["n", 3])],
                              [vi("y", T.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    assert branches_swapped(model, "litert 2.6") == []


def test_two_string_constants_are_gathered():
    model = _where(T.STRING, ["n"], first="k", second="s", k="a")
    result, report = convert_for(model, runtime="litert==2.6")
    assert "Where" not in [n.op_type for n in result.graph.node]
    gather = next(n for n in result.graph.node if n.op_type == "Gather")
    assert gather.name == "w" and gather.output[0] == "y"
    assert any("choosing between two string constants" in note and "'w'" in note for note in report.target_notes)
    onnx.checker.check_model(result, full_check=True)
    feeds = _feeds()
    assert list(_ort(result, feeds)[0]) == list(_ort(model, feeds)[0])


def test_string_constants_of_two_elements_are_kept():
    node, vi = helper.make_node, helper.make_tensor_value_info
    pair = [numpy_helper.from_array(np.array(v, object), n) for n, v in (("a", ["x", "y"]), ("b", ["u", "v"]))]
    graph = helper.make_graph([node("Where", ["c", "a", "b"], ["y"])], "g", [vi("c", T.BOOL, [2])],
                              [vi("y", T.STRING, [2])], pair)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    assert strings_gathered(model, "litert 2.6") == []


def test_a_string_branch_computed_is_kept():
    node, vi = helper.make_node, helper.make_tensor_value_info
    graph = helper.make_graph([node("Where", ["c", "a", "b"], ["y"])], "g",
                              [vi("c", T.BOOL, ["n"]), vi("a", T.STRING, ["n"])], [vi("y", T.STRING, None)],
                              [numpy_helper.from_array(np.array("b", object), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    assert strings_gathered(model, "litert 2.6") == []


def test_other_releases_keep_the_where():
    result, _ = convert_for(_where(T.INT64, ["n"]), runtime="openvino==2026.4")
    assert "Not" not in [n.op_type for n in result.graph.node]


@pytest.mark.parametrize("elem,shape,error", [(T.INT64, [5], "HaveSameShapes"),
                                              (T.INT64, [5, 1], "has_low_rank_input_condition"),
                                              (T.BOOL, [5], "HaveSameShapes"),
                                              (T.STRING, [5], "got 5")])
def test_litert_refuses_the_forms_and_runs_the_rewrites(elem, shape, error):
    model = _where(T.STRING, shape, first="k", second="s", k="a") if elem == T.STRING else \
        _where(elem, shape, k=True if elem == T.BOOL else -1)
    feeds = _feeds(tuple(shape))
    as_is = run_in("litert", "2.6", model, feeds)
    assert not as_is["ok"] and error in as_is["error"]
    converted = run_in("litert", "2.6", convert_for(model, runtime="litert==2.6")[0], feeds)
    assert converted["ok"], converted
    want = _ort(model, feeds)[0]
    got = converted["values"][0]
    if elem == T.STRING:
        got = np.array([v.decode() if isinstance(v, bytes) else v for v in got], dtype=object)
    assert np.array_equal(got.astype(want.dtype), want)
