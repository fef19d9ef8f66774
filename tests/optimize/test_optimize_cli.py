"""`rewriter optimize`: flags, the summary table, --json, --verify."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter import cli
from tests.optimize.test_optimize_model import legacy_flatten


def _save(tmp_path, model, name="in.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def test_summary_table_and_json(tmp_path, capsys):
    src, out = _save(tmp_path, legacy_flatten()), str(tmp_path / "out.onnx")
    assert cli.main(["optimize", src, "-o", out]) == 0
    text = capsys.readouterr().out
    assert "10 -> 3 nodes" in text and "Constant" in text and "(nodes)" in text and "size" in text
    assert cli.main(["optimize", src, "-o", out, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["before"]["node_count"] == 10 and doc["after"]["node_count"] == 3
    assert doc["changes"]["folded"]["Gather"] == 1 and doc["changes"]["skipped_for_size"] == 0
    assert doc["after"]["size_bytes"] == os.path.getsize(out)


def test_verify_runs_both_models(tmp_path, capsys):
    src, out = _save(tmp_path, legacy_flatten()), str(tmp_path / "out.onnx")
    assert cli.main(["optimize", src, "-o", out, "--verify"]) == 0
    assert "max abs diff" in capsys.readouterr().out


def test_custom_ops_flag_and_strip_metadata(tmp_path, capsys):
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["": 13, "custom": 1]>
        g (float[2] x) => (float[2] y) { d = custom.Log(x)  y = Relu(x) }""")
    model.graph.node[1].doc_string = "relu doc"
    src, out = _save(tmp_path, model), str(tmp_path / "out.onnx")
    assert cli.main(["optimize", src, "-o", out]) == 0
    kept = onnx.load(out)
    assert [n.op_type for n in kept.graph.node] == ["Log", "Relu"] and kept.graph.node[1].doc_string
    assert cli.main(["optimize", src, "-o", out, "--allow-removing-custom-ops", "--strip-metadata"]) == 0
    stripped = onnx.load(out)
    assert [n.op_type for n in stripped.graph.node] == ["Relu"] and not stripped.graph.node[0].doc_string


def test_fold_limit_reports_skips(tmp_path, capsys):
    k = nh.from_array(np.ones((64, 64), np.float32), "k")
    graph = h.make_graph([h.make_node("Exp", ["k"], ["e"]), h.make_node("Add", ["x", "e"], ["a"]),
                          h.make_node("Add", ["a", "k"], ["y"])], "g",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [64, 64])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [64, 64])], [k])
    src = _save(tmp_path, h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]))
    out = str(tmp_path / "out.onnx")
    assert cli.main(["optimize", src, "-o", out, "--fold-limit", "1000"]) == 0
    assert "folds skipped for size (--fold-limit): 1" in capsys.readouterr().out
    assert "Exp" in [n.op_type for n in onnx.load(out).graph.node]
    assert cli.main(["optimize", src, "-o", out, "--fold-limit", "lots"]) == 2
    assert "--fold-limit" in capsys.readouterr().err
