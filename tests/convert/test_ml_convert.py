"""ai.onnx.ml: every schema step of the domain classified, each one taken both ways on small
models, compared with ONNX Runtime (which implements ai.onnx.ml 1..5)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model
from rewriter.convert.ml_opsets import ML_DOMAIN, ML_STEPS
from rewriter.errors import ConversionError

ML = ML_DOMAIN


def test_every_step_of_the_domain_in_onnx_defs_is_classified():
    versions: dict[str, set[int]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == ML:
            versions.setdefault(s.name, set()).add(s.since_version)
    steps = set()
    for op, vs in versions.items():
        vs = sorted(vs)
        for a, b in zip(vs, vs[1:]):
            steps |= {(op, a, b), (op, b, a)}
    assert steps - {k for k in ML_STEPS if k[0] != "TreeEnsemble"} == set()
    assert set(ML_STEPS) - steps == set()


def _model(node, inputs, outputs, ml, opset=15):
    return helper.make_model(helper.make_graph([node], "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(ML, ml)])


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _string_to_int(ml=1):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, name="enc",
                            classes_strings=["a", "b", "c"], default_int64=-7)
    return _model(node, [helper.make_tensor_value_info("x", TensorProto.STRING, [5])],
                  [helper.make_tensor_value_info("y", TensorProto.INT64, [5])], ml)


def _int_to_string(ml=1):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, name="enc",
                            classes_strings=["a", "b", "c"], default_string="none")
    return _model(node, [helper.make_tensor_value_info("x", TensorProto.INT64, [5])],
                  [helper.make_tensor_value_info("y", TensorProto.STRING, [5])], ml)


STRINGS = {"x": np.array(["b", "zz", "a", "c", "a"], dtype=object)}
INDICES = {"x": np.array([2, 0, 5, -1, 1], dtype=np.int64)}


@pytest.mark.parametrize("make, feeds", [(_string_to_int, STRINGS), (_int_to_string, INDICES)])
@pytest.mark.parametrize("up", [2, 3, 4])
def test_label_encoder_1_up_and_back_computes_the_same(make, feeds, up):
    model = make()
    result, report = convert_model(model, None, ml_opset=up)
    assert [o.version for o in result.opset_import if o.domain == ML] == [up]
    assert "LabelEncoder 1 -> 2" in report.changes
    np.testing.assert_array_equal(_run(result, feeds)[0], _run(model, feeds)[0])
    back, _ = convert_model(result, None, ml_opset=1)
    assert {a.name for a in back.graph.node[0].attribute} <= {"classes_strings", "default_int64", "default_string"}
    np.testing.assert_array_equal(_run(back, feeds)[0], _run(model, feeds)[0])


def test_label_encoder_2_that_is_no_index_mapping_does_not_go_to_1():
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, name="enc",
                            keys_strings=["a", "b"], values_int64s=[5, 9])
    model = _model(node, [helper.make_tensor_value_info("x", TensorProto.STRING, [5])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, [5])], 2)
    with pytest.raises(ConversionError, match="node 'enc'.*LabelEncoder 2 -> 1.*not 0, 1, 2"):
        convert_model(model, None, ml_opset=1)


def _tensor_encoder(key_type, keys, value_type, values, default):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, name="enc",
                            keys_tensor=helper.make_tensor("k", key_type, [len(keys)], keys),
                            values_tensor=helper.make_tensor("v", value_type, [len(values)], values),
                            default_tensor=helper.make_tensor("d", value_type, [1], [default]))
    return _model(node, [helper.make_tensor_value_info("x", key_type, [4])],
                  [helper.make_tensor_value_info("y", value_type, [4])], 4)


def test_label_encoder_4_tensors_become_lists_at_2():
    model = _tensor_encoder(TensorProto.INT64, [3, 1, 4], TensorProto.FLOAT, [0.5, -1.25, 8.0], 9.5)
    result, _ = convert_model(model, None, ml_opset=2)
    names = {a.name for a in result.graph.node[0].attribute}
    assert names == {"keys_int64s", "values_floats", "default_float"}
    feeds = {"x": np.array([4, 2, 1, 3], dtype=np.int64)}
    np.testing.assert_array_equal(_run(result, feeds)[0], _run(model, feeds)[0])


def test_label_encoder_4_with_a_type_2_lacks_is_refused():
    model = _tensor_encoder(TensorProto.INT32, [3, 1], TensorProto.INT64, [7, 8], -1)
    with pytest.raises(ConversionError, match="keys_tensor is int32"):
        convert_model(model, None, ml_opset=3)


def _regressor(values_as_tensor, elem=TensorProto.DOUBLE):
    kw = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
              nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
              target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0],
              n_targets=1)
    kw["nodes_values_as_tensor"] = helper.make_tensor("t", elem, [3], values_as_tensor)
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, name="trees", **kw)
    return _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])], 3)


def test_tree_ensemble_doubles_float32_holds_go_to_1():
    model = _regressor([0.25, 0.0, 0.0], TensorProto.FLOAT)  # ONNX Runtime reads the tensor as the input's type
    result, _ = convert_model(model, None, ml_opset=1)
    attrs = {a.name: helper.get_attribute_value(a) for a in result.graph.node[0].attribute}
    assert "nodes_values_as_tensor" not in attrs and attrs["nodes_values"] == [0.25, 0.0, 0.0]
    feeds = {"x": np.array([[0.1], [0.25], [0.3], [-5.0]], dtype=np.float32)}
    np.testing.assert_array_equal(_run(result, feeds)[0], _run(model, feeds)[0])


def test_tree_ensemble_doubles_float32_cannot_hold_stay_at_3():
    with pytest.raises(ConversionError, match=r"nodes_values_as_tensor holds 1 value\(s\) float32 cannot hold"):
        convert_model(_regressor([0.1, 0.0, 0.0]), None, ml_opset=1)


def test_a_model_importing_only_ai_onnx_ml_converts():
    node = helper.make_node("Normalizer", ["x"], ["y"], domain=ML, norm="L2")
    model = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]),
                              opset_imports=[helper.make_opsetid(ML, 3)], ir_version=8)
    result, _ = convert_model(model, None, ml_opset=1)
    assert [(o.domain, o.version) for o in result.opset_import] == [(ML, 1)]
    assert result.ir_version == 3  # ai.onnx.ml 1 came with IR 3
    x = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    np.testing.assert_allclose(_run(result, x)[0], _run(model, x)[0])


def test_a_cast_behind_an_ml_op_goes_down_with_the_type_its_schema_gives():
    # SVMClassifier's scores are tensor(float) by its schema; ONNX's inference leaves them untyped
    svm = helper.make_node("SVMClassifier", ["x"], ["label", "scores"], domain=ML, name="svm",
                           classlabels_ints=[0, 1], coefficients=[1.0, -1.0], kernel_type="LINEAR",
                           kernel_params=[0.0, 0.0, 0.0], rho=[0.1], support_vectors=[1.0, 2.0, -1.0, 0.5],
                           vectors_per_class=[1, 1])
    cast = helper.make_node("Cast", ["scores"], ["y"], to=TensorProto.DOUBLE, name="cast")
    graph = helper.make_graph([svm, cast], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [3]),
                               helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3, "c"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(ML, 1)])
    result, _ = convert_model(model, 7)
    assert result.opset_import[0].version == 7
    x = {"x": np.array([[1.0, 2.0], [-0.5, 0.25], [3.0, -1.0]], np.float32)}
    for a, b in zip(_run(result, x), _run(model, x)):
        np.testing.assert_array_equal(a, b)


def test_a_regressor_goes_to_tree_ensemble_at_5_and_back_computing_the_same():
    model = _regressor([0.25, 0.0, 0.0], TensorProto.FLOAT)
    up, report = convert_model(model, None, ml_opset=5)
    assert [n.op_type for n in up.graph.node] == ["TreeEnsemble"] and report.changes["TreeEnsembleRegressor -> TreeEnsemble"]
    feeds = {"x": np.array([[0.1], [0.25], [0.3], [np.nan]], dtype=np.float32)}
    np.testing.assert_array_equal(_run(up, feeds)[0], _run(model, feeds)[0])
    down, _ = convert_model(up, None, ml_opset=3)
    assert [n.op_type for n in down.graph.node] == ["TreeEnsembleRegressor"]
    np.testing.assert_array_equal(_run(down, feeds)[0], _run(model, feeds)[0])


def test_a_classifier_cannot_go_to_5_and_says_so():
    kw = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
              nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.5, 0.0, 0.0], nodes_truenodeids=[1, 0, 0],
              nodes_falsenodeids=[2, 0, 0], class_treeids=[0, 0], class_nodeids=[1, 2], class_ids=[0, 1],
              class_weights=[1.0, 1.0], classlabels_int64s=[0, 1])
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "probs"], domain=ML, name="clf", **kw)
    model = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1])],
                   [helper.make_tensor_value_info("label", TensorProto.INT64, [4]),
                    helper.make_tensor_value_info("probs", TensorProto.FLOAT, [4, 2])], 3)
    with pytest.raises(ConversionError, match=r"node 'clf'.*deprecated at ML opset 5.*would work for ML opsets <= 4"):
        convert_model(model, None, ml_opset=5)


def test_the_cli_table_shows_the_ml_opset_change(tmp_path, capsys):
    from rewriter import cli

    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(_string_to_int(), path)
    assert cli.main(["convert", path, "--ml-opset", "2", "-o", out]) == 0
    text = capsys.readouterr().out
    assert "ai.onnx.ml 1 -> 2" in text.splitlines()[0]
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("ai.onnx.ml opset"))
    assert row.split()[-3:] == ["1", "2", "*"]
