"""--verify after a decomposition that reorders long float sums (DFT as a MatMul): the
tolerance grows with the output's scale, and only then."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from rewriter.cli import main
from rewriter.verify.numerics.compare import _compare


def test_a_scaled_tolerance_accepts_differences_small_against_the_outputs_magnitude():
    want = np.array([100.0, 0.0, -50.0], np.float32)
    got = want + np.array([0, 5e-4, 0], np.float32)  # 5e-4 next to a 0: beyond rtol, within 1e-4 x 100
    assert not _compare("y", T.FLOAT, want, got).ok
    scaled = _compare("y", T.FLOAT, want, got, scale_atol=1e-4)
    assert scaled.ok and "reordered sums" in scaled.tolerance
    assert not _compare("y", T.FLOAT, want, want + np.float32(0.02), scale_atol=1e-4).ok
    ints = np.array([1, 2], np.int64)
    assert not _compare("i", T.INT64, ints, ints + 1, scale_atol=1e-4).ok  # integers stay exact


def _dft_model(path, length=512):
    graph = h.make_graph([h.make_node("DFT", ["x"], ["y"], axis=1)], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, length, 1])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, length, 2])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def test_a_decomposed_dft_verifies_with_the_scaled_tolerance(tmp_path, capsys):
    src = _dft_model(tmp_path / "dft.onnx")
    out = str(tmp_path / "out.onnx")
    assert main(["convert", src, "-o", out, "--opset", "15", "--verify"]) == 0
    assert "reordered sums" in capsys.readouterr().out
    assert main(["convert", src, "-o", str(tmp_path / "o2.onnx"), "--opset", "15", "--verify", "--atol", "1e-6"]) == 1
