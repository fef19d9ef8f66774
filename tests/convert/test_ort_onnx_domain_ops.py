"""ONNX Runtime's contrib ops it registers in the ONNX domain itself (LayerNormalization-1 below
opset 17, SimplifiedLayerNormalization at every opset), as onnxruntime.transformers.optimizer and
onnxruntime-genai write them: onnx has no schema for them there, yet ONNX Runtime runs them, so every
command reads such a model, keeps the nodes where ONNX Runtime may run the result, lowers them for
another runtime, and refuses them by name where it cannot. Oracle: ONNX Runtime on the original."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.cli.main import main
from rewriter.convert import convert_model
from rewriter.convert.planner import ConversionBlocked
from rewriter.targets.spec import TargetSpec

H = 16
X = np.random.default_rng(3).normal(size=(2, 3, H)).astype(np.float32) * 2 + 1


def _model(opset: int) -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.normal(size=H).astype(np.float32), n) for n in ("g", "b", "g2")]
    nodes = [helper.make_node("LayerNormalization", ["X", "g", "b"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
             helper.make_node("Relu", ["ln"], ["r"], name="relu"),
             helper.make_node("SimplifiedLayerNormalization", ["r", "g2"], ["Y"], name="rms", axis=-1, epsilon=1e-6)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", T.FLOAT, [2, 3, H])],
                              [helper.make_tensor_value_info("Y", T.FLOAT, [2, 3, H])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model) -> np.ndarray:
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"X": X})[0]


def _ops(path) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in onnx.load(path).graph.node]


@pytest.mark.parametrize("source", [11, 13])
@pytest.mark.parametrize("args", [["--opset", "18"], ["--opset", "14"], ["--target", "onnxruntime==1.17"]])
def test_kept_where_onnx_runtime_runs_the_result(tmp_path, source, args):
    model = _model(source)
    expected = _ort(model)
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), *args, "-o", str(tmp_path / "out.onnx"), "-q"]) == 0
    assert _ops(tmp_path / "out.onnx") == [("", "LayerNormalization"), ("", "Relu"), ("", "SimplifiedLayerNormalization")]
    np.testing.assert_allclose(_ort(str(tmp_path / "out.onnx")), expected, rtol=1e-6, atol=1e-6)


def test_at_17_and_later_layer_normalization_is_the_standard_op(tmp_path):
    """LayerNormalization-1 kept at opset 18 is LayerNormalization-17: onnx's checker accepts it there."""
    onnx.save(_model(13), tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), "--opset", "18", "-o", str(tmp_path / "out.onnx"), "-q"]) == 0
    result = onnx.load(tmp_path / "out.onnx")
    result.graph.node.pop()  # the SimplifiedLayerNormalization, which onnx never has
    result.graph.node[-1].output[0] = "Y"
    onnx.checker.check_model(result, full_check=True)


@pytest.mark.parametrize("command", [["optimize"], ["check"], ["fold"]])
def test_every_command_reads_the_model(tmp_path, command):
    onnx.save(_model(13), tmp_path / "m.onnx")
    out = [] if command == ["check"] else ["-o", str(tmp_path / "out.onnx")]
    assert main([*command, str(tmp_path / "m.onnx"), *out, "-q"]) == 0
    if out:
        np.testing.assert_allclose(_ort(str(tmp_path / "out.onnx")), _ort(_model(13)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("args", [["--lower-ops", "com.microsoft"], ["--target", "openvino==2026.4"]])
def test_lowered_to_standard_onnx_for_another_runtime(tmp_path, args):
    onnx.save(_model(13), tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), *args, "-o", str(tmp_path / "out.onnx"), "-q"]) == 0
    kinds = {op for _, op in _ops(tmp_path / "out.onnx")}
    assert kinds and not kinds & {"LayerNormalization", "SimplifiedLayerNormalization"}, kinds
    onnx.checker.check_model(onnx.load(tmp_path / "out.onnx"), full_check=True)
    np.testing.assert_allclose(_ort(str(tmp_path / "out.onnx")), _ort(_model(13)), rtol=1e-5, atol=1e-5)


def test_a_runtime_without_them_refuses_them_by_name(tmp_path):
    """The engine alone (no lowering before it): a profile's runtime is not ONNX Runtime."""
    profile = {"name": "elsewhere", "opsets": {"": 18}, "ir_version": 9, "missing": {}}
    (tmp_path / "p.json").write_text(json.dumps(profile))
    with pytest.raises(ConversionBlocked) as e:
        convert_model(_model(13), TargetSpec.parse(18, target=str(tmp_path / "p.json")))
    text = str(e.value)
    assert "'rms' (SimplifiedLayerNormalization)" in text and "ONNX Runtime's own op" in text
    assert "'ln' (LayerNormalization)" in text


def test_an_unknown_op_in_the_onnx_domain_is_still_refused(tmp_path):
    model = _model(13)
    model.graph.node[1].op_type = "Relux"
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), "--opset", "18", "-o", str(tmp_path / "out.onnx"), "-q"]) == 2
    assert not (tmp_path / "out.onnx").exists()
