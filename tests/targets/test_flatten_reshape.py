"""tract 0.23 refuses a Flatten over two or more symbolic dims and cannot sort what a Cast to int64
writes (its dim type): convert --target tract==0.23 writes such a Flatten as a Reshape to the
products of Slices of its input's Shape (``rewrite_forms`` Flatten / ``as_reshape``,
rewriter/targets/flatten_reshape.py; opset 14 at least, for ``allowzero``) and has such a TopK sort
the integers the Cast reads (TopK / ``cast_bypassed``, rewriter/targets/tdim_casts.py).  Checked against ONNX Runtime's and onnx.reference's
Flatten over every rank, axis and dim (0 included), and in tract's venv (skipped when absent)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from rewriter.convert.for_target import convert_for
from rewriter.graph.inferred import LazyInference
from rewriter.targets import blockers, parse_target
from rewriter.targets.flatten_reshape import flatten_as_reshape, symbolic_flattens
from tests.targets.runtime_runs import run_in


def _flatten(dims, axis, opset=13, name="flat") -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Flatten", ["x"], ["y"], axis=axis, name=name)], "g",
                              [vi("x", T.FLOAT, dims)], [vi("y", T.FLOAT, [None, None])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@st.composite
def _cases(draw):
    rank = draw(st.integers(2, 5))
    shape = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    symbolic = draw(st.lists(st.integers(0, rank - 1), min_size=2, max_size=rank, unique=True))
    axis = draw(st.integers(-rank, rank))
    return shape, symbolic, axis, draw(st.sampled_from([11, 13, 14, 21]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_the_reshape_is_the_flatten_for_every_rank_axis_and_dim(case):
    shape, symbolic, axis, opset = case
    dims = [f"d{i}" if i in symbolic else n for i, n in enumerate(shape)]
    model = _flatten(dims, axis, opset)
    result, report = convert_for(model, runtime="tract==0.23")
    onnx.checker.check_model(result, full_check=True)
    assert "Flatten" not in [n.op_type for n in result.graph.node]
    assert [n.name for n in result.graph.node if n.op_type == "Reshape"] == ["flat"]
    assert any("1 Flatten node(s) over two or more dims" in note and "'flat'" in note for note in report.target_notes)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = axis if axis >= 0 else axis + len(shape)
    want = x.reshape(int(np.prod(shape[:a])), int(np.prod(shape[a:])))
    flat = _ort(model, {"x": x})[0]
    assert flat.shape == want.shape and np.array_equal(flat, want)
    for got in (_ort(result, {"x": x})[0], ReferenceEvaluator(result).run(None, {"x": x})[0]):
        assert got.shape == want.shape and np.array_equal(got, want)


def test_the_opset_goes_to_14_only_for_a_flatten_over_symbols():
    result, _ = convert_for(_flatten(["b", "s", 4], 1, 13), runtime="tract==0.23")
    assert result.opset_import[0].version == 14
    model = _flatten(["b", "s", 4], 1, 13)  # (the CLI passes its inference as a LazyInference)
    result, _ = convert_for(model, runtime="tract==0.23", inferred=LazyInference(model))
    assert result.opset_import[0].version == 14 and "Flatten" not in [n.op_type for n in result.graph.node]
    for dims in (["b", 3, 4], [2, 3, 4]):  # one symbol, none: tract runs the Flatten
        result, report = convert_for(_flatten(dims, 1, 13), runtime="tract==0.23")
        assert result.opset_import[0].version == 13 and [n.op_type for n in result.graph.node] == ["Flatten"]
        assert not any("Flatten" in note for note in report.target_notes)
    result, _ = convert_for(_flatten(["b", "s", 4], 1, 13), runtime="openvino==2026.4")  # other releases keep it
    assert [n.op_type for n in result.graph.node] == ["Flatten"] and result.opset_import[0].version == 13


def test_left_below_opset_14_or_without_a_known_rank():
    model = _flatten(["b", "s", 4], 1, 13)
    assert symbolic_flattens(model) == ["node 'flat' (Flatten) in main graph"]
    assert flatten_as_reshape(model, "tract 0.23") == [] and model.graph.node[0].op_type == "Flatten"
    unknown = _flatten(["b", "s", 4], 1, 14)
    unknown.graph.input[0].type.tensor_type.ClearField("shape")
    assert symbolic_flattens(unknown) == [] and flatten_as_reshape(unknown, "tract 0.23") == []


def test_a_flatten_inside_a_branch_is_rewritten_in_place():
    vi = helper.make_tensor_value_info
    branch = lambda n: helper.make_graph([helper.make_node("Flatten", ["x"], [f"y{n}"], axis=2, name=f"f{n}")],
                                         f"b{n}", [], [vi(f"y{n}", T.FLOAT, [None, None])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch(0), else_branch=branch(1), name="if")
    graph = helper.make_graph([node], "g", [vi("c", T.BOOL, []), vi("x", T.FLOAT, ["b", "s", 2, 3])],
                              [vi("y", T.FLOAT, [None, None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    notes = flatten_as_reshape(model, "tract 0.23")
    assert notes and notes[0].startswith("2 Flatten node(s)")
    onnx.checker.check_model(model, full_check=True)
    x = np.arange(2 * 3 * 2 * 3, dtype=np.float32).reshape(2, 3, 2, 3)
    for c in (True, False):
        got = _ort(model, {"c": np.array(c), "x": x})[0]
        assert np.array_equal(got, x.reshape(6, 6))


def test_check_says_convert_rewrites_it():
    issues = blockers(_flatten(["b", "s", 4], 1, 13), parse_target("tract==0.23"))
    flat = [line for line in issues if "'flat'" in line]
    assert len(flat) == 1 and "needs static dims" in flat[0] and flat[0].endswith("[convert may rewrite it]")
    _, report = convert_for(_flatten(["b", "s", 4], 1, 13), runtime="tract==0.23", plan_only=True)
    assert report.blockers == []


def test_in_tract_the_flatten_is_refused_and_the_reshape_runs():
    model = _flatten(["b", "s", 4], 1, 13)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}
    assert not run_in("tract", "0.23", model, feeds)["ok"]
    result, _ = convert_for(model, runtime="tract==0.23")
    got = run_in("tract", "0.23", result, feeds)
    assert got["ok"], got
    assert np.array_equal(got["values"][0], feeds["x"].reshape(2, 12))


def _topk_of_lengths(dims, source=T.INT64, to=T.INT64) -> onnx.ModelProto:
    """piper_tashkeel's sort of the lengths before torch's packed GRU: TopK(Cast(lengths, to=INT64), k)
    with k = Shape(lengths)[0] (the lengths fed as ``source``)."""
    vi, node = helper.make_tensor_value_info, helper.make_node
    nodes = [node("Cast", ["lengths"], ["l"], to=to, name="cast"),
             node("Shape", ["l"], ["s"], name="shape"), node("Gather", ["s", "zero"], ["k"], axis=0, name="gather"),
             node("TopK", ["l", "k"], ["v", "i"], name="topk")]
    graph = helper.make_graph(nodes, "g", [vi("lengths", source, dims)],
                              [vi("v", to, [None]), vi("i", T.INT64, [None])],
                              [numpy_helper.from_array(np.array([0], np.int64), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("source", [T.INT64, T.INT32])
def test_a_topk_of_a_cast_to_int64_sorts_the_integers_themselves(source):
    model = _topk_of_lengths([4], source)
    result, report = convert_for(model, runtime="tract==0.23")
    onnx.checker.check_model(result, full_check=True)
    topk = next(n for n in result.graph.node if n.op_type == "TopK")
    assert topk.input[0] == "lengths" and topk.name == "topk"
    assert [n.op_type for n in result.graph.node].count("Cast") == (2 if source == T.INT32 else 1)
    assert any("1 TopK node(s) sorting a Cast to int64" in n and "'topk'" in n for n in report.target_notes)
    dtype = helper.tensor_dtype_to_np_dtype(source)
    for lengths in ([4, 9, 2, 9], [-3, 7, 7, 0]):  # ties keep their order
        feeds = {"lengths": np.array(lengths, dtype)}
        want, got = _ort(model, feeds), _ort(result, feeds)
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want))
        ran = run_in("tract", "0.23", result, feeds)
        assert ran["ok"], ran
        assert all(np.array_equal(a, b) for a, b in zip(ran["values"], want))
    assert not run_in("tract", "0.23", model, feeds)["ok"]  # (as the data says)


def test_a_chain_of_casts_to_int64_is_followed_back():
    """(piper_tashkeel casts its lengths to int64 again at each GRU layer: the third TopK's data is
    Cast(Cast(lengths)))"""
    model = _topk_of_lengths([4], T.INT32)
    cast = model.graph.node[0]
    model.graph.node.insert(1, helper.make_node("Cast", ["l"], ["l2"], to=T.INT64, name="cast_again"))
    next(n for n in model.graph.node if n.op_type == "TopK").input[0] = "l2"
    result, _ = convert_for(model, runtime="tract==0.23")
    assert next(n for n in result.graph.node if n.op_type == "TopK").input[0] == cast.input[0] == "lengths"
    feeds = {"lengths": np.array([4, 9, 2, 9], np.int32)}
    assert all(np.array_equal(a, b) for a, b in zip(_ort(result, feeds), _ort(model, feeds)))
    got = run_in("tract", "0.23", result, feeds)
    assert got["ok"], got


@pytest.mark.parametrize(("source", "to"), [(T.FLOAT, T.INT64), (T.INT64, T.INT32)])
def test_a_topk_of_a_float_cast_or_of_a_cast_to_int32_is_left(source, to):
    model = _topk_of_lengths([4], source, to)
    result, report = convert_for(model, runtime="tract==0.23")
    assert next(n for n in result.graph.node if n.op_type == "TopK").input[0] == "l"
    assert not any("TopK" in n for n in report.target_notes)


def test_other_releases_keep_the_cast():
    result, _ = convert_for(_topk_of_lengths([4]), runtime="openvino==2026.4")
    assert next(n for n in result.graph.node if n.op_type == "TopK").input[0] == "l"


@pytest.mark.parametrize("release", ["0.23"])
def test_the_data_names_the_forms(release):
    forms = parse_target(f"tract=={release}").rewrite_forms
    assert forms["Flatten"]["form"] == "as_reshape" and "square of symbols" in forms["Flatten"]["measured"]
    assert forms["TopK"]["form"] == "cast_bypassed" and "TDim is not a number" in forms["TopK"]["measured"]
