"""tools/fuzz_real.py: a short run over a tiny corpus ends with its summary, and its oracle sees mismatches."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tool():
    spec = importlib.util.spec_from_file_location("fuzz_real", os.path.join(ROOT, "tools", "fuzz_real.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _corpus(d: str) -> None:
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("ReduceSum", ["r"], ["y"], name="sum", keepdims=0)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [w],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "tiny.onnx"))
    np.savez(os.path.join(d, "tiny.npz"), x=np.arange(6, dtype=np.float32).reshape(2, 3))


def test_short_run_writes_its_summary(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _corpus(str(corpus))
    out = tmp_path / "fuzz.json"
    rc = _tool().main([str(corpus), "--seconds", "3", "--seed", "1", "--findings", str(tmp_path / "f"),
                       "--json", str(out)])
    doc = json.loads(out.read_text())
    assert rc == (1 if doc["findings"] else 0)
    assert doc["runs"] > 0 and sum(sum(v.values()) for v in doc["outcomes"].values()) == doc["runs"]
    assert "runs/min" in capsys.readouterr().out


def test_compare_sees_what_differs():
    compare = _tool().compare
    a = [np.array([1.0, 2.0, 3.0], np.float32)]
    assert compare(a, [a[0].astype(np.float16)], dtype=True) is None  # exact-type differences allowed
    assert compare(a, [a[0] * 1.05], dtype=True)  # 5 % off
    assert compare(a, [a[0] * (1 + 1e-3)], dtype=False)  # fine for float16, not for an opset change
    assert compare(a, [np.array([1.0, 2.0, np.inf], np.float32)], dtype=True)
    assert compare(a, [np.array([1.0, 2.0, np.nan], np.float32)], dtype=True)
    assert compare([np.array([1, 2])], [np.array([1, 3])], dtype=True)  # integers: equal or not
    assert compare(a, [a[0], a[0]], dtype=False)  # another number of outputs


def _run_with(monkeypatch, tmp_path, fake_main):
    from rewriter import cli

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _corpus(str(corpus))
    monkeypatch.setattr(cli, "main", fake_main)
    out = tmp_path / "fuzz.json"
    rc = _tool().main([str(corpus), "--seconds", "1", "--findings", str(tmp_path / "f"), "--json", str(out)])
    return rc, json.loads(out.read_text())


def test_a_traceback_is_a_finding_with_the_mutated_model_saved(monkeypatch, tmp_path):
    def crash(argv):
        raise RuntimeError("planted")

    rc, doc = _run_with(monkeypatch, tmp_path, crash)
    assert rc == 1 and doc["findings"] and {f["finding"] for f in doc["findings"]} == {"traceback"}
    assert any(name.endswith(".onnx") for name in os.listdir(tmp_path / "f"))


def test_an_output_computing_something_else_is_a_finding(monkeypatch, tmp_path):
    def wrong(argv):  # writes the input with its weight doubled, or for check says all is well
        if "-o" in argv:
            model = onnx.load(argv[1])
            for t in model.graph.initializer:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * 2, t.name))
            onnx.save(model, argv[argv.index("-o") + 1])
        return 0

    rc, doc = _run_with(monkeypatch, tmp_path, wrong)
    assert rc == 1 and "numeric mismatch" in {f["finding"] for f in doc["findings"]}
