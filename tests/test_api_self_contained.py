"""What the public API returns is a plain model: ``onnx.save``, ``SerializeToString`` and ONNX
Runtime take it as it is, from any directory, and no private key of the package leaves it.

Every public function that returns a model is called on a path (a big inline weight, external
data, external data in a folder of its own), on an ``onnx_ir.Model`` and through its pass; the
result is saved with plain ``onnx.save`` (or ``onnx_ir.save``) somewhere else and run there.

Oracles: ONNX Runtime's run of the source file (exact for the float32 rewrites, relative L2 within
half precision's 1e-2 for ``convert_precision``), the serialized bytes (no ``__rewriter`` key).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter

ROWS, COLS = 512, 640  # 1.25 MiB of float32: above the loader's 1 MiB inline threshold
X = np.random.default_rng(1).standard_normal((2, ROWS)).astype(np.float32)


def _model() -> onnx.ModelProto:
    """MatMul by a big weight, a ReduceProd of a small constant (folded by fold/optimize), Relu."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((ROWS, COLS)) / 16).astype(np.float32), "w")
    s = numpy_helper.from_array(np.array([[1.5, 2.0], [0.5, 1.0]], np.float32), "s")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("ReduceProd", ["s"], ["p"], name="prod", keepdims=0),
             helper.make_node("Mul", ["m", "p"], ["mp"], name="scale"),
             helper.make_node("Relu", ["mp"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, ROWS])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, COLS])], [w, s])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _write(kind: str, d) -> str:
    model = _model()
    if kind == "inline":
        path = os.path.join(d, "inline.onnx")
        onnx.save(model, path)
        assert os.path.getsize(path) > 1 << 20
    elif kind == "external":
        path = os.path.join(d, "ext.onnx")
        onnx.save(model, path, save_as_external_data=True, location="ext.bin", size_threshold=0)
    else:  # the data in a folder below the model's
        os.makedirs(os.path.join(d, "weights"))
        path = os.path.join(d, "nested.onnx")
        onnx.save(model, path, save_as_external_data=True, location="weights/all.bin", size_threshold=1024)
    return path


def _reference(path: str) -> np.ndarray:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]


def _check_close(got: np.ndarray, want: np.ndarray, half: bool) -> None:
    assert got.shape == want.shape and got.dtype == np.float32
    if half:
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        assert err < 1e-2, err
    else:
        np.testing.assert_array_equal(got, want)


ENTRY_POINTS = {
    "convert_opset": (lambda m: rewriter.convert_opset(m, 18), False),
    "convert_opset_down": (lambda m: rewriter.convert_opset(m, 11), False),
    "convert_opset_target": (lambda m: rewriter.convert_opset(m, target="onnxruntime==1.15"), False),
    "convert_precision": (lambda m: rewriter.convert_precision(m, "float16"), True),
    "convert_precision_bf16": (lambda m: rewriter.convert_precision(m, "bfloat16", target="onnxruntime==1.20"), True),
    "optimize_model": (lambda m: rewriter.optimize_model(m), False),
    "fold_reduce_prod": (lambda m: rewriter.fold_reduce_prod(m), False),
    "fold_constants": (lambda m: rewriter.fold_constants(m), False),
}


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory and an output folder that are not the source's."""
    src, out, cwd = (tmp_path / n for n in ("src", "out", "cwd"))
    for d in (src, out, cwd):
        d.mkdir()
    monkeypatch.chdir(cwd)
    return src, out


@pytest.mark.parametrize("kind", ["inline", "external", "nested"])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_path_result_saved_by_plain_onnx_runs_in_onnxruntime(kind, entry, elsewhere):
    src, out = elsewhere
    path = _write(kind, str(src))
    want = _reference(path)
    call, half = ENTRY_POINTS[entry]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = call(path)
    assert isinstance(result, onnx.ModelProto)
    data = result.SerializeToString()
    assert b"__rewriter" not in data
    assert all(t.data_location != TensorProto.EXTERNAL for t in result.graph.initializer)
    saved = str(out / "result.onnx")
    onnx.save(result, saved)
    assert os.path.getsize(saved) > ROWS * COLS * (2 if half else 4)
    onnx.checker.check_model(saved, full_check=True)
    for model in (saved, data):  # from its file, and from bytes
        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        _check_close(session.run(None, {"x": X})[0], want, half)


@pytest.mark.parametrize("kind", ["external", "nested"])
@pytest.mark.parametrize("entry", ["convert_opset", "convert_precision", "optimize_model", "fold_reduce_prod"])
def test_an_onnx_ir_result_computes_what_the_source_does(kind, entry, elsewhere):
    """onnx_ir reads a reference's bytes as they lie: a half weight still pointing at its float32
    source would be read as garbage (NaN), so such tensors come back in memory."""
    src, out = elsewhere
    path = _write(kind, str(src))
    want = _reference(path)
    call, half = ENTRY_POINTS[entry]
    result = call(ir.load(path))
    assert isinstance(result, ir.Model)
    saved = str(out / "result.onnx")
    ir.save(result, saved, external_data="result.bin")
    assert b"__rewriter" not in open(saved, "rb").read()
    got = ort.InferenceSession(saved, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    _check_close(got, want, half)


@pytest.mark.parametrize("make", [lambda: rewriter.ConvertPrecisionPass("float16"),
                                  lambda: rewriter.ConvertOpsetPass(18),
                                  lambda: rewriter.FoldReduceProdPass()], ids=["precision", "opset", "fold"])
def test_a_pass_result_computes_what_the_source_does(make, elsewhere):
    src, out = elsewhere
    path = _write("external", str(src))
    want = _reference(path)
    result = make()(ir.load(path)).model
    saved = str(out / "result.onnx")
    ir.save(result, saved, external_data="result.bin")
    got = ort.InferenceSession(saved, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    _check_close(got, want, isinstance(make(), rewriter.ConvertPrecisionPass))


@pytest.mark.parametrize("entry", ["convert_opset", "convert_precision", "optimize_model"])
def test_a_proto_with_references_resolves_them_from_the_working_directory(entry, tmp_path, monkeypatch):
    """A ModelProto loaded without its data (``onnx.load(..., load_external_data=False)``): its
    references resolve from the working directory, as onnx's checker and ONNX Runtime resolve
    them, and the result holds the data (it is saved anywhere); the argument is not changed."""
    path = _write("external", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    proto = onnx.load(path, load_external_data=False)
    before = proto.SerializeToString()
    call, half = ENTRY_POINTS[entry]
    result = call(proto)
    assert proto.SerializeToString() == before
    assert all(t.data_location != TensorProto.EXTERNAL for t in result.graph.initializer)
    assert b"__rewriter" not in result.SerializeToString()
    monkeypatch.chdir("/")
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    _check_close(got, _reference(path), half)


def test_a_half_result_of_a_proto_with_references_is_in_memory(tmp_path, monkeypatch):
    """A weight the rewrite changed (to half) cannot stay the caller's float32 reference."""
    path = _write("external", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = rewriter.convert_precision(onnx.load(path, load_external_data=False), "float16")
    w = next(t for t in result.graph.initializer if t.name == "w")
    assert w.data_location != TensorProto.EXTERNAL and w.data_type == TensorProto.FLOAT16
    np.testing.assert_array_equal(numpy_helper.to_array(w).shape, (ROWS, COLS))
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    _check_close(got, _reference(path), True)
