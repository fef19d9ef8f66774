"""``check --target X`` for a runtime other than ONNX Runtime: every node X is not known to implement
is named (ops of domains X has no data for, ONNX Runtime's ONNX-domain contrib ops, ops X's data
says it lacks), with what ``convert --target X`` would do about it, planned before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.cli.main import main

H = 8


def _model(extra_op: str | None = None, opset: int = 18) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(size=H).astype(np.float32), n) for n in ("g", "b")]
    nodes = [helper.make_node("FastGelu", ["X", "b"], ["f"], name="gelu", domain="com.microsoft"),
             helper.make_node("SimplifiedLayerNormalization", ["f", "g"], ["Y"], name="rms", epsilon=1e-6)]
    if extra_op:
        nodes.append(helper.make_node(extra_op, ["Y"], ["Z"], name="odd", domain="com.microsoft"))
    out = "Z" if extra_op else "Y"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", T.FLOAT, [2, H])],
                              [helper.make_tensor_value_info(out, T.FLOAT, [2, H])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def _check(tmp_path, capsys, model, target, *extra):
    onnx.save(model, tmp_path / "m.onnx")
    code = main(["check", str(tmp_path / "m.onnx"), "--target", target, *extra])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("target", ["openvino==2026.4", "tract==0.23"])
def test_names_each_node_and_what_convert_would_do(tmp_path, capsys, target):
    code, out = _check(tmp_path, capsys, _model(), target)
    assert code == 1
    assert "com.microsoft:FastGelu, which it is not known to implement" in out and "node 'gelu' (FastGelu)" in out
    assert "SimplifiedLayerNormalization (ONNX Runtime's own op, written in the ONNX domain)" in out
    assert "node 'rms' (SimplifiedLayerNormalization)" in out
    assert out.count("[convert lowers it to standard ONNX]") == 2
    would = out.split(f"convert --target {target} would do:")[1]
    assert "FastGelu x1" in would and "SimplifiedLayerNormalization x1" in would


def test_an_op_without_lowering_is_said_to_be_refused(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _model("Unlowerable"), "openvino==2026.4")
    assert code == 1
    assert "com.microsoft:Unlowerable" in out and "[no lowering: convert refuses it]" in out
    would = out.split("convert --target openvino==2026.4 would not help:")[1]
    assert "refuses it" in would and "'odd'" in would


def test_json_carries_the_plan(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _model(), "tract==0.23", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["target"]["loads"] is False and len(doc["target"]["blockers"]) == 2
    assert doc["target"]["convert"]["ok"] is True


def test_onnx_runtime_runs_them_all(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _model(), "onnxruntime==1.20")
    assert code == 0 and "nothing stops it from loading the model as it is" in out
    assert "would" not in out


def test_a_runtime_opset_blocker_plans_the_opset_change(tmp_path, capsys):
    """No foreign op: a model at an opset above what the release takes (ONNX Runtime 1.15: 19)."""
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"], name="r")], "g", [helper.make_tensor_value_info("X", T.FLOAT, [2])],
        [helper.make_tensor_value_info("Y", T.FLOAT, [2])]), opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    code, out = _check(tmp_path, capsys, model, "onnxruntime==1.15")
    assert code == 1 and "opset 21 of ai.onnx" in out
    assert "would do:\n  opset 21 -> 19" in out


@pytest.mark.parametrize("target", ["openvino==2026.4", "tract==0.23", "tensorrt==10.0"])
def test_convert_refuses_what_it_cannot_lower_by_name_and_writes_nothing(tmp_path, capsys, target):
    onnx.save(_model("Unlowerable"), tmp_path / "m.onnx")
    code = main(["convert", str(tmp_path / "m.onnx"), "--target", target, "-o", str(tmp_path / "o.onnx")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "o.onnx").exists()
    assert "node 'odd' (Unlowerable)" in err and "com.microsoft:Unlowerable" in err
    assert "'gelu'" not in err and "'rms'" not in err  # lowered, not blocked


def test_onnx_runtime_keeps_what_it_runs(tmp_path, capsys):
    onnx.save(_model(), tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), "--target", "onnxruntime==1.20", "-o", str(tmp_path / "o.onnx"),
                 "-q"]) == 0
    assert [n.op_type for n in onnx.load(tmp_path / "o.onnx").graph.node] == ["FastGelu", "SimplifiedLayerNormalization"]


@pytest.mark.parametrize("target, said", [("openvino==2026.4", True), ("openvino==2024.6", True),
                                          ("tract==0.23", False), ("onnxruntime==1.20", False)])
def test_openvino_says_the_precision_hint_it_was_measured_with(tmp_path, capsys, target, said):
    """OpenVINO's CPU plugin infers float32 models in bfloat16 on a CPU with AMX unless compiled with
    INFERENCE_PRECISION_HINT=f32, the hint its data was measured with: check and convert say so."""
    plain = onnx.load(Path(__file__).resolve().parents[2] / "models" / "mixed_opset13.onnx")
    code, out = _check(tmp_path, capsys, plain, target)
    assert code == 0 and ("INFERENCE_PRECISION_HINT=f32" in out) == said, out
    code, out = _check(tmp_path, capsys, plain, target, "--json")
    assert json.loads(out)["target"]["run_notes"] == ([
        f"openvino {target.split('==')[1]} was measured with INFERENCE_PRECISION_HINT=f32: pass "
        "{'INFERENCE_PRECISION_HINT': 'f32'} to compile_model, as on a CPU with AMX or avx512_bf16 OpenVINO "
        "otherwise computes float32 models in bfloat16"] if said else [])
    assert main(["convert", str(tmp_path / "m.onnx"), "--target", target, "-o", str(tmp_path / "o.onnx")]) == 0
    assert ("INFERENCE_PRECISION_HINT=f32" in capsys.readouterr().out) == said


def _ml_model(op: str = "Normalizer", **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, ["X"], ["Y"], name="ml", domain="ai.onnx.ml", **(attrs or {"norm": "L1"}))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", T.FLOAT, [2, H])],
                              [helper.make_tensor_value_info("Y", T.FLOAT, [2, H])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)],
                             ir_version=8)


@pytest.mark.parametrize("target", ["openvino==2026.4", "openvino==2024.6", "tract==0.23", "tvm==0.27", "litert==2.6",
                                    "tensorrt==10.8"])
def test_an_ml_op_no_node_test_reached_is_named_for_a_release_without_the_domain(tmp_path, capsys, target):
    """No node test reaches Normalizer, and the measured releases load no ai.onnx.ml opset in
    their data (a Binarizer refused at every ML opset; OpenVINO runs the corpus's Normalizers as
    they are all the same, so for them check says "not known"), nor does TensorRT document one:
    check names the domain and the node, and convert's lowering."""
    code, out = _check(tmp_path, capsys, _ml_model(), target)
    assert code == 1, out
    if target.startswith("tensorrt"):
        assert "the ai.onnx.ml domain (it does not implement it)" in out
        assert "Normalizer-1 (ai.onnx.ml), which it does not implement: node 'ml' (Normalizer)" in out
    else:
        assert "the ai.onnx.ml domain (no ML opset in its data)" in out
        assert "Normalizer-1 (ai.onnx.ml), which it is not known to implement: node 'ml' (Normalizer)" in out


def test_onnx_runtime_runs_the_ml_op(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _ml_model(), "onnxruntime==1.20")
    assert code == 0 and "nothing stops it from loading the model as it is" in out


def test_a_profile_with_an_ml_opset_is_taken_at_its_word(tmp_path, capsys):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"name": "npu", "opsets": {"": 18, "ai.onnx.ml": 3}}))
    code, out = _check(tmp_path, capsys, _ml_model(), str(profile))
    assert code == 0 and "nothing stops it" in out
    profile.write_text(json.dumps({"name": "npu", "opsets": {"": 18}}))
    code, out = _check(tmp_path, capsys, _ml_model(), str(profile))
    assert code == 1 and "the ai.onnx.ml domain (no ML opset in its data)" in out


@pytest.mark.parametrize("target", ["litert==2.6", "openvino==2026.4", "tensorrt==10.8"])
def test_an_ml_opset_imported_and_unused_is_no_blocker(tmp_path, capsys, target):
    """tf2onnx and jax2tf import ai.onnx.ml without using it; the releases load such models."""
    graph = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"], name="r")], "g",
                              [helper.make_tensor_value_info("X", T.FLOAT, [2, H])],
                              [helper.make_tensor_value_info("Y", T.FLOAT, [2, H])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 2)],
                              ir_version=8)
    code, out = _check(tmp_path, capsys, model, target)
    assert "ai.onnx.ml domain" not in out
    assert code == 0, out


def _one(nodes, inputs, outputs, opset=17, inits=()) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi(n, t, s) for n, t, s in inputs], [vi(n, t, s) for n, t, s in outputs],
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _stft() -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array(4, np.int64), "step"), numpy_helper.from_array(np.hanning(8).astype(np.float32), "w")]
    return _one([helper.make_node("STFT", ["x", "step", "w"], ["y"], name="stft")], [("x", T.FLOAT, [1, "n", 1])],
                [("y", T.FLOAT, [1, None, 5, 2])], inits=inits)


def _quantize(after: str | None) -> onnx.ModelProto:
    nodes = [helper.make_node(after, ["x"], ["a"], name="act")] if after else []
    nodes.append(helper.make_node("DynamicQuantizeLinear", ["a" if after else "x"], ["q", "s", "z"], name="dql"))
    return _one(nodes, [("x", T.FLOAT, [2, H])], [("q", T.UINT8, [2, H]), ("s", T.FLOAT, []), ("z", T.UINT8, [])],
                opset=13)


def _quantize_linear() -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(3, np.uint8), "z")]
    return _one([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="ql")], [("x", T.FLOAT, [2, H])],
                [("q", T.UINT8, [2, H])], opset=13, inits=inits)


@pytest.mark.parametrize("case,target,said", [
    ("stft", "openvino==2026.4", "decomposed by convert: STFT x1"),
    ("dql after sigmoid", "tract==0.23", "named by convert: node 'dql' (DynamicQuantizeLinear)"),
    ("quantize linear", "openvino==2026.4", "form: 1 quantized node(s) written as integer arithmetic"),
    ("anonymous dim", "tract==0.23", "form: "),
])
def test_what_only_the_plan_shows_is_said(tmp_path, capsys, case, target, said):
    """Forms the op versions do not show (an op version run only with constant inputs, a measured
    quantized form, tract's unnamed input dims): check asks the plan, and says what it does."""
    model = {"stft": _stft, "dql after sigmoid": lambda: _quantize("Sigmoid"), "quantize linear": _quantize_linear,
             "anonymous dim": lambda: _one([helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [None, H])],
                                           [("y", T.FLOAT, [None, H])])}[case]()
    code, out = _check(tmp_path, capsys, model, target)
    assert code == 1, out
    listed = out.split("converts for it):")[1].split("convert --target")[0]
    assert said in listed, out
    assert "INFERENCE_PRECISION_HINT" not in listed  # (how to run it is a note, not a blocker)


@pytest.mark.parametrize("target", ["openvino==2026.4", "tract==0.23", "tensorrt==10.8", "litert==2.6"])
def test_a_model_the_plan_leaves_as_it_is_loads(tmp_path, capsys, target):
    model = _one([helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [2, H])], [("y", T.FLOAT, [2, H])])
    code, out = _check(tmp_path, capsys, model, target)
    assert code == 0 and "nothing stops it" in out, out


def test_a_quantize_of_an_exact_value_loads_for_tract(tmp_path, capsys):
    """tract computes DynamicQuantizeLinear as ONNX Runtime does (kept_if_exact_input): of a graph input it loads."""
    code, out = _check(tmp_path, capsys, _quantize(None), "tract==0.23")
    assert code == 0, out
