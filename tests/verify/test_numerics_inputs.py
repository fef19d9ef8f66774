"""Random inputs for --verify: declared dims, dynamic dims (a declared -1 included) and pinned shapes.

Oracle: the shapes of the arrays generated, and ONNX Runtime running the model on them."""

from __future__ import annotations

import onnx


def _minus_one_model():
    """An input declared [-1, 3, ?, ?], as Paddle exports write it (rapidocr's classifier)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 3, None, None])
    x.type.tensor_type.shape.dim[0].dim_value = -1
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])


def test_a_declared_minus_one_is_a_dynamic_dim():
    from rewriter.verify.numerics import random_inputs, verify_numerics

    model = _minus_one_model()
    assert random_inputs(model)["x"].shape == (2, 3, 2, 2)
    assert random_inputs(model, input_shapes={"x": [1, 3, 48, 192]})["x"].shape == (1, 3, 48, 192)
    assert verify_numerics(model, model).ok
