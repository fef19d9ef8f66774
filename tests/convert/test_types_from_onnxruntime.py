"""Values made by com.microsoft ops (QOperator quantization's QLinear*), which ONNX's inference
leaves untyped: their types come from ONNX Runtime's own inference when onnxruntime is installed
(said in the report and the plan), and the refusal says why when it is not."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model
from rewriter.errors import ConversionError
from tests.oracle import assert_same_outputs, assert_valid, run

MS = "com.microsoft"


def _qlinear_model(opset=13):
    """x -> QuantizeLinear -> QLinearAdd (com.microsoft) -> Flatten -> DequantizeLinear -> y,
    and the QLinearAdd result Cast to int32 -> z: Flatten and Cast read a value only ONNX Runtime
    can type, and their 13 -> 11 step is type-only (13 added bfloat16)."""
    inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]),
             helper.make_tensor("zp", TensorProto.UINT8, [], [128])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="quant"),
             helper.make_node("QLinearAdd", ["q", "s", "zp", "q", "s", "zp", "s", "zp"], ["added"], name="qadd",
                              domain=MS),
             helper.make_node("Flatten", ["added"], ["flat"], name="flatten", axis=1),
             helper.make_node("DequantizeLinear", ["flat", "s", "zp"], ["y"], name="dequant"),
             helper.make_node("Cast", ["added"], ["z"], name="cast", to=TensorProto.INT32)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6]),
                               helper.make_tensor_value_info("z", TensorProto.INT32, [2, 3, 2])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


X = {"x": np.linspace(-2, 2, 12, dtype=np.float32).reshape(2, 3, 2)}


def test_onnx_alone_cannot_type_the_values_behind_the_com_microsoft_op():
    inferred = onnx.shape_inference.infer_shapes(_qlinear_model())
    typed = {v.name for v in inferred.graph.value_info if v.type.tensor_type.elem_type}
    assert "added" not in typed


def test_flatten_and_cast_behind_a_qlinear_op_go_below_13_with_onnxruntime_types():
    m = _qlinear_model()
    result, report = convert_model(m, 11)
    assert_valid(result)
    assert result.opset_import[0].version == 11
    assert_same_outputs(run(m, X), run(result, X))
    assert report.type_only["Flatten"] == 1 and report.type_only["Cast"] == 1
    assert any("from onnxruntime's type inference" in n for n in report.notes)
    assert any("from onnxruntime's type inference" in line for line in report.summary_lines())


def test_the_plan_says_where_the_types_came_from():
    _, report = convert_model(_qlinear_model(), 11, plan_only=True)
    assert report.ok
    assert any("com.microsoft" in line and "onnxruntime" in line for line in report.plan_lines())


def test_without_onnxruntime_the_refusal_stays_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(ConversionError) as info:
        convert_model(_qlinear_model(), 11)
    text = str(info.value)
    for fragment in ("'flatten'", "'cast'", "type of input 'added' is unknown", "onnxruntime", "is not installed"):
        assert fragment in text, (fragment, text)


def test_a_model_without_com_microsoft_nodes_never_asks_onnxruntime(monkeypatch):
    from rewriter.convert import ort_types

    def asked(*_args, **_kwargs):
        raise AssertionError("onnxruntime was asked")

    monkeypatch.setattr(ort_types, "onnxruntime_types", asked)
    # a value of another custom domain, untyped, read by a Flatten going below 13
    nodes = [helper.make_node("Mine", ["x"], ["made"], domain="my.ops"),
             helper.make_node("Flatten", ["made"], ["flat"], name="flatten"),
             helper.make_node("Mine", ["flat"], ["y"], domain="my.ops")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("my.ops", 1)])
    with pytest.raises(ConversionError, match="type of input 'made' is unknown") as info:
        convert_model(m, 11)
    assert "onnxruntime" not in str(info.value)


def test_symbolic_shape_inference_answers_when_no_session_can_be_made(monkeypatch):
    from rewriter.convert import ort_types

    monkeypatch.setattr(ort_types, "_from_session", lambda *a: (None, "no session"))
    result, report = convert_model(_qlinear_model(), 11)
    assert_same_outputs(run(_qlinear_model(), X), run(result, X))
    assert any("symbolic shape inference" in n for n in report.notes)


def test_the_symbolic_fallback_leaves_no_file_in_the_working_directory(tmp_path, monkeypatch):
    from rewriter.convert import ort_types

    monkeypatch.chdir(tmp_path)
    m = _qlinear_model()
    # an op neither ONNX nor ONNX Runtime's symbolic inference knows: its inference is incomplete
    m.graph.node.insert(2, helper.make_node("Unknown", ["added"], ["other"], domain=MS))
    ort_types._from_symbolic(m, ["added", "other"])
    assert list(tmp_path.iterdir()) == []


def test_an_adapter_asking_a_type_behind_a_qlinear_op_gets_it():
    # DequantizeLinear 19 -> 13 checks that x is of a type 13 takes (19 added float8): x is the
    # QLinearAdd result, whose type only ONNX Runtime knows; the adapter asks, not the engine
    m = _qlinear_model(opset=19)
    del m.graph.node[2:]
    del m.graph.output[:]
    m.graph.node.append(helper.make_node("DequantizeLinear", ["added", "s", "zp"], ["y"], name="dequant"))
    m.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 2]))
    result, report = convert_model(m, 13)
    assert result.opset_import[0].version == 13
    assert_same_outputs(run(m, X), run(result, X))
    assert any("onnxruntime" in n for n in report.notes)


@pytest.mark.parametrize("external", [False, True])
def test_the_cli_asks_onnxruntime_about_a_model_whose_weights_it_left_on_disk(tmp_path, capsys, external):
    # a weight above the loader's inline threshold stays in the file (or in its external data)
    # until written: the session that types the values must read it from there
    from rewriter import cli

    m = _qlinear_model()
    big = np.random.default_rng(0).uniform(-1, 1, size=(4, 1 << 16)).astype(np.float32)
    m.graph.initializer.append(onnx.numpy_helper.from_array(big, "big"))
    m.graph.node.append(helper.make_node("ReduceMax", ["big"], ["big_max"], name="reduce_big", keepdims=0))
    m.graph.output.append(helper.make_tensor_value_info("big_max", TensorProto.FLOAT, []))
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(m, path, save_as_external_data=external, location="m.data", size_threshold=1024)
    assert cli.main(["convert", path, "--opset", "11", "-o", out, "--verify"]) == 0
    text = capsys.readouterr().out
    assert "made by com.microsoft ops" in text and "from onnxruntime's type inference" in text
