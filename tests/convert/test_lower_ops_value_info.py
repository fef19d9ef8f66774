"""A value_info entry that its Constant's own value contradicts (onnxruntime-genai's builder declares
rank 0 for 1-D constants) is dropped before lowering: the lowered nodes read that constant, and strict
shape inference would otherwise fail on the wrong hint. Oracle: ONNX Runtime on the original."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.cli.main import main
from rewriter.convert.lower_ops import lower_ops

H = 8


def _model() -> onnx.ModelProto:
    bias = numpy_helper.from_array(np.linspace(-1, 1, H).astype(np.float32), "b")
    nodes = [helper.make_node("Relu", ["X"], ["X2"], name="r"),
             helper.make_node("Constant", [], ["bias"], name="c", value=bias),
             helper.make_node("BiasGelu", ["X2", "bias"], ["Y"], name="g", domain="com.microsoft")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", T.FLOAT, [2, H])],
                              [helper.make_tensor_value_info("Y", T.FLOAT, [2, H])],
                              value_info=[helper.make_tensor_value_info("bias", T.FLOAT, []),  # wrong: rank 0
                                          helper.make_tensor_value_info("X2", T.FLOAT, [2, H])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def _ort(model, x):
    data = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]


def test_the_contradicted_entry_alone_is_dropped_and_said():
    model = _model()
    lowered, report = lower_ops(model)
    assert [v.name for v in lowered.graph.value_info if v.name in ("bias", "X2")] == ["X2"]
    assert [v.name for v in model.graph.value_info] == ["bias", "X2"]  # the input is not changed
    assert any("dropped 1 value_info entry" in n for n in report.notes), report.notes
    onnx.checker.check_model(lowered, full_check=True)


def test_the_command_line_lowers_it_and_says_so(tmp_path, capsys):
    x = np.random.default_rng(0).normal(size=(2, H)).astype(np.float32)
    onnx.save(_model(), tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), "--lower-ops", "com.microsoft", "-o", str(tmp_path / "o.onnx")]) == 0
    assert "dropped 1 value_info entry" in capsys.readouterr().out
    np.testing.assert_allclose(_ort(str(tmp_path / "o.onnx"), x), _ort(_model(), x), rtol=1e-6, atol=1e-6)


def test_a_right_entry_is_kept():
    model = _model()
    model.graph.value_info[0].CopyFrom(helper.make_tensor_value_info("bias", T.FLOAT, [H]))
    lowered, report = lower_ops(model)
    assert "bias" in [v.name for v in lowered.graph.value_info]
    assert not any("value_info" in n for n in report.notes)
