"""TVM 0.27's float16 MatMul computed in float32, and the shape chains of a model with static
inputs folded (rewriter/targets/half_matmul.py, ``rewrite_forms`` of tvm.json).  The rules run
without TVM; with its venv (tools/runtime_venvs.py; skipped when absent): TVM sums a float16
MatMul in float16 (past 2^-10 from ONNX Runtime at K = 256) and gives ONNX Runtime's values
converted, and refuses arithmetic on a dim it keeps as a shape, which runs folded."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.half_matmul import float16_in_float32, folded_when_static
from tests.targets.runtime_runs import run_in

F16, F, vi, node = TensorProto.FLOAT16, TensorProto.FLOAT, helper.make_tensor_value_info, helper.make_node


def _matmul(k: int, elem=F16) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(k)
    dtype = np.float16 if elem == F16 else np.float32
    b = rng.standard_normal((k, 32)).astype(dtype)
    graph = helper.make_graph([node("MatMul", ["a", "b"], ["y"], name="mm")], "g", [vi("a", elem, [4, k])],
                              [vi("y", elem, [4, 32])], [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"a": rng.standard_normal((4, k)).astype(dtype)}


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _rel(a, b) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _rewritten(model, rewrite):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    notes = rewrite(out, "tvm 0.27")
    onnx.checker.check_model(out, full_check=True)
    return out, notes


@pytest.mark.parametrize("k", [16, 256, 1024])
def test_float16_matmul_in_float32(k):
    model, feeds = _matmul(k)
    out, notes = _rewritten(model, float16_in_float32)
    assert [n.op_type for n in out.graph.node] == ["Cast", "Cast", "MatMul", "Cast"] and "'mm'" in notes[0]
    exact = feeds["a"].astype(np.float64) @ numpy_helper.to_array(model.graph.initializer[0]).astype(np.float64)
    got = _ort(out, feeds)
    assert got.dtype == np.float16 and _rel(got, exact) < 2.0 ** -11  # one rounding to float16
    assert _rel(got, _ort(model, feeds)) < 2.0 ** -11


def test_float32_matmul_left():
    model, _ = _matmul(16, F)
    assert float16_in_float32(model, "tvm 0.27") == []


def _repeat_kv(dims=(1, 2, 3, 4)) -> onnx.ModelProto:
    """y = Reshape(k, [b, 2 * heads, s, d]) of k tiled twice along heads, the new heads' count computed
    Mul(Unsqueeze(Gather(Shape(k), 1)), 2) (onnxruntime-genai's repeat_kv)."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("one", 1), ("two", 2), ("k0", [0]), ("lead", [1]), ("tail", [3, 4]), ("reps", [1, 2, 1, 1]))]
    nodes = [node("Shape", ["k"], ["s"]), node("Gather", ["s", "one"], ["h"], axis=0), node("Unsqueeze", ["h", "k0"], ["h1"]),
             node("Mul", ["h1", "two"], ["h2"], name="heads_twice"), node("Concat", ["lead", "h2", "tail"], ["shape"], axis=0),
             node("Tile", ["k", "reps"], ["t"]), node("Reshape", ["t", "shape"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [vi("k", F, list(dims))], [vi("y", F, [None] * 4)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_static_inputs_folded():
    model = _repeat_kv()
    out, notes = _rewritten(model, folded_when_static)
    assert "Shape" not in {n.op_type for n in out.graph.node} and "1 node(s) doing arithmetic" in notes[0]
    assert "1 now on constants: 'heads_twice'" in notes[0]
    feeds = {"k": np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)}
    np.testing.assert_array_equal(_ort(out, feeds), _ort(model, feeds))


def test_static_inputs_without_dim_arithmetic_not_folded():
    """Arithmetic on constants only (the Mul of a constant, not of the dim): nothing TVM refuses."""
    model = _repeat_kv()
    next(n for n in model.graph.node if n.name == "heads_twice").input[0] = "lead"
    before = model.SerializeToString()
    assert folded_when_static(model, "tvm 0.27") == [] and model.SerializeToString() == before


def test_symbolic_inputs_not_folded():
    model = _repeat_kv((1, 2, "s", 4))
    before = model.SerializeToString()
    assert folded_when_static(model, "tvm 0.27") == [] and model.SerializeToString() == before


def test_data_names_the_forms():
    forms = parse_target("tvm==0.27").rewrite_forms
    assert forms["MatMul"]["form"] == "float16_in_float32" and forms["Shape"]["form"][0] == "folded_when_static"


def test_tvm_sums_float16_in_float16_and_converted_in_float32():
    model, feeds = _matmul(256)
    want = _ort(model, feeds)
    converted, report = convert_for(model, runtime="tvm==0.27")
    assert any("float16 MatMul" in n for n in report.target_notes)
    as_is = run_in("tvm", "0.27", model, feeds)
    assert as_is["ok"] and _rel(as_is["values"][0], want) > 2.0 ** -10
    got = run_in("tvm", "0.27", converted, feeds)
    assert got["ok"] and _rel(got["values"][0], want) < 2.0 ** -11


def test_tvm_refuses_dim_arithmetic_and_runs_it_folded():
    model = _repeat_kv()
    feeds = {"k": np.random.default_rng(1).standard_normal((1, 2, 3, 4)).astype(np.float32)}
    converted, report = convert_for(model, runtime="tvm==0.27")
    assert any("shape chains folded" in n for n in report.target_notes)
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "cannot handle ShapeExpr inputs" in as_is["error"]
    got = run_in("tvm", "0.27", converted, feeds)
    assert got["ok"] and np.array_equal(got["values"][0], _ort(model, feeds))
