"""Ranks that follow from what makes a value whatever the shapes: a Flatten makes rank 2, and
quantization, casts and elementwise unary ops keep their input's. A Softmax below opset 13
needs to know its axis is the last one; behind DequantizeLinear(QuantizeLinear(Flatten(x)))
(what quantizing a classifier head gives) ONNX's inference leaves the rank unknown."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.errors import RewriterError


def _model(head, extra=()):
    """Reshape(x, s) (s of unknown length: rank unknown) -> head -> Softmax(axis=1) at opset 13."""
    nodes = [h.make_node("Reshape", ["x", "s"], ["x_r"])] + head + [
        h.make_node("Softmax", [head[-1].output[0]], ["y"], axis=1)]
    inits = [nh.from_array(np.array(0.05, np.float32), "scale"), nh.from_array(np.array(3, np.uint8), "zero"),
             *extra]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4]),
                                  h.make_tensor_value_info("s", T.INT64, [None])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, None])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _run(model, x):
    feeds = {"x": x, "s": np.array([2, 3, 4], np.int64)}
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


QDQ_FLATTEN = [h.make_node("Flatten", ["x_r"], ["f"], axis=1),
               h.make_node("QuantizeLinear", ["f", "scale", "zero"], ["q"]),
               h.make_node("DequantizeLinear", ["q", "scale", "zero"], ["dq"]),
               h.make_node("Relu", ["dq"], ["r"])]


@pytest.mark.parametrize("head", [QDQ_FLATTEN, QDQ_FLATTEN[:1], QDQ_FLATTEN[:3]])
def test_softmax_behind_flatten_converts_below_13(head):
    m = _model(head)
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    assert not inferred[head[-1].output[0]].type.tensor_type.HasField("shape")  # ONNX's inference cannot tell
    r = rewriter.convert_opset(m, 11)
    assert next(o.version for o in r.opset_import if o.domain == "") == 11
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(r, x), _run(m, x), rtol=1e-6, atol=1e-7)


def test_a_rank_changing_op_still_leaves_it_unknown():
    m = _model([h.make_node("Unsqueeze", ["x_r", "axes"], ["u"])], [nh.from_array(np.array([0], np.int64), "axes")])
    with pytest.raises(RewriterError, match="unknown rank"):
        rewriter.convert_opset(m, 11)
