"""A model importing only ai.onnx.ml (onnxmltools' convert_xgboost writes such) given a default-domain
opset: the file a runtime of that opset loads. The ai.onnx.ml opset is kept, or lowered to the one
that came with the opset (onnx.helper.VERSION_TABLE), the IR version capped at that opset's, and no
default-domain import is added; compared with ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model
from rewriter.convert.ml_opsets import ML_DOMAIN as ML
from rewriter.convert.ml_opsets import paired_with

FEEDS = {"x": np.array([[0.1], [0.25], [0.3], [-5.0]], dtype=np.float32)}


def _trees(ml_opset, ir_version=8, as_tensor=False):
    """One TreeEnsembleRegressor, the model's only opset import ai.onnx.ml ``ml_opset``."""
    kw = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
              nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
              target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0],
              n_targets=1)
    if as_tensor:
        kw["nodes_values_as_tensor"] = helper.make_tensor("t", TensorProto.FLOAT, [3], [0.25, 0.0, 0.0])
    else:
        kw["nodes_values"] = [0.25, 0.0, 0.0]
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, name="trees", **kw)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(ML, ml_opset)], ir_version=ir_version)


def _run(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, FEEDS)


@pytest.mark.parametrize("opset, ml_opset", [(11, 2), (13, 2), (9, 1), (16, 3), (21, 5)])
def test_the_pairing_is_the_version_table_s(opset, ml_opset):
    assert paired_with(opset).ml_opset == ml_opset
    row = next(r for r in onnx.helper.VERSION_TABLE if r[2] == opset)
    assert paired_with(opset).ir_version == row[1]


def test_an_ml_1_model_keeps_its_ml_opset_and_gets_the_ir_of_the_opset():
    model = _trees(1, ir_version=8)
    result, report = convert_model(model, 11)
    assert [(o.domain, o.version) for o in result.opset_import] == [(ML, 1)]  # no default domain added
    assert result.ir_version <= 6  # opset 11 came with IR 6 (onnx 1.6)
    assert any("ai.onnx.ml 1 kept" in n and "opset 11" in n for n in report.notes)
    np.testing.assert_array_equal(_run(result)[0], _run(model)[0])


def test_an_ml_3_model_is_lowered_to_the_ml_opset_that_came_with_the_opset():
    model = _trees(3, as_tensor=True)
    result, report = convert_model(model, 11)
    assert [(o.domain, o.version) for o in result.opset_import] == [(ML, 2)]
    assert report.target_ml_opset == 2 and any("ai.onnx.ml 3 lowered to 2" in n for n in report.notes)
    attrs = {a.name for a in result.graph.node[0].attribute}
    assert "nodes_values_as_tensor" not in attrs and "nodes_values" in attrs  # TreeEnsembleRegressor-1
    np.testing.assert_array_equal(_run(result)[0], _run(model)[0])


def test_a_newer_opset_keeps_the_ml_opset_and_the_ir_version():
    model = _trees(1, ir_version=8)
    result, _ = convert_model(model, 21)
    assert [(o.domain, o.version) for o in result.opset_import] == [(ML, 1)] and result.ir_version == 8


def test_an_ml_opset_given_too_is_the_one_reached():
    result, report = convert_model(_trees(3, as_tensor=True), 11, ml_opset=3)
    assert [(o.domain, o.version) for o in result.opset_import] == [(ML, 3)] and not report.notes


def test_the_cli_writes_it_exits_0_and_says_what_was_done(tmp_path, capsys):
    from rewriter import cli

    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(_trees(3, as_tensor=True), path)
    assert cli.main(["convert", path, "--opset", "11", "-o", out]) == 0
    text = capsys.readouterr().out
    first = text.splitlines()[0]
    assert "ai.onnx.ml 3 -> 2 for opset 11" in first and "nothing to convert" not in first
    assert "the model imports only ai.onnx.ml" in text and "no default-domain import added" in text
    written = onnx.load(out)
    assert [(o.domain, o.version) for o in written.opset_import] == [(ML, 2)]
    np.testing.assert_array_equal(_run(written)[0], _run(_trees(3, as_tensor=True))[0])
