"""tract 0.23 cannot sort what a Cast to int64 writes (it reads the Cast as its dim type, TDim: "TDim
is not a number"): convert --target tract==0.23 has a TopK whose data such a Cast (or a chain of
them) writes sort the integers the first Cast reads (``rewrite_forms`` TopK / ``cast_bypassed``,
rewriter/targets/tdim_casts.py).  Checked against ONNX Runtime, and in tract's venv (skipped when
absent)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from tests.targets.runtime_runs import run_in


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


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


def test_the_data_names_the_form():
    forms = parse_target("tract==0.23").rewrite_forms
    assert forms["TopK"]["form"] == "cast_bypassed" and "TDim is not a number" in forms["TopK"]["measured"]
    assert "TopK" not in parse_target("openvino==2026.4").rewrite_forms
