"""Graph outputs whose declared dims only the lowered model can be checked against
(rewriter.convert.declared_outputs): onnxmltools' LightGBM label declared [1] for any batch."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter import cli
from rewriter.convert.declared_outputs import correct_declared_outputs


def _tree_classifier(batch: int | str = 5) -> onnx.ModelProto:
    """As onnxmltools writes a LightGBM classifier: the label declared [1] whatever the batch."""
    tree = helper.make_node(
        "TreeEnsembleClassifier", ["X"], ["label_tensor", "probability_tensor"], domain="ai.onnx.ml",
        name="LgbmClassifier", classlabels_int64s=[0, 1], post_transform="LOGISTIC",
        nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
        nodes_values=[0.5, 0.0, 0.0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
        class_treeids=[0, 0], class_nodeids=[1, 2], class_ids=[0, 0], class_weights=[-1.0, 1.0])
    cast = helper.make_node("Cast", ["label_tensor"], ["label"], to=TensorProto.INT64, name="Cast")
    graph = helper.make_graph(
        [tree, cast], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, 2])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("probability_tensor", TensorProto.FLOAT, [batch, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)],
                             ir_version=8)


def _dims(value) -> list:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]


def _run(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})


def test_lowered_label_is_declared_as_computed_and_passes_the_full_check(caplog):
    model = _tree_classifier(5)
    x = np.array([[0.1, 0], [0.9, 0], [0.5, 1], [np.nan, 0], [2, 2]], np.float32)
    expected = _run(model, x)
    assert expected[0].shape == (5,)  # what ONNX Runtime returns, whatever the declaration says
    result = rewriter.convert_opset(model, target="openvino==2026.4")
    assert _dims(result.graph.output[0]) == [5]
    assert _dims(result.graph.output[1]) == [5, 2]  # a declaration inference agrees with: kept
    assert not any(n.domain == "ai.onnx.ml" for n in result.graph.node)
    onnx.checker.check_model(result, full_check=True)
    got = _run(result, x)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


def test_cli_with_input_shape_writes_it_and_says_so(tmp_path, capsys):
    src, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_tree_classifier("N"), src)
    assert cli.main(["convert", src, "--target", "openvino==2026.4", "--input-shape", "X:3,2", "-o", out]) == 0
    err = capsys.readouterr().err
    assert "graph output 'label' is declared [1] but the lowered model computes [3]" in err
    written = onnx.load(out)
    assert _dims(written.graph.output[0]) == [3]
    onnx.checker.check_model(written, full_check=True)
    # without static dims nothing conflicts: the declaration is left as the input has it
    assert cli.main(["convert", src, "--target", "openvino==2026.4", "-o", out]) == 0
    assert _dims(onnx.load(out).graph.output[0]) == [1]
    assert "is declared" not in capsys.readouterr().err


def test_lower_ops_corrects_it_too(tmp_path, capsys):
    """The correction belongs to the lowering: ``convert --lower-ops`` with static dims gets it as well."""
    src, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(_tree_classifier("N"), src)
    assert cli.main(["convert", src, "--lower-ops", "ai.onnx.ml", "--input-shape", "X:4,2", "-o", out]) == 0
    assert "graph output 'label' is declared [1] but the lowered model computes [4]" in capsys.readouterr().err
    written = onnx.load(out)
    assert _dims(written.graph.output[0]) == [4]
    onnx.checker.check_model(written, full_check=True)


def _identity(declared: list, source_op: str = "Identity", extra_bad: bool = False):
    nodes = [helper.make_node(source_op, ["X"], ["Y"], domain="custom" if source_op != "Identity" else "")]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, declared)]
    if extra_bad:  # a second output whose conflict no declaration explains: Z declared int
        nodes.append(helper.make_node("Identity", ["X"], ["Z"]))
        outputs.append(helper.make_tensor_value_info("Z", TensorProto.INT64, [4, 3]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 3])], outputs)
    opsets = [helper.make_opsetid("", 13)] + ([helper.make_opsetid("custom", 1)] if source_op != "Identity" else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def test_only_the_conflicting_dims_the_input_could_not_infer_change():
    source, result = _identity([4, 7], source_op="Opaque"), _identity([4, 7])
    lines = correct_declared_outputs(result, source)
    assert _dims(result.graph.output[0]) == [4, 3]
    assert lines == ["graph output 'Y' is declared [4, 7] but the lowered model computes [4, 3] (inference of the "
                     "input does not reach it, so its declaration was never checked): written as [4, 3]"]


@pytest.mark.parametrize("case", ["input_infers_it", "symbolic", "other_failure", "clean"])
def test_declarations_left_alone(case):
    source = _identity([4, 7]) if case == "input_infers_it" else _identity([4, 7], source_op="Opaque")
    declared = {"symbolic": ["n", 7], "clean": [4, 3]}.get(case, [4, 7])
    result = _identity(declared, extra_bad=case == "other_failure")
    if case == "other_failure":
        source = _identity([4, 7], source_op="Opaque", extra_bad=True)
    if case == "symbolic":  # a symbol against a value is no conflict; the static 7 is, and changes
        assert correct_declared_outputs(result, source)
        assert _dims(result.graph.output[0]) == ["n", 3]
        return
    before = result.SerializeToString()
    assert correct_declared_outputs(result, source) == []
    assert result.SerializeToString() == before
