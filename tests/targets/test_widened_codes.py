"""``Expand`` / ``codes_widened`` (rewriter/targets/widened_codes.py, LiteRT's ``rewrite_forms``):
onnx2tf writes Expand as a MUL by ones, which LiteRT computes on int8 / uint8 as zeros
(nudenet_320n_qdq's anchors after ONNX Runtime's fusion) and refuses on uint16.  Written
as Cast to int32, Expand, Cast back: ONNX Runtime's values (the oracle: its run of the model as it
was), and LiteRT's where its venv is."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from rewriter.convert.for_target import convert_for
from rewriter.targets.widened_codes import expand_codes_widened
from tests.convert.quant_models import ort_run, quant_model

NP = {T.UINT8: np.uint8, T.INT8: np.int8, T.UINT16: np.uint16, T.INT32: np.int32, T.FLOAT: np.float32}


def _expand(elem):
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")]
    return quant_model(nodes, [helper.make_tensor_value_info("x", elem, [1, 6])],
                       [helper.make_tensor_value_info("y", elem, [5, 6])], [("shape", np.array([5, 6], np.int64))], opset=13)


def _feeds(elem):
    info = np.iinfo(NP[elem]) if elem != T.FLOAT else None
    x = np.array([[0, 1, 2, 3, 7, 9]]).astype(NP[elem])
    if info is not None:
        x[0, :2] = [info.min, info.max]
    return {"x": x}


@pytest.mark.parametrize("elem", [T.UINT8, T.INT8, T.UINT16])
def test_narrow_codes_are_expanded_in_int32(elem):
    model = _expand(elem)
    want = ort_run(model, _feeds(elem))
    notes = expand_codes_widened(model, "R 1.0")
    assert len(notes) == 1 and "'expand'" in notes[0]
    assert [(n.op_type, [a.i for a in n.attribute]) for n in model.graph.node] == \
        [("Cast", [T.INT32]), ("Expand", []), ("Cast", [elem])]
    onnx.checker.check_model(model, full_check=True)
    got = ort_run(model, _feeds(elem))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("elem", [T.INT32, T.FLOAT])
def test_other_types_are_left(elem):
    model = _expand(elem)
    assert expand_codes_widened(model, "R 1.0") == []
    assert [n.op_type for n in model.graph.node] == ["Expand"]


def test_an_expand_of_unknown_type_is_left():
    model = _expand(T.UINT8)
    model.graph.node.insert(0, helper.make_node("Opaque", ["x"], ["v"], domain="custom"))  # no inference
    model.graph.node[1].input[0] = "v"
    model.opset_import.append(helper.make_opsetid("custom", 1))
    assert expand_codes_widened(model, "R 1.0") == []
    assert [n.op_type for n in model.graph.node] == ["Opaque", "Expand"]


def test_an_expand_inside_a_branch_is_widened():
    then = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["t"], name="inner")], "then", [],
                             [helper.make_tensor_value_info("t", T.UINT8, [5, 6])])
    other = helper.make_graph([helper.make_node("Identity", ["wide"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", T.UINT8, [5, 6])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    model = quant_model(nodes, [helper.make_tensor_value_info("x", T.UINT8, [1, 6]),
                                helper.make_tensor_value_info("c", T.BOOL, [])],
                        [helper.make_tensor_value_info("y", T.UINT8, [5, 6])],
                        [("shape", np.array([5, 6], np.int64)), ("wide", np.zeros((5, 6), np.uint8))], opset=13)
    feeds = {**_feeds(T.UINT8), "c": np.array(True)}
    want = ort_run(model, feeds)
    assert len(expand_codes_widened(model, "R 1.0")) == 1
    branch = next(a.g for a in model.graph.node[0].attribute if a.name == "then_branch")
    assert [n.op_type for n in branch.node] == ["Cast", "Expand", "Cast"]
    np.testing.assert_array_equal(ort_run(model, feeds), want)


def test_only_litert_widens():
    for name in ("tract==0.23", "openvino==2026.4", "tvm==0.27"):
        result, _ = convert_for(_expand(T.UINT8), runtime=name)
        assert [n.op_type for n in result.graph.node] == ["Expand"], name
    result, report = convert_for(_expand(T.UINT8), runtime="litert==2.6")
    assert [n.op_type for n in result.graph.node] == ["Cast", "Expand", "Cast"]
    assert any("Expand node(s) of 8- or 16-bit integers" in n for n in report.target_notes)


@pytest.mark.parametrize("elem", [T.UINT8, T.INT8])
def test_litert_runs_the_widened_form(elem):
    from tests.targets.runtime_runs import run_in

    model, feeds = _expand(elem), _feeds(elem)
    want = ort_run(model, feeds)
    as_is = run_in("litert", "2.6", model, feeds)
    assert as_is["ok"] and not np.array_equal(as_is["values"][0], want)  # (zeros)
    result, _ = convert_for(model, runtime="litert==2.6")
    got = run_in("litert", "2.6", result, feeds)
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0], want)


def test_litert_runs_widened_uint16():
    from tests.targets.runtime_runs import run_in

    model, feeds = _expand(T.UINT16), _feeds(T.UINT16)
    assert not run_in("litert", "2.6", model, feeds)["ok"]  # (its MUL refuses uint16)
    result, _ = convert_for(model, runtime="litert==2.6")
    got = run_in("litert", "2.6", result, feeds)
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0], ort_run(model, feeds))
