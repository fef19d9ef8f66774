"""DFT/STFT decomposed where they sit in a model-local function (the matrix a Constant node
there) and in an If branch (the matrix an initializer of the branch)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import rewriter
from tests.convert.support.spectral_util import close, dft_numpy, ort, stft_numpy
from tests.oracle import assert_valid

X = np.random.default_rng(0).normal(size=(2, 32, 1)).astype(np.float32)


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(value)))


def test_stft_in_a_function():
    fn = helper.make_function("local", "Spec", ["x"], ["y"],
                              [_const("s", 4), _const("l", 8), helper.make_node("STFT", ["x", "s", "", "l"], ["y"])],
                              [helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("Spec", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 5, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                          functions=[fn])
    result = rewriter.convert_opset(m, 11)
    assert_valid(result)
    ops = [n.op_type for n in result.functions[0].node] if result.functions else [n.op_type for n in result.graph.node]
    assert "STFT" not in ops and "MatMul" in ops
    close(ort(result, {"x": X})[0], stft_numpy(X, 4, frame_length=8), np.float32)


def test_dft_in_if_branches():
    def branch(name, inverse):
        return helper.make_graph([helper.make_node("DFT", ["x"], [name], axis=1, inverse=inverse)], name, [],
                                 [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 32, 2])])

    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("t", 0), else_branch=branch("e", 1))
    g = helper.make_graph([node],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32, 1]),
                                helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    result = rewriter.convert_opset(m, 11)
    assert_valid(result)
    for flag, inverse in ((True, False), (False, True)):
        close(ort(result, {"x": X, "c": np.array(flag)})[0], dft_numpy(X, axis=1, inverse=inverse), np.float32)
