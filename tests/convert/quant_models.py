"""What the quantized-form tests share: a one-graph model of the given nodes and constants, and
ONNX Runtime's run of it (graph optimizations off unless asked: the spec's ops, one by one)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

from tests.convert.support.exact_int8 import ort_model

__all__ = ["quant_model", "ort_run", "qlinear_conv"]


def quant_model(nodes, inputs, outputs, inits, opset=17):
    """``inits``: (name, value) pairs, made initializers."""
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9 if opset >= 19 else 8
    return m


def ort_run(model, feeds, optimized=False):
    """The first output of ONNX Runtime's run of ``model`` on ``feeds``."""
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(ort_model(model).SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def qlinear_conv(rng, per_channel: bool, cin: int, size: int, sy: float, w_bound: int):
    """A padded 3x3 QLinearConv of uint8 x (``cin`` channels, ``size`` x ``size``) and int8 w in
    [-w_bound, w_bound] to 16 channels (per channel: 16 scales and nonzero zero points), int32 bias;
    the model and a feed drawn from ``rng``."""
    from onnx import TensorProto as T

    cout = 16
    sw = rng.uniform(0.001, 0.004, cout).astype(np.float32) if per_channel else np.float32(0.0021)
    zw = rng.integers(-3, 4, cout).astype(np.int8) if per_channel else np.int8(0)
    inits = [("sx", np.float32(0.02)), ("zx", np.uint8(118)),
             ("w", rng.integers(-w_bound, w_bound + 1, (cout, cin, 3, 3)).astype(np.int8)),
             ("sw", sw), ("zw", zw), ("sy", np.float32(sy)), ("zy", np.uint8(130)),
             ("b", rng.integers(-20000, 20000, cout).astype(np.int32))]
    node = helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"], name="qconv",
                            pads=[1, 1, 1, 1])
    model = quant_model([node], [helper.make_tensor_value_info("x", T.UINT8, [1, cin, size, size])],
                        [helper.make_tensor_value_info("y", T.UINT8, [1, cout, size, size])], inits)
    return model, {"x": rng.integers(0, 256, (1, cin, size, size)).astype(np.uint8)}
