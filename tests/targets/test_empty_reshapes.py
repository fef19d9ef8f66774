"""A Reshape to the empty shape [] written as an Identity of a scalar or a Squeeze
(rewriter/targets/empty_reshapes.py, ``rewrite_forms`` ``empty_shape_squeezed`` of openvino.json's
2024.6): OpenVINO 2024.6 refuses every Reshape to [] at load.  The rule runs without OpenVINO;
with its venvs (tools/runtime_venvs.py; skipped when absent) the small models are refused by 2024.6
as they are, run by 2026.4, and run right in 2024.6 converted."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.empty_reshapes import empty_shape_squeezed
from tests.targets.runtime_runs import run_in

F, vi, node = TensorProto.FLOAT, helper.make_tensor_value_info, helper.make_node


def _model(nodes, inits, dims=(1, 2, "w")) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [vi("x", F, list(dims))], [vi("y", F, [None] * len(dims))],
                              [numpy_helper.from_array(np.array([], np.int64), "empty"), *inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _paddle_dim() -> onnx.ModelProto:
    """x + Reshape(x, [1, 2, w]), w read as Paddle writes it: Shape, Slice, Squeeze, Reshape to []."""
    inits = [numpy_helper.from_array(np.array([2], np.int64), "b"), numpy_helper.from_array(np.array([3], np.int64), "e"),
             numpy_helper.from_array(np.array([0], np.int64), "k0"), numpy_helper.from_array(np.array([1, 2], np.int64), "lead")]
    return _model([node("Shape", ["x"], ["s"]), node("Slice", ["s", "b", "e", "k0"], ["w1"]),
                   node("Squeeze", ["w1", "k0"], ["w"]), node("Reshape", ["w", "empty"], ["w3"], name="scalar_reshape"),
                   node("Unsqueeze", ["w3", "k0"], ["w4"]), node("Concat", ["lead", "w4"], ["shape_out"], axis=0),
                   node("Reshape", ["x", "shape_out"], ["xr"], name="reshape"), node("Add", ["x", "xr"], ["y"])], inits)


def _one_element(shape) -> onnx.ModelProto:
    """x + Reshape(ReduceSum of x kept to ``shape``, []): a float value of one element made a scalar."""
    keep = numpy_helper.from_array(np.array(shape, np.int64), "keep")
    kept = [node("Reshape", ["t0", "keep"], ["t"])] if shape else [node("Identity", ["t0"], ["t"])]
    return _model([node("ReduceSum", ["x"], ["t0"], keepdims=0), *kept,
                   node("Reshape", ["t", "empty"], ["t2"], name="scalar_reshape"), node("Add", ["x", "t2"], ["y"])], [keep])


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


FEEDS = {"x": np.random.default_rng(0).standard_normal((1, 2, 3)).astype(np.float32)}


@pytest.mark.parametrize("build,op", [(_paddle_dim, "Identity"), (lambda: _one_element([]), "Identity"),
                                      (lambda: _one_element([1, 1]), "Squeeze")])
def test_same_values(build, op):
    from rewriter.graph.inferred import LazyInference

    model = build()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    notes = empty_shape_squeezed(out, "openvino 2024.6", LazyInference(out)())
    onnx.checker.check_model(out, full_check=True)
    written = next(n for n in out.graph.node if n.name == "scalar_reshape")
    assert written.op_type == op and len(written.input) == 1 and "1 Reshape node(s)" in notes[0]
    assert [n.op_type for n in out.graph.node].count("Reshape") == [n.op_type for n in model.graph.node].count("Reshape") - 1
    np.testing.assert_array_equal(_ort(out, FEEDS), _ort(model, FEEDS))


def test_other_reshapes_left():
    model = _one_element([1])
    model.graph.node[2].input[1] = "keep"  # Reshape to [1]: not the empty shape
    model.graph.node[1].input[1] = "keep"
    before = model.SerializeToString()
    assert empty_shape_squeezed(model, "openvino 2024.6") == [] and model.SerializeToString() == before


def test_data_names_the_form():
    assert parse_target("openvino==2024.6").rewrite_forms["Reshape"]["form"] == "empty_shape_squeezed"
    assert "Reshape" not in parse_target("openvino==2026.4").rewrite_forms


@pytest.mark.parametrize("build", [_paddle_dim, lambda: _one_element([])])
def test_openvino_2024_refuses_as_is_and_runs_converted(build):
    model = build()
    as_is = run_in("openvino", "2024.6", model, FEEDS)
    assert not as_is["ok"] and "scalar shape pattern should be equal to 1" in as_is["error"]
    newer = run_in("openvino", "2026.4", model, FEEDS)
    assert newer["ok"] and np.allclose(newer["values"][0], _ort(model, FEEDS), rtol=1e-6)
    converted, report = convert_for(model, runtime="openvino==2024.6")
    assert any("Reshape node(s) to the empty shape" in n for n in report.target_notes)
    got = run_in("openvino", "2024.6", converted, FEEDS)
    assert got["ok"] and np.allclose(got["values"][0], _ort(model, FEEDS), rtol=1e-6)
