"""`rewriter fold` and `rewriter optimize`: summary, exit codes, nothing written on failure."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper as nh

from rewriter import cli

FOLDABLE = """<ir_version: 8, opset_import: ["": 18]>
g (float[2,3] x) => (float[2] y, float[2] z, int32 o) <float[2,3] c = {1,2,3,4,5,6}, int64[1] ax = {1},
                                                       int32[2] big = {65536, 65536}> {
  y = ReduceProd<keepdims=0>(c, ax)
  z = ReduceProd<keepdims=0>(x, ax)
  o = ReduceProd<keepdims=0>(big)
  dead = Neg(x)
}"""


def write(tmp_path, text: str, name: str = "in.onnx", **save_kwargs) -> str:
    path = str(tmp_path / name)
    onnx.save(onnx.parser.parse_model(text), path, **save_kwargs)
    return path


def ort_run(path: str, feeds) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, feeds)


FEEDS = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}


def test_fold_prints_summary_and_writes_an_equivalent_model(tmp_path, capsys):
    src, out = write(tmp_path, FOLDABLE), str(tmp_path / "out.onnx")
    assert cli.main(["fold", src, "-o", out]) == 0
    stdout = capsys.readouterr().out
    assert "folded 1 ReduceProd node(s), skipped 2" in stdout
    assert "-> 'y' float32[2]" in stdout
    assert "data 'x' is an input of the main graph" in stdout
    assert "int32 product overflows" in stdout
    assert "size:" in stdout and "constant data:" in stdout
    folded = onnx.load(out)
    onnx.checker.check_model(folded, full_check=True)
    assert [n.op_type for n in folded.graph.node] == ["ReduceProd", "ReduceProd", "Neg"]
    assert {t.name for t in folded.graph.initializer} == {"ax", "big", "y"}  # 'c' became unused
    for got, want in zip(ort_run(out, FEEDS), ort_run(src, FEEDS)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode,expected", [("wrap", 0), ("saturate", 2**31 - 1)])
def test_fold_int_overflow_modes(tmp_path, capsys, mode, expected):
    src, out = write(tmp_path, FOLDABLE), str(tmp_path / "out.onnx")
    assert cli.main(["fold", src, "-o", out, "--int-overflow", mode]) == 0
    assert "folded 2 ReduceProd node(s), skipped 1" in capsys.readouterr().out
    inits = {t.name: nh.to_array(t) for t in onnx.load(out).graph.initializer}
    assert inits["o"] == expected and "big" not in inits


def test_optimize_removes_unused_and_reports_bytes_saved(tmp_path, capsys):
    src, out = write(tmp_path, FOLDABLE), str(tmp_path / "out.onnx")
    assert cli.main(["optimize", src, "-o", out]) == 0
    stdout = capsys.readouterr().out
    # optimize prints its own summary: the ReduceProd fold, what else it removed, the before/after table
    assert "folded 1 ReduceProd node(s)" in stdout and "removed unused: 1 node(s)" in stdout
    assert "4 -> 2 nodes" in stdout
    before, after = os.path.getsize(src), os.path.getsize(out)
    assert f"{before} B" in stdout and f"{after} B" in stdout and after < before
    optimized = onnx.load(out)
    onnx.checker.check_model(optimized, full_check=True)
    assert "Neg" not in [n.op_type for n in optimized.graph.node]
    for got, want in zip(ort_run(out, FEEDS), ort_run(src, FEEDS)):
        np.testing.assert_array_equal(got, want)


def test_fold_reads_external_data(tmp_path, capsys):
    text = """<ir_version: 8, opset_import: ["": 13]>
        g () => (double[3] y) <double[4,3] c = {1,2,3,4,5,6,7,8,9,10,11,12}> {
          y = ReduceProd<axes=[0], keepdims=0>(c)
        }"""
    src = write(tmp_path, text, save_as_external_data=True, all_tensors_to_one_file=True,
                location="weights.bin", size_threshold=0)
    out = str(tmp_path / "out.onnx")
    assert cli.main(["fold", src, "-o", out]) == 0
    y = nh.to_array(onnx.load(out).graph.initializer[0])
    np.testing.assert_array_equal(y, np.array([280.0, 880.0, 1944.0]))


def test_invalid_axes_exit_2_names_the_node_and_writes_nothing(tmp_path, capsys):
    text = """<ir_version: 8, opset_import: ["": 13]>
        g () => (float y) <float[2] c = {1, 2}> { y = ReduceProd<axes=[3], keepdims=0>(c) }"""
    model = onnx.parser.parse_model(text)
    model.graph.node[0].name = "bad"
    src, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(model, src)
    assert cli.main(["fold", src, "-o", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "node 'bad'" in err[0]
    assert not os.path.exists(out) and os.listdir(tmp_path) == ["in.onnx"]


@pytest.mark.parametrize("argv", [
    ["fold", "{missing}", "-o", "{out}"],
    ["fold", "{src}", "-o", "{out}", "--int-overflow", "clamp"],
    ["optimize", "{src}"],
    ["fold", "{garbage}", "-o", "{out}"],
])
def test_bad_input_or_usage_exit_2(tmp_path, capsys, argv):
    src = write(tmp_path, FOLDABLE)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\xfe not a model")
    paths = {"src": src, "out": str(tmp_path / "out.onnx"), "missing": str(tmp_path / "nope.onnx"),
             "garbage": str(garbage)}
    assert cli.main([a.format(**paths) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert not os.path.exists(paths["out"])


def test_optimize_warns_about_a_shape_problem_the_input_already_had(tmp_path, capsys):
    text = """<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[5] z) <float[2,3] c = {1,2,3,4,5,6}> {
          y = ReduceProd<axes=[1], keepdims=0>(c)
          z = Add(x, y)
        }"""
    src, out = write(tmp_path, text), str(tmp_path / "out.onnx")
    assert cli.main(["optimize", src, "-o", out]) == 0
    assert "warning:" in capsys.readouterr().err
    assert os.path.exists(out)


def test_optimize_exit_1_when_the_fold_breaks_strict_shape_inference(tmp_path, capsys, monkeypatch):
    """A faulty fold (injected: it folds to the wrong shape) is refused, nothing is written."""
    from rewriter import fold

    real = fold.fold_model

    def faulty(model, **kwargs):
        result, report = real(model, **kwargs)
        for t in result.graph.initializer:
            if t.name == "y":
                t.CopyFrom(nh.from_array(np.ones([3], dtype=np.float32), "y"))
        return result, report

    monkeypatch.setattr(fold, "fold_model", faulty)
    text = """<ir_version: 8, opset_import: ["": 13]>
        g (float[2] x) => (float[2] z) <float[2,3] c = {1,2,3,4,5,6}> {
          y = ReduceProd<axes=[1], keepdims=0>(c)
          z = Add(x, y)
        }"""
    src, out = write(tmp_path, text), str(tmp_path / "out.onnx")
    assert cli.main(["optimize", src, "-o", out]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "shape" in err
    assert not os.path.exists(out)


def test_subprocess_exit_codes_and_no_traceback(tmp_path):
    src, out = write(tmp_path, FOLDABLE), str(tmp_path / "out.onnx")
    ok = subprocess.run([sys.executable, "-m", "rewriter", "fold", src, "-o", out],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "folded 1 ReduceProd node(s)" in ok.stdout and os.path.exists(out)
    assert "warning: " in ok.stderr and "overflow" in ok.stderr  # the skip warning names the node
    bad = subprocess.run([sys.executable, "-m", "rewriter", "fold", str(tmp_path / "nope.onnx"),
                          "-o", str(tmp_path / "o2.onnx")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.startswith("error: ")


def test_importing_the_cli_does_not_import_the_fold_machinery():
    code = ("import sys, rewriter.cli; "
            "print(sorted(m for m in ('onnx_ir', 'onnxscript', 'rewriter.fold', 'rewriter.kernels') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]"


def test_optimize_in_place_with_big_lazily_loaded_tensors(tmp_path, capsys):
    rng = np.random.default_rng(0)
    big = (rng.random((640, 512), dtype=np.float32) + 0.5).astype(np.float32)  # > 1 MiB: left in the file
    keep = rng.random((640, 512), dtype=np.float32)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("ReduceProd", ["c"], ["y"], axes=[1], keepdims=0),
         onnx.helper.make_node("Add", ["x", "k"], ["z"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [640, 512])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [640]),
         onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [640, 512])],
        [nh.from_array(big, "c"), nh.from_array(keep, "k")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    path, original = str(tmp_path / "m.onnx"), str(tmp_path / "original.onnx")
    onnx.save(model, path)
    onnx.save(model, original)
    assert cli.main(["optimize", path, "-o", path]) == 0
    assert "folded 1 ReduceProd node(s)" in capsys.readouterr().out
    result = onnx.load(path)
    onnx.checker.check_model(result, full_check=True)
    assert sorted(t.name for t in result.graph.initializer) == ["k", "y"]
    feeds = {"x": rng.random((640, 512), dtype=np.float32)}
    got, want = ort_run(path, feeds), ort_run(original, feeds)
    np.testing.assert_array_equal(got[1], want[1])
    exact = np.prod(big.astype(np.float64), axis=1)
    np.testing.assert_allclose(got[0], exact, rtol=2**-23)  # correctly rounded: within half an ulp


@pytest.mark.parametrize("attribute", ["keepdims", "axes"])
def test_fold_skips_reduce_prod_whose_attributes_come_from_the_call(tmp_path, capsys, attribute):
    """Inside a function, keepdims=@kd or axes=@ax is known only per call: skipped, named."""
    prod = onnx.helper.make_node("ReduceProd", ["k"], ["r"], name="fn_prod",
                                 **({"axes": [1]} if attribute == "keepdims" else {"keepdims": 1}))
    prod.attribute.append(onnx.AttributeProto(
        name=attribute, ref_attr_name="p",
        type=onnx.AttributeProto.INT if attribute == "keepdims" else onnx.AttributeProto.INTS))
    fn = onnx.helper.make_function(
        "loc", "F", ["x"], ["y"],
        [onnx.helper.make_node("Constant", [], ["k"], value=nh.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3))),
         prod, onnx.helper.make_node("Add", ["r", "x"], ["y"])],
        opset_imports=[onnx.helper.make_opsetid("", 13)], attributes=["p"])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("F", ["x"], ["y"], domain="loc", p=1 if attribute == "keepdims" else [1])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 1])])
    model = onnx.helper.make_model(graph, functions=[fn], opset_imports=[
        onnx.helper.make_opsetid("", 13), onnx.helper.make_opsetid("loc", 1)])
    src, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(model, src)
    for command in ("fold", "optimize"):
        assert cli.main([command, src, "-o", out]) == 0
        printed = capsys.readouterr().out
        assert "skipped node 'fn_prod'" in printed and "calling node's attributes" in printed
    feeds = {"x": np.ones([2, 1], dtype=np.float32)}
    np.testing.assert_array_equal(ort_run(out, feeds)[0], ort_run(src, feeds)[0])


def test_optimize_keeps_what_the_training_info_reads(tmp_path, capsys):
    w = nh.from_array(np.ones([2], np.float32), "w")
    lr = nh.from_array(np.array([0.1], np.float32), "lr")  # read only by the training algorithm
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])], [w, lr])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    info = model.training_info.add()
    info.algorithm.CopyFrom(onnx.helper.make_graph(
        [onnx.helper.make_node("Mul", ["w", "lr"], ["w_next"])], "algo", [], []))
    binding = info.update_binding.add()
    binding.key, binding.value = "w", "w_next"
    src, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(model, src)
    assert cli.main(["optimize", src, "-o", out]) == 0
    result = onnx.load(out)
    assert sorted(t.name for t in result.graph.initializer) == ["lr", "w"]
    assert result.training_info == model.training_info
