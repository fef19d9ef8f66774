"""What the quantized-form tests share: a one-graph model of the given nodes and constants, and
ONNX Runtime's run of it (graph optimizations off unless asked: the spec's ops, one by one)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

__all__ = ["quant_model", "ort_run"]


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
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
