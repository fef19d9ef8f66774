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
from rewriter.targets.half_matmul import cast_shapes_folded, float16_in_float32, folded_when_static
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
    assert forms["Reshape"]["form"][0] == "cast_shape_folded"


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


def _tensordot(dims=(2, 3, 4), cast=True) -> onnx.ModelProto:
    """tf2onnx's Tensordot reshape: x [a, b, c] to [a * b, c] with the shape computed in int32 from
    Cast(Shape(x)) and Cast back to int64 (``cast``; else in int64 from the Shape), and an Expand of
    a constant to the shape read likewise."""
    i32, i64 = TensorProto.INT32, TensorProto.INT64
    t = np.int32 if cast else np.int64
    consts = [numpy_helper.from_array(np.array(v, dtype=d), n) for n, v, d in
              (("lead", [0], np.int64), ("two", [2], np.int64), ("last", [-1], t), ("one", [1.0], np.float32))]
    nodes = [node("Shape", ["x"], ["s"]), node("Cast", ["s"], ["s32"], to=i32) if cast else node("Identity", ["s"], ["s32"]),
             node("Slice", ["s32", "lead", "two"], ["ab"]), node("ReduceProd", ["ab"], ["p"], keepdims=1),
             node("Concat", ["p", "last"], ["shape32"], axis=0),
             node("Cast", ["shape32"], ["shape"], to=i64) if cast else node("Identity", ["shape32"], ["shape"]),
             node("Reshape", ["x", "shape"], ["y"], name="tensordot"),
             node("Cast", ["s32"], ["s64"], to=i64) if cast else node("Identity", ["s32"], ["s64"]),
             node("Expand", ["one", "s64"], ["ones"], name="ones_like"), node("Mul", ["x", "ones"], ["z"])]
    rows = dims[0] * dims[1] if isinstance(dims[0], int) else "ab"
    graph = helper.make_graph(nodes, "g", [vi("x", F, list(dims))], [vi("y", F, [rows, dims[2]]), vi("z", F, list(dims))],
                              consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _feeds_x(seed):
    return {"x": np.random.default_rng(seed).standard_normal((2, 3, 4)).astype(np.float32)}


def _ort_all(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_cast_shapes_folded_when_static():
    model = _tensordot()
    out, notes = _rewritten(model, cast_shapes_folded)
    assert "2 node(s) reading a shape computed from a Shape through a Cast" in notes[0] and "2 now on constants" in notes[0]
    assert not {"Shape", "Cast"} & {n.op_type for n in out.graph.node}
    for a, b in zip(_ort_all(out, _feeds_x(2)), _ort_all(model, _feeds_x(2)), strict=True):
        np.testing.assert_array_equal(a, b)
    symbolic = _tensordot(("a", 3, 4))
    before = symbolic.SerializeToString()
    assert cast_shapes_folded(symbolic, "tvm 0.27") == [] and symbolic.SerializeToString() == before


def test_a_shape_read_without_a_cast_is_not_folded():
    model = _tensordot(cast=False)
    onnx.checker.check_model(model, full_check=True)
    before = model.SerializeToString()
    assert cast_shapes_folded(model, "tvm 0.27") == [] and model.SerializeToString() == before


def test_tvm_refuses_a_cast_shape_and_runs_it_folded():
    model, feeds = _tensordot(), _feeds_x(3)
    converted, report = convert_for(model, runtime="tvm==0.27")
    assert any("through a Cast" in n and "folded" in n for n in report.target_notes)
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"] and "Reshape requires the input new shape to be Shape" in as_is["error"]
    got = run_in("tvm", "0.27", converted, feeds)
    assert got["ok"]
    for a, b in zip(got["values"], _ort_all(model, feeds), strict=True):
        np.testing.assert_array_equal(a, b)
