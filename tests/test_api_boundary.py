"""The onnx_ir <-> ModelProto boundary of the public API and the passes: one way across each
way (``rewriter.io.base_dir.proto_of`` out, ``rewriter.optimize.bridge.to_ir`` back), and an
onnx_ir model's external data found from any working directory, before and after.

Oracles: ONNX Runtime runs the original file and the results; onnx.checker (full_check).
"""

from __future__ import annotations

import ast
import os
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter

ROOT = pathlib.Path(__file__).resolve().parents[1] / "rewriter"
FEEDS = {"x": np.linspace(1, 2, 256, dtype=np.float32)}


def _external_model(d) -> str:
    """ReduceProd of an external weight (folded away), and a second external weight that stays."""
    w = numpy_helper.from_array(np.linspace(0.9, 1.1, 4 * 256, dtype=np.float32).reshape(4, 256), "w")
    v = numpy_helper.from_array(np.linspace(0.5, 1.5, 256, dtype=np.float32), "v")
    graph = helper.make_graph([helper.make_node("ReduceProd", ["w"], ["p"], name="rp", axes=[0], keepdims=0),
                               helper.make_node("Mul", ["x", "p"], ["xp"], name="mul"),
                               helper.make_node("Mul", ["xp", "v"], ["y"], name="mul_v")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256])], [w, v])
    path = os.path.join(d, "ext.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path,
              save_as_external_data=True, location="ext.bin", size_threshold=0)
    return path


def _run(model, feeds=FEEDS):
    if isinstance(model, ir.Model):
        model = ir.to_proto(model)
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _inline(model: ir.Model) -> ir.Model:
    """The model with every external tensor read into memory (fails if one cannot be found)."""
    for value in model.graph.initializers.values():
        if isinstance(value.const_value, ir.ExternalTensor):
            value.const_value = ir.Tensor(value.const_value.numpy(), name=value.name)
    return model


@pytest.fixture
def external(tmp_path, monkeypatch):
    path = _external_model(str(tmp_path))
    monkeypatch.chdir("/")  # the data is found beside the model, not in the working directory
    return path


def _external_dirs(model: ir.Model) -> set[str]:
    return {os.path.realpath(v.const_value.base_dir) for v in model.graph.initializers.values()
            if isinstance(v.const_value, ir.ExternalTensor)}


def test_fold_pass_result_still_finds_the_external_data_it_did_not_fold(external):
    result = rewriter.FoldReduceProdPass()(ir.load(external))
    assert result.modified and "ReduceProd" not in {n.op_type for n in result.model.graph}
    assert _external_dirs(result.model) == {os.path.realpath(os.path.dirname(external))}
    np.testing.assert_allclose(_run(_inline(result.model)), _run(external), rtol=1e-5)


def test_convert_pass_checks_and_converts_a_model_with_external_data_from_any_directory(external):
    result = rewriter.ConvertOpsetPass(18)(ir.load(external))
    assert result.modified and result.model.opset_imports[""] == 18
    assert _external_dirs(result.model) == {os.path.realpath(os.path.dirname(external))}
    proto = ir.to_proto(_inline(result.model))
    onnx.checker.check_model(proto, full_check=True)
    np.testing.assert_allclose(_run(proto), _run(external), rtol=1e-6)


def test_verify_pass_reads_an_external_model_from_any_directory(external):
    assert not rewriter.VerifyReduceProdShapesPass()(ir.load(external)).modified


def test_the_fold_pass_base_dir_argument_is_used_when_the_model_does_not_say(tmp_path):
    path = _external_model(str(tmp_path))
    model = ir.load(path)
    for value in model.graph.initializers.values():  # as an in-memory model built elsewhere
        if isinstance(value.const_value, ir.ExternalTensor):
            value.const_value.base_dir = ""
    cwd = os.getcwd()
    os.chdir("/")
    try:
        result = rewriter.FoldReduceProdPass(base_dir=str(tmp_path))(model)
    finally:
        os.chdir(cwd)
    assert result.modified
    assert _external_dirs(result.model) == {os.path.realpath(tmp_path)}


def test_api_and_passes_give_the_same_model(external):
    by_api = rewriter.fold_reduce_prod(ir.load(external))
    by_pass = rewriter.FoldReduceProdPass()(ir.load(external)).model
    assert ir.to_proto(by_api).SerializeToString() == ir.to_proto(by_pass).SerializeToString()
    by_api = rewriter.convert_opset(ir.load(external), 18)
    by_pass = rewriter.ConvertOpsetPass(18)(ir.load(external)).model
    assert ir.to_proto(by_api).SerializeToString() == ir.to_proto(by_pass).SerializeToString()


_WHOLE_MODEL = {"to_proto", "from_proto", "serialize_model", "deserialize_model", "to_onnx_text"}
# the bridge (ModelProto <-> onnx_ir, both ways) and the one way an onnx_ir model reaches the proto side
_BOUNDARY = {"optimize/bridge.py", "io/base_dir.py"}


def _conversions(source: str) -> list[str]:
    """Calls that turn a whole model from one representation into the other, not through the bridge."""
    return [f"{node.lineno} {ast.unparse(node.func)}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _WHOLE_MODEL and "bridge" not in ast.unparse(node.func.value)]


def test_whole_models_cross_between_representations_only_at_the_boundary():
    offenders = [f"{path.relative_to(ROOT).as_posix()}:{found}" for path in ROOT.rglob("*.py")
                 if path.relative_to(ROOT).as_posix() not in _BOUNDARY for found in _conversions(path.read_text())]
    assert not offenders, offenders


def test_the_boundary_scan_would_find_a_conversion():
    assert _conversions("import onnx_ir as ir\ndef f(m):\n    return ir.serde.deserialize_model(m)\n") == \
        ["3 ir.serde.deserialize_model"]
    assert _conversions("from rewriter.optimize import bridge\nbridge.to_proto(m, c)\n") == []
