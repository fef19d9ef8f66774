"""The lowering reached from the API (``rewriter.lower_ops``, ``LowerOpsPass``), the command line
(``convert --lower-ops``) and ``convert --target`` for a runtime that lacks the ops: the same model
each way, computing what ONNX Runtime's ai.onnx.ml kernels compute (the oracle)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.cli.main import main
from rewriter.convert import convert_for
from rewriter.targets import parse_target

X = np.array([[1.0, -2.0, 3.5], [0.25, 4.0, -1.0]], np.float32)


def _scaler_model(opset: int = 17) -> onnx.ModelProto:
    node = helper.make_node("Scaler", ["x"], ["y"], name="scale", domain="ai.onnx.ml",
                            offset=[0.5, -1.0, 2.0], scale=[2.0, 0.25, -3.0])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", 1)],
                             ir_version=8)


def _run(model: onnx.ModelProto) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]


def _domains(model) -> set[str]:
    return {n.domain for n in model.graph.node}


def test_api_pass_and_cli_lower_the_same_way(tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(_scaler_model(), path)
    api = rewriter.lower_ops(path, "ai.onnx.ml")
    assert _domains(api) == {""} and all(o.domain != "ai.onnx.ml" for o in api.opset_import)
    np.testing.assert_array_equal(_run(api), _run(_scaler_model()))  # bit for bit: the kernel's order
    out = str(tmp_path / "out.onnx")
    assert main(["convert", path, "--lower-ops", "ai.onnx.ml", "-o", out, "-q", "--no-verify"]) == 0
    assert onnx.load(out).graph.SerializeToString() == api.graph.SerializeToString()
    passed = rewriter.LowerOpsPass("all")(ir.load(path))
    assert passed.modified and set(passed.model.opset_imports) == {""}
    np.testing.assert_array_equal(_run(ir.to_proto(passed.model)), _run(_scaler_model()))


def test_a_runtime_without_the_ml_domain_gets_it_lowered_and_onnxruntime_keeps_it():
    model = _scaler_model()
    for_trt, report = convert_for(model, runtime="tensorrt==10.16")
    assert _domains(for_trt) == {""}
    assert any("lowered to standard ONNX for tensorrt 10.16" in n and "Scaler x1" in n for n in report.target_notes)
    np.testing.assert_array_equal(_run(for_trt), _run(model))
    for_ort, _ = convert_for(model, runtime="onnxruntime==1.17")
    assert "ai.onnx.ml" in _domains(for_ort)


def test_a_profile_lowers_what_it_does_not_name(tmp_path):
    without = tmp_path / "plain.json"
    without.write_text(json.dumps({"name": "npu", "opsets": {"": 17}}))
    with_ml = tmp_path / "ml.json"
    with_ml.write_text(json.dumps({"name": "npu-ml", "opsets": {"": 17, "ai.onnx.ml": 3}}))
    assert _domains(convert_for(_scaler_model(), runtime=str(without))[0]) == {""}
    assert "ai.onnx.ml" in _domains(convert_for(_scaler_model(), runtime=str(with_ml))[0])
    assert parse_target(str(with_ml)).runtime is None


def test_lower_ops_alone_is_a_valid_convert_and_a_bad_name_is_exit_2(tmp_path, capsys):
    path = str(tmp_path / "m.onnx")
    onnx.save(_scaler_model(), path)
    assert main(["convert", path, "--lower-ops", "Scalr", "-o", str(tmp_path / "o.onnx")]) == 2
    assert "Scalr" in capsys.readouterr().err and not (tmp_path / "o.onnx").exists()
    assert main(["convert", path, "-o", str(tmp_path / "o.onnx")]) == 2
    assert "--lower-ops OPS" in capsys.readouterr().err


def test_a_node_that_cannot_be_lowered_fails_the_cli_naming_it(tmp_path, capsys):
    node = helper.make_node("ZipMap", ["x"], ["y"], name="zm", domain="ai.onnx.ml",
                            classlabels_int64s=[0, 1])  # (3 columns: onnxruntime refuses it, the lowering too)
    seq_map = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64,
                                                                        helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_value_info("y", seq_map)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)],
                              ir_version=8)
    path = str(tmp_path / "z.onnx")
    onnx.save(model, path)
    assert main(["convert", path, "--lower-ops", "all", "-o", str(tmp_path / "o.onnx")]) == 2
    assert "'zm'" in capsys.readouterr().err and not (tmp_path / "o.onnx").exists()
    with pytest.raises(rewriter.RewriterError, match="'zm'"):
        rewriter.lower_ops(model)


def _quick_gelu_model() -> onnx.ModelProto:
    node = helper.make_node("QuickGelu", ["x"], ["y"], name="qg", domain="com.microsoft", alpha=1.702)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=8)


def test_onnxruntime_keeps_its_contrib_ops_and_tensorrt_gets_them_lowered():
    model = _quick_gelu_model()
    for_ort, _ = convert_for(model, runtime="onnxruntime==1.17")
    assert _domains(for_ort) == {"com.microsoft"}
    for_trt, _ = convert_for(model, runtime="tensorrt==10.16")
    assert _domains(for_trt) == {""}
    np.testing.assert_allclose(_run(for_trt), _run(model), rtol=1e-6, atol=1e-7)


def test_a_version_the_runtime_lacks_is_converted_not_lowered():
    """ONNX Runtime 1.20 takes ai.onnx.ml 5 without a TreeEnsemble-5 kernel, but has the
    TreeEnsembleRegressor of ai.onnx.ml 4: a profile saying the same converts, never lowers."""
    from tests.convert.test_runtime_targets import _tree_ensemble_5

    result, _ = convert_for(_tree_ensemble_5(), runtime="onnxruntime==1.20")
    assert [n.op_type for n in result.graph.node] == ["TreeEnsembleRegressor"]


def test_only_the_ops_asked_are_lowered():
    model = _scaler_model()
    node = helper.make_node("Binarizer", ["y"], ["z"], name="bin", domain="ai.onnx.ml", threshold=0.5)
    model.graph.node.append(node)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3]))
    result = rewriter.lower_ops(model, "ai.onnx.ml::Binarizer")
    assert sorted((n.domain, n.op_type) for n in result.graph.node if n.domain) == [("ai.onnx.ml", "Scaler")]


def test_lower_ops_verify_compares_with_the_original(tmp_path, monkeypatch):
    """--verify runs the original (with its ai.onnx.ml node) against the result, not the lowered input."""
    import rewriter.cli.commands as commands

    seen = []
    real = commands.verify_rewrite
    monkeypatch.setattr(commands, "verify_rewrite", lambda a, b, args: seen.append(_domains(a)) or real(a, b, args))
    path = str(tmp_path / "m.onnx")
    onnx.save(_scaler_model(), path)
    assert main(["convert", path, "--lower-ops", "all", "-o", str(tmp_path / "o.onnx"), "-q", "--verify",
                 "--input-value", "x:" + ",".join(str(v) for v in X.ravel())]) == 0
    assert seen == [{"ai.onnx.ml"}]


def test_an_op_the_runtime_has_at_another_version_is_not_lowered(tmp_path):
    """A profile implementing LabelEncoder-2 only (of versions 1, 2, 4): a LabelEncoder-2 model keeps
    its node, as the runtime has it, though the runtime lacks the op's other versions."""
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"name": "npu", "opsets": {"": 17, "ai.onnx.ml": 4},
                                   "ops": {"ai.onnx.ml": {"LabelEncoder": [[2, 2]]}}}))
    node = helper.make_node("LabelEncoder", ["x"], ["y"], name="le", domain="ai.onnx.ml",
                            keys_int64s=[1, 2, 3], values_int64s=[10, 20, 30], default_int64=-1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)],
                              ir_version=8)
    result, _ = convert_for(model, runtime=str(profile))
    assert [(n.domain, n.op_type) for n in result.graph.node] == [("ai.onnx.ml", "LabelEncoder")]


def test_onnxruntimes_contrib_ops_in_the_onnx_domain_are_lowered_for_another_runtime():
    """SimplifiedLayerNormalization written in the ONNX domain (as ONNX Runtime's optimizer writes it):
    a runtime without com.microsoft gets it lowered."""
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y"], name="sln", axis=-1, epsilon=1e-5)
    scale = onnx.numpy_helper.from_array(np.array([1.0, 0.5, 2.0], np.float32), "scale")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    for_trt, _ = convert_for(model, runtime="tensorrt==10.16")
    assert "SimplifiedLayerNormalization" not in {n.op_type for n in for_trt.graph.node}
    np.testing.assert_allclose(_run(for_trt), _run(model), rtol=1e-5, atol=1e-6)
