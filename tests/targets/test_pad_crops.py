"""A Pad with a negative pad written as a Slice, then a Pad of the rest
(rewriter/targets/pad_crops.py, ``rewrite_forms`` ``negative_cropped`` of tract.json): tract 0.23
aborts on a negative pad.  The rule is checked against ONNX Runtime on random pads in every mode;
with the tract venv (tools/runtime_venvs.py; skipped when absent) the small models abort tract as
they are and run right converted."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.pad_crops import negative_cropped
from tests.targets.runtime_runs import run_in

F = TensorProto.FLOAT


def _pad(dims, pads, mode="constant", axes=None, opset=17, value=None) -> onnx.ModelProto:
    inputs = ["x", "pads", "value" if value is not None else "", *(["axes"] if axes is not None else [])]
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    if value is not None:
        inits.append(numpy_helper.from_array(np.array(value, np.float32), "value"))
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
    graph = helper.make_graph([helper.make_node("Pad", inputs, ["y"], name="pad", mode=mode)], "g",
                              [helper.make_tensor_value_info("x", F, dims)], [helper.make_tensor_value_info("y", F, [None] * len(dims))],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _ort(model: onnx.ModelProto, x: np.ndarray):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _rewritten(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    notes = negative_cropped(out, "tract 0.23")
    onnx.checker.check_model(out, full_check=True)
    return out, notes


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_same_values_as_onnx_runtime(data):
    rank = data.draw(st.integers(1, 3))
    shape = data.draw(st.lists(st.integers(3, 6), min_size=rank, max_size=rank))
    pads = data.draw(st.lists(st.integers(-2, 2), min_size=2 * rank, max_size=2 * rank).filter(lambda p: min(p) < 0))
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect"]))
    model = _pad(shape, pads, mode, value=1.5 if mode == "constant" else None)
    x = np.random.default_rng(len(pads)).standard_normal(shape).astype(np.float32)
    try:
        want = _ort(model, x)
    except Exception:  # noqa: BLE001 - pads ONNX Runtime refuses (reflect past the edge, an empty axis)
        return
    out, notes = _rewritten(model)
    assert "1 Pad node(s)" in notes[0] and "'pad'" in notes[0]
    assert [n.op_type for n in out.graph.node if n.op_type != "Constant"] == \
        (["Slice", "Pad"] if max(pads) > 0 else ["Slice", "Identity"])
    got = _ort(out, x)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_axes_input_and_crop_only():
    """Opset 18's axes: the Slice crops those axes only; pads that only remove give no Pad."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    model = _pad([2, 3, 4], [-1, 1, -1, 0], "edge", axes=[1, 2], opset=18)
    out, _ = _rewritten(model)
    np.testing.assert_array_equal(_ort(out, x), _ort(model, x))
    crop = next(n for n in out.graph.node if n.op_type == "Slice")
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t).tolist() for n in out.graph.node if n.op_type == "Constant"}
    assert [consts[i] for i in crop.input[1:4]] == [[1], [-1], [1]]
    only = _pad([2, 3, 4], [0, -1, 0, 0, 0, -2])
    out, _ = _rewritten(only)
    assert [n.op_type for n in out.graph.node if n.op_type != "Constant"] == ["Slice", "Identity"]
    np.testing.assert_array_equal(_ort(out, x), _ort(only, x))


def test_left_as_is():
    for model in (_pad([2, 3], [0, 1, 0, 1]), _pad([2, 3], [0, 1, 0, -1], opset=10)):
        if model.opset_import[0].version == 10:  # Pad-2: pads an attribute
            model.graph.node[0].CopyFrom(helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, -1]))
            del model.graph.initializer[:]
        before = model.SerializeToString()
        assert negative_cropped(model, "tract 0.23") == [] and model.SerializeToString() == before
    fed = _pad([2, 3], [0, 1, 0, -1])
    del fed.graph.initializer[:]
    fed.graph.input.append(helper.make_tensor_value_info("pads", TensorProto.INT64, [4]))
    assert negative_cropped(fed, "tract 0.23") == []


def test_data_names_the_form():
    assert parse_target("tract==0.23").rewrite_forms["Pad"]["form"] == "negative_cropped"
    assert "Pad" not in parse_target("tvm==0.27").rewrite_forms


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
@pytest.mark.parametrize("dims", [[1, 6], [1, "n"]])
def test_tract_aborts_as_is_and_runs_converted(mode, dims):
    model = _pad(dims, [0, 1, 0, -1], mode)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 6)).astype(np.float32)}
    as_is = run_in("tract", "0.23", model, feeds)
    assert not as_is["ok"] and as_is["stage"] == "crash" and "could not broadcast" in as_is["error"]
    converted, report = convert_for(model, runtime="tract==0.23")
    assert any("negative pad" in n for n in report.target_notes)
    got = run_in("tract", "0.23", converted, feeds)
    assert got["ok"] and np.array_equal(got["values"][0], _ort(model, feeds["x"]))
