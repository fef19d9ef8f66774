"""The tests' exact ONNX Runtime oracle of 8-bit arithmetic (tests/convert/support/exact_int8.py):
the shifted copy computes the op's definition (onnx.reference, exact integers) in ONNX Runtime on any
CPU, int8 x int8 and float models are left as they are, and the saturation probe tells what this
CPU's ONNX Runtime does."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto as T, helper
from onnx.reference import ReferenceEvaluator

from tests.convert.quant_models import quant_model
from tests.convert.support.exact_int8 import saturates, shifted


def _matmul_integer(a_elem, zb):
    zeros = [("za", np.uint8(3) if a_elem == T.UINT8 else np.int8(3)), ("zb", zb)] if zb is not None else []
    b = np.full((64, 3), 127, np.int8) - np.arange(3, dtype=np.int8)
    b[::2, 2] = -128  # both ends of int8: the shift must map -128 to 0 and 127 to 255
    inits = [("b", b)] + zeros
    node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"] if zb is not None else ["a", "b"], ["y"])
    return quant_model([node], [helper.make_tensor_value_info("a", a_elem, [2, 64])],
                       [helper.make_tensor_value_info("y", T.INT32, [2, 3])], inits)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_shifted_copy_is_the_definition_in_onnx_runtime():
    feeds = {"a": np.full((2, 64), 255, np.uint8)}
    for zb in (None, np.int8(-5)):
        model = _matmul_integer(T.UINT8, zb)
        exact = ReferenceEvaluator(model).run(None, feeds)[0]
        assert int(exact[0, 0]) == (255 - (3 if zb is not None else 0)) * (127 - int(zb or 0)) * 64
        copy = shifted(model)
        assert {n.op_type for n in copy.graph.node} == {"Cast", "Add", "MatMulInteger"} | ({"Constant"} if zb is None else set())
        np.testing.assert_array_equal(ReferenceEvaluator(copy).run(None, feeds)[0], exact)
        np.testing.assert_array_equal(_ort(copy, feeds), exact)
        assert saturates() == (not np.array_equal(_ort(model, feeds), exact))


def test_int8_activations_are_left_as_they_are():
    model = _matmul_integer(T.INT8, np.int8(0))
    assert [n.op_type for n in shifted(model).graph.node] == ["MatMulInteger"]
