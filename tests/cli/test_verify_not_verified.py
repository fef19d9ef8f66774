"""--verify and --max-error on inputs that check nothing (issue 39).

--verify: a reference that is all zero or constant, or random inputs whose every dynamic dim took
the default size, is "not verified": its line says why, a warning says so, the result is written
(exit 0, like an inherited shape problem), ``--json`` has ``numerics.status`` "not verified".
--max-error: the same inputs are exit 1, nothing written (the search cannot judge).

The oracle for what the reference is: ONNX Runtime on the inputs the command draws.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.cli import main
from rewriter.errors import RewriterError
from rewriter.precision.fallback import CannotJudge
from rewriter.verify.numerics import random_inputs

W = nh.from_array((np.random.default_rng(3).standard_normal((16, 16)) / 4).astype(np.float32), "w")


def _model(dims, zero: bool = False) -> onnx.ModelProto:
    """y = MatMul(x, w) (zero: Relu(-|MatMul(x, w)|), 0 everywhere) with x of ``dims``."""
    nodes = [h.make_node("MatMul", ["x", "w"], ["m" if zero else "y"])]
    if zero:
        nodes += [h.make_node("Abs", ["m"], ["a"]), h.make_node("Neg", ["a"], ["n"]), h.make_node("Relu", ["n"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, dims)],
                         [h.make_tensor_value_info("y", T.FLOAT, dims)], [W])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _save(tmp_path, model, name="m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def _run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_an_all_zero_reference_is_not_verified_but_written(tmp_path, capsys):
    model = _model([4, 16], zero=True)
    y = ort.InferenceSession(model.SerializeToString()).run(None, random_inputs(model))[0]
    assert not y.any()  # the premise
    src, out = _save(tmp_path, model), str(tmp_path / "out.onnx")
    status, stdout, stderr = _run(capsys, "convert", src, "--opset", "14", "-o", out, "--verify")
    assert status == 0 and os.path.exists(out)
    line = next(x for x in stdout.splitlines() if x.startswith("y (float)"))
    assert "NOT VERIFIED: the reference is all zeros, not a check" in line and not line.endswith(" ok")
    assert "--input-value" in line
    assert "warning: numerical check not verified (written all the same): y: the reference is all zeros" in stderr
    os.remove(out)
    status, stdout, stderr = _run(capsys, "convert", src, "--opset", "14", "-o", out, "--verify", "--json")
    doc = json.loads(stdout)
    numerics = doc["verification"]["numerics"]
    assert status == 0 and doc["exit_status"] == 0 and os.path.exists(out)
    assert numerics["ok"] is False and numerics["status"] == "not verified"
    assert numerics["outputs"][0]["degenerate"] == "the reference is all zeros"
    assert numerics["not_verified"] == ["y: the reference is all zeros"]
    assert any(w.startswith("numerical check not verified") for w in doc["warnings"])


def test_quiet_still_warns(tmp_path, capsys):
    src = _save(tmp_path, _model([4, 16], zero=True))
    status, stdout, stderr = _run(capsys, "-q", "fold", src, "-o", str(tmp_path / "o.onnx"), "--verify")
    assert status == 0 and "NOT VERIFIED" not in stdout
    assert "warning: numerical check not verified" in stderr


def test_a_real_reference_is_verified(tmp_path, capsys):
    src = _save(tmp_path, _model([4, 16]))
    status, stdout, stderr = _run(capsys, "convert", src, "--opset", "14", "-o", str(tmp_path / "o.onnx"), "--verify")
    assert status == 0 and "warning" not in stderr and "NOT VERIFIED" not in stdout
    assert next(x for x in stdout.splitlines() if x.startswith("y (float)")).endswith(" ok")


@pytest.mark.parametrize("command", [["convert", "--opset", "14"], ["optimize"], ["fold"]])
def test_every_dynamic_dim_defaulted_is_said_and_a_size_given_is_not(tmp_path, capsys, command):
    src, out = _save(tmp_path, _model(["N", 16])), str(tmp_path / "o.onnx")
    argv = [command[0], src, *command[1:], "-o", out, "--verify"]
    status, stdout, stderr = _run(capsys, *argv)
    assert status == 0 and os.path.exists(out)
    assert "NOT VERIFIED: every dynamic input dim took the default size 2 (x: 'N')" in stdout
    assert "within tolerance on the default sizes" in stdout
    assert "warning: numerical check not verified (written all the same): every dynamic input dim took the " \
           "default size 2 (x: 'N'): not a check of real sizes; give them with --input-shape NAME:DIMS" in stderr
    status, stdout, stderr = _run(capsys, *argv, "--input-shape", "x:3,16")
    assert status == 0 and "NOT VERIFIED" not in stdout and "default size" not in stdout + stderr
    assert "warning" not in stderr
    assert next(x for x in stdout.splitlines() if x.startswith("y (float)")).endswith(" ok")


def test_fix_dim_gives_a_size(tmp_path, capsys):
    src = _save(tmp_path, _model(["N", 16]))
    status, stdout, stderr = _run(capsys, "convert", src, "--opset", "14", "-o", str(tmp_path / "o.onnx"),
                                  "--verify", "--fix-dim", "N=3")
    assert status == 0 and "NOT VERIFIED" not in stdout and "warning" not in stderr


def test_half_verify_on_an_all_zero_reference_is_not_verified(tmp_path, capsys):
    src, out = _save(tmp_path, _model([4, 16], zero=True)), str(tmp_path / "o.onnx")
    status, stdout, stderr = _run(capsys, "convert", src, "--dtype", "float16", "-o", out, "--verify")
    assert status == 0 and os.path.exists(out)
    assert "NOT VERIFIED: the reference is all zeros" in stdout and "not verified" in stderr


def test_half_verify_on_the_calibration_sample_is_not_defaulted(tmp_path, capsys):
    src, data = _save(tmp_path, _model(["N", 16])), str(tmp_path / "s.npz")
    np.savez(data, x=np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32))
    status, stdout, stderr = _run(capsys, "convert", src, "--dtype", "float16", "-o", str(tmp_path / "o.onnx"),
                                  "--verify", "--calibration-data", data)
    assert status == 0 and "NOT VERIFIED" not in stdout and "warning" not in stderr, stdout + stderr


# ---------------------------------------------------------------- --max-error

def test_max_error_on_defaulted_dims_is_exit_1_and_writes_nothing(tmp_path, capsys):
    src, out = _save(tmp_path, _model(["N", 16])), str(tmp_path / "o.onnx")
    argv = ["convert", src, "--dtype", "float16", "--max-error", "1e-2", "-o", out]
    status, stdout, stderr = _run(capsys, *argv)
    assert status == 1 and not os.path.exists(out)
    assert stderr.startswith("error: --max-error 0.01 cannot judge on random inputs: every dynamic input dim took "
                             "the default size 2 (x: 'N')"), stderr
    assert "--input-shape NAME:DIMS" in stderr and "nothing was written" in stderr
    status, stdout, stderr = _run(capsys, *argv, "--input-shape", "x:4,16")
    assert status == 0 and os.path.exists(out), stderr
    os.remove(out)
    data = str(tmp_path / "s.npz")
    np.savez(data, x=np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32))
    status, stdout, stderr = _run(capsys, *argv, "--calibration-data", data)
    assert status == 0 and os.path.exists(out), stderr


def test_max_error_on_an_all_zero_reference_is_exit_1(tmp_path, capsys):
    src, out = _save(tmp_path, _model([4, 16], zero=True)), str(tmp_path / "o.onnx")
    status, stdout, stderr = _run(capsys, "convert", src, "--dtype", "float16", "--max-error", "1e-2", "-o", out)
    assert status == 1 and not os.path.exists(out)
    assert stderr.startswith("error: --max-error 0.01 cannot judge on the calibration inputs: y: the reference is all "
                             "zeros"), stderr
    assert "--calibration-data" in stderr and "nothing was written" in stderr


def test_the_api_cannot_judge_either():
    with pytest.raises(CannotJudge, match=r"cannot judge on random inputs: every dynamic input dim took the default "
                                          r"size 2 \(x: 'N'\)"):
        rewriter.convert_precision(_model(["N", 16]), "float16", max_error=1e-2)
    assert issubclass(CannotJudge, RewriterError)
    sample = {"x": np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)}
    assert rewriter.convert_precision(_model(["N", 16]), "float16", max_error=1e-2, calibration_data=[sample])
    with pytest.raises(CannotJudge, match="y: the reference is all zeros"):
        rewriter.convert_precision(_model(["N", 16], zero=True), "float16", max_error=1e-2, calibration_data=[sample])
    # zero on one sample, not on the other: the search can judge
    varied = _model(["N", 16])
    assert rewriter.convert_precision(varied, "float16", max_error=1e-2,
                                      calibration_data=[{"x": np.zeros((2, 16), np.float32)}, sample])
