"""A Squeeze/Unsqueeze/order-keeping Transpose read only by a Reshape of a constant shape:
dropped, the result compared with ONNX Runtime on the original; each condition one by one."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.optimize.layout_before_reshape import RemoveLayoutOpsBeforeReshapePass
from tests.optimize.common import ops, optimize_and_compare, run_pass

F = onnx.TensorProto.FLOAT


def _model(layout, x_shape, shape, *, extra_reader=False, layout_is_output=False, computed_shape=False,
           allowzero=None, out_shape=None):
    inits = [nh.from_array(np.array(shape, np.int64), "shape")]
    nodes = [layout]
    if computed_shape:
        nodes.append(h.make_node("Identity", ["shape_in"], ["shape"]))
        inits = []
    attrs = {} if allowzero is None else {"allowzero": allowzero}
    nodes.append(h.make_node("Reshape", [layout.output[0], "shape"], ["y"], **attrs))
    outputs = [h.make_tensor_value_info("y", F, out_shape)]
    if extra_reader:
        nodes.append(h.make_node("Relu", [layout.output[0]], ["r"]))
        outputs.append(h.make_tensor_value_info("r", F, None))
    if layout_is_output:
        outputs.append(h.make_tensor_value_info(layout.output[0], F, None))
    inputs = [h.make_tensor_value_info("x", F, list(x_shape))]
    if computed_shape:
        inputs.append(h.make_tensor_value_info("shape_in", onnx.TensorProto.INT64, [len(shape)]))
    inits.append(nh.from_array(np.array([1], np.int64), "axes"))
    model = h.make_model(h.make_graph(nodes, "g", inputs, outputs, inits), opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _squeeze():
    return h.make_node("Squeeze", ["x", "axes"], ["s"])


def test_a_squeeze_or_unsqueeze_before_a_reshape_goes():
    for layout, x_shape in ((_squeeze(), (2, 1, 6)), (h.make_node("Unsqueeze", ["x", "axes"], ["s"]), (2, 6))):
        result, _ = optimize_and_compare(_model(layout, x_shape, [-1, 3], out_shape=[4, 3]))
        assert ops(result) == ["Reshape"], layout.op_type


def test_a_transpose_that_moves_only_unit_dims_goes_and_another_stays():
    moves_ones = h.make_node("Transpose", ["x"], ["s"], perm=[1, 0, 2])  # [2, 1, 3] -> [1, 2, 3]
    result, _ = optimize_and_compare(_model(moves_ones, (2, 1, 3), [3, 2], out_shape=[3, 2]))
    assert ops(result) == ["Reshape"]
    reorders = h.make_node("Transpose", ["x"], ["s"], perm=[2, 1, 0])  # [2, 1, 3] -> [3, 1, 2]
    result, _ = optimize_and_compare(_model(reorders, (2, 1, 3), [3, 2], out_shape=[3, 2]))
    assert ops(result) == ["Transpose", "Reshape"]


def test_what_could_change_the_result_or_an_interface_stays():
    cases = {"a 0 copies a dim the squeeze set": dict(shape=[0, 6], out_shape=[2, 6]),
             "another node reads the squeeze": dict(shape=[-1, 3], extra_reader=True, out_shape=[4, 3]),
             "the squeeze's result is a graph output": dict(shape=[-1, 3], layout_is_output=True, out_shape=[4, 3]),
             "the shape is computed": dict(shape=[-1, 3], computed_shape=True, out_shape=[4, 3])}
    for why, kwargs in cases.items():
        model = _model(_squeeze(), (2, 1, 6), **kwargs)
        _, modified = run_pass(model, RemoveLayoutOpsBeforeReshapePass())
        assert not modified, why
    allowzero = _model(_squeeze(), (2, 1, 6), [-1, 3], allowzero=1, out_shape=[4, 3])
    _, modified = run_pass(allowzero, RemoveLayoutOpsBeforeReshapePass())
    assert modified  # without a 0 in the shape allowzero changes nothing
