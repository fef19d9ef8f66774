"""Unsqueeze(Squeeze(x, a), a) is x: removed, compared with ONNX Runtime on the original;
other axes, or a Squeeze read elsewhere, one by one."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh

from tests.optimize.common import ops, optimize_and_compare

F = onnx.TensorProto.FLOAT


def _model(squeeze_axes, unsqueeze_axes, *, squeeze_read=False):
    nodes = [h.make_node("Squeeze", ["x", "sa"], ["s"]), h.make_node("Unsqueeze", ["s", "ua"], ["u"]),
             h.make_node("Relu", ["u"], ["y"])]
    outputs = [h.make_tensor_value_info("y", F, None)]
    if squeeze_read:
        nodes.append(h.make_node("Neg", ["s"], ["n"]))
        outputs.append(h.make_tensor_value_info("n", F, None))
    inits = [nh.from_array(np.array(squeeze_axes, np.int64), "sa"), nh.from_array(np.array(unsqueeze_axes, np.int64), "ua")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [1, 3, 1])], outputs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def test_the_pair_with_the_same_axes_is_the_identity():
    for squeeze_axes, unsqueeze_axes in (([0], [0]), ([-3], [0]), ([0, 2], [2, 0]), ([2], [-1])):
        result, _ = optimize_and_compare(_model(squeeze_axes, unsqueeze_axes))
        assert ops(result) == ["Relu"], (squeeze_axes, unsqueeze_axes)


def test_other_axes_stay_and_a_squeeze_read_elsewhere_stays():
    result, _ = optimize_and_compare(_model([0], [1]))
    assert "Squeeze" in ops(result) and "Unsqueeze" in ops(result)
    result, _ = optimize_and_compare(_model([0], [0], squeeze_read=True))
    assert ops(result).count("Squeeze") == 1 and "Unsqueeze" not in ops(result)
