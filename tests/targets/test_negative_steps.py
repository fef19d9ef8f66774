"""A Slice with a constant negative step (a reversal) blocks for a release whose ``form_verdicts``
say it refuses that form (LiteRT: onnx2tf writes a custom op for it, constants or not), naming the
node; positive steps and releases that run it pass. ONNX Runtime is the oracle of the cases."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter import RewriterError
from rewriter.convert.for_target import convert_for
from rewriter.targets.measured_verdicts import negative_steps_blockers

REFUSED = {"": {"Slice": {"13": {"negative_steps": "refused: custom op"}}}}


def _model(step: int, as_node: bool = False, with_steps: bool = True, start: int = 3) -> onnx.ModelProto:
    names = ["starts", "ends", "axes"] + (["steps"] if with_steps else [])
    values = {"starts": [start if step < 0 else 0], "ends": [np.iinfo(np.int64).min if step < 0 else 5], "axes": [1],
              "steps": [step]}
    inits, nodes = [], []
    for name in names:
        tensor = numpy_helper.from_array(np.array(values[name], np.int64), name)
        if as_node and name == "steps":
            nodes.append(helper.make_node("Constant", [], [name], value=tensor, name="steps_const"))
        else:
            inits.append(tensor)
    nodes.append(helper.make_node("Slice", ["x", *names], ["y"], name="flip"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 5])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, None])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def test_the_cases_compute_what_they_say():
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    for model, want in [(_model(-1), x[:, 3::-1]), (_model(-1, start=-1), x[:, ::-1]), (_model(1), x)]:
        got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        np.testing.assert_array_equal(got[0], want)


def test_a_constant_negative_step_blocks_naming_the_node():
    for as_node in (False, True):
        found = negative_steps_blockers(_model(-1, as_node), REFUSED, "r 1")
        assert [(f[1], f[2], f[4]) for f in found] == [("Slice", 13, "flip")], as_node
        assert "r 1 refuses Slice-13 with a negative step that does not reverse a whole axis" in found[0][3]
        assert "custom op" in found[0][3]


def test_a_whole_axis_reversal_passes_any_other_negative_step_blocks():
    assert negative_steps_blockers(_model(-1, start=-1), REFUSED, "r") == []
    assert negative_steps_blockers(_model(-1, start=2**63 - 1), REFUSED, "r") == []
    assert len(negative_steps_blockers(_model(-2, start=-1), REFUSED, "r")) == 1  # every other element
    assert len(negative_steps_blockers(_model(-1, start=-2), REFUSED, "r")) == 1  # from the one before last


def test_positive_steps_no_steps_and_a_release_that_runs_it_pass():
    assert negative_steps_blockers(_model(1), REFUSED, "r") == []
    assert negative_steps_blockers(_model(1, with_steps=False), REFUSED, "r") == []
    assert negative_steps_blockers(_model(-1), {"": {"Slice": {"13": {"negative_steps": "ok"}}}}, "r") == []
    assert negative_steps_blockers(_model(-1), {"": {"Slice": {"11": {"negative_steps": "refused: x"}}}}, "r") == []


def test_convert_for_litert_refuses_it_and_for_openvino_keeps_it():
    with pytest.raises(RewriterError, match=r"node 'flip' \(Slice\).*negative step"):
        convert_for(_model(-2), runtime="litert==2.6")  # (a step of -1 is rewritten: below)
    out, _ = convert_for(_model(1), runtime="litert==2.6")
    assert [n.op_type for n in out.graph.node] == ["Slice"]
    out, _ = convert_for(_model(-1), runtime="openvino==2026.4")
    assert [n.op_type for n in out.graph.node] == ["Slice"]


# ------------------------------------------------------------------ the rewrite of a partial reversal

from hypothesis import given, settings, strategies as st  # noqa: E402

from rewriter.targets.reversal import reversed_slices  # noqa: E402

LOW, HIGH = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def _slice(dim: int, start: int, end: int, two_axes: bool = False) -> onnx.ModelProto:
    starts, ends, axes, steps = [start], [end], [1], [-1]
    if two_axes:
        starts, ends, axes, steps = [1, start], [3, end], [0, 1], [1, -1]
    inits = [numpy_helper.from_array(np.array(v, np.int64), k)
             for k, v in dict(starts=starts, ends=ends, axes=axes, steps=steps).items()]
    graph = helper.make_graph([helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"], name="flip")],
                              "g", [helper.make_tensor_value_info("x", T.FLOAT, [4, dim])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["r", "c"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def _run(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@settings(max_examples=150, deadline=None)
@given(dim=st.integers(1, 9), start=st.one_of(st.integers(0, 12), st.just(HIGH)),
       end=st.one_of(st.integers(-12, 12), st.just(LOW), st.just(LOW + 1)), two_axes=st.booleans())
def test_the_rewrite_computes_what_the_slice_does(dim, start, end, two_axes):
    x = np.arange(4 * dim, dtype=np.float32).reshape(4, dim)
    model = _slice(dim, start, end, two_axes)
    want = _run(model, x)
    notes = reversed_slices(model, REFUSED, "r")
    ops = [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    if start >= 0 and end != -1 and end < start:
        assert ops == ["Slice", "Slice"] and notes and "'flip'" in notes[0]
        assert negative_steps_blockers(model, REFUSED, "r") == []  # the reversal left is a whole axis
        onnx.checker.check_model(model, full_check=True)
    else:
        assert ops == ["Slice"] and notes == []
    got = _run(model, x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_an_end_of_minus_one_is_an_empty_slice_and_left_as_it_is():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    model = _slice(6, 3, -1)
    assert _run(model, x).shape == (4, 0)
    assert reversed_slices(model, REFUSED, "r") == [] and _run(model, x).shape == (4, 0)


def test_other_negative_steps_are_left_to_the_blocker():
    for model in (_model(-2, start=3), _model(-1, start=-2)):
        assert reversed_slices(model, REFUSED, "r") == []
        assert len(negative_steps_blockers(model, REFUSED, "r")) == 1
    assert reversed_slices(_model(-1), {"": {"Slice": {"13": {"negative_steps": "ok"}}}}, "r") == []


def test_convert_for_litert_writes_the_two_slices():
    out, report = convert_for(_slice(6, 3, LOW), runtime="litert==2.6")
    assert [n.op_type for n in out.graph.node if n.op_type != "Constant"] == ["Slice", "Slice"]
    assert any("reversing part of an axis" in n for n in report.target_notes)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(_run(out, x), x[:, 3::-1])
