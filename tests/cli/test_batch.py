"""Directory mode: every .onnx below DIR, mirrored under OUTDIR, -j workers, goes on past bad files.

Oracle: ONNX Runtime runs each written model and the original on the same input.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import cli


def _model(axis: int, scale: float) -> onnx.ModelProto:
    c = numpy_helper.from_array(np.full((2, 3), scale, np.float32), "c")
    nodes = [helper.make_node("ReduceProd", ["c"], ["k"], axes=[axis], keepdims=1, name="const_rp"),
             helper.make_node("Mul", ["x", "k"], ["m"], name="mul"),
             helper.make_node("ReduceProd", ["m"], ["y"], axes=[axis], keepdims=1, name="rp")]
    out_shape = [1, 3] if axis == 0 else [2, 1]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], [c])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


X = np.array([[1.5, -2.0, 0.5], [3.0, 0.25, -1.0]], np.float32)


def _out(path) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    onnx.save(_model(0, 2.0), src / "top.onnx")
    onnx.save(_model(1, 0.5), src / "a" / "one.onnx")
    onnx.save(_model(0, 3.0), src / "a" / "b" / "two.onnx")
    (src / "a" / "broken.onnx").write_bytes(b"\x08\x07garbage")
    (src / "a" / "notes.txt").write_text("not a model")
    return src


GOOD = ["top.onnx", "a/one.onnx", "a/b/two.onnx"]


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("command", [["convert", "--opset", "18"], ["fold"], ["optimize"]])
def test_directory_mode_mirrors_and_goes_on(tree, tmp_path, capsys, jobs, command):
    out = tmp_path / "out"
    rc = cli.main([command[0], str(tree), *command[1:], "-o", str(out), "-j", jobs])
    captured = capsys.readouterr()
    assert rc == 1, captured  # one file failed
    lines = captured.out.splitlines()
    for rel in GOOD:
        assert any(line.startswith("ok") and f" {rel}:" in line for line in lines), (rel, captured.out)
        np.testing.assert_array_equal(_out(out / rel), _out(tree / rel))
        written = onnx.load(out / rel)
        onnx.checker.check_model(written, full_check=True)
        if command[0] == "convert":
            assert [o.version for o in written.opset_import if o.domain == ""] == [18]
    assert any(line.startswith("FAIL") and "a/broken.onnx" in line and "not an ONNX model" in line
               for line in lines), captured.out
    assert "3 of 4 file(s) succeeded, 1 failed" in captured.out
    assert not (out / "a" / "broken.onnx").exists() and not (out / "a" / "notes.txt").exists()
    assert "\r[" not in captured.err  # no progress bar when stderr is not a terminal


def test_all_good_exits_0_and_progress_bar_on_a_terminal(tree, tmp_path, capsys, monkeypatch):
    os.unlink(tree / "a" / "broken.onnx")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    rc = cli.main(["fold", str(tree), "-o", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert rc == 0, captured
    assert captured.err.count("\r[") == 3 and "3/3" in captured.err


def test_output_inside_input_is_not_reprocessed(tree, capsys):
    os.unlink(tree / "a" / "broken.onnx")
    for _ in range(2):
        assert cli.main(["convert", str(tree), "--opset", "18", "-o", str(tree / "out")]) == 0
    capsys.readouterr()
    assert not (tree / "out" / "out").exists()
    assert sorted(os.path.relpath(os.path.join(d, f), tree / "out")
                  for d, _, fs in os.walk(tree / "out") for f in fs) == sorted(GOOD)


def test_in_place_directory(tree, capsys):
    os.unlink(tree / "a" / "broken.onnx")
    before = {rel: _out(tree / rel) for rel in GOOD}
    assert cli.main(["convert", str(tree), "--opset", "18", "-o", str(tree)]) == 0
    capsys.readouterr()
    for rel in GOOD:
        np.testing.assert_array_equal(_out(tree / rel), before[rel])
        assert onnx.load(tree / rel).opset_import[0].version == 18


@pytest.mark.parametrize("argv, fragment", [
    (["convert", "{src}", "--opset", "18", "-o", "{file}"], "is a file"),
    (["fold", "{empty}", "-o", "{tmp}/o"], "no .onnx files"),
    (["fold", "{src}", "-o", "{tmp}/o", "-j", "0"], "-j"),
    (["optimize", "{src}", "-o", "{tmp}/missing/o"], "does not exist"),
])
def test_directory_usage_errors(tree, tmp_path, capsys, argv, fragment):
    (tmp_path / "file.onnx").write_bytes(b"keep")
    (tmp_path / "empty").mkdir()
    argv = [a.format(src=tree, file=tmp_path / "file.onnx", empty=tmp_path / "empty", tmp=tmp_path) for a in argv]
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error: ") and fragment in err, err
    assert (tmp_path / "file.onnx").read_bytes() == b"keep"
    assert not (tmp_path / "o").exists()


def test_directory_lines_say_what_each_file_did_and_json_has_a_status(tmp_path, capsys):
    import json as _json

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.onnx").write_bytes(open("models/mixed_opset13.onnx", "rb").read())
    (src / "bad.onnx").write_bytes(b"not a model")
    assert cli.main(["convert", str(src), "--opset", "18", "-o", str(tmp_path / "out"), "--verify"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("ok    a.onnx: opset 13 -> 18, written to") for ln in lines), lines
    bad = next(ln for ln in lines if "bad.onnx" in ln)
    assert bad.startswith("FAIL  bad.onnx: ") and "error:" not in bad
    assert cli.main(["check", str(src)]) == 1
    assert "ok    a.onnx: OK: 1 ReduceProd node(s) checked" in capsys.readouterr().out
    assert cli.main(["convert", str(src), "--opset", "18", "-o", str(tmp_path / "out2"), "--json"]) == 1
    doc = _json.loads(capsys.readouterr().out)
    assert doc["exit_status"] == 1 and not doc["ok"]
    assert all(not (f["error"] or "").startswith("error:") for f in doc["files"])


def test_a_directory_refuses_an_output_named_like_a_model(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.onnx").write_bytes(open("models/mixed_opset13.onnx", "rb").read())
    assert cli.main(["fold", str(src), "-o", str(tmp_path / "folded.onnx")]) == 2
    assert "looks like a model file" in capsys.readouterr().err
    assert not (tmp_path / "folded.onnx").exists()
