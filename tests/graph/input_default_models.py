"""Models whose graph inputs carry an initializer (a default a caller may override), and the
oracles the --freeze-input-defaults tests share: ONNX Runtime on the original (which takes the
default when the input is not fed), onnx.reference with Reshape-1 for opsets ONNX Runtime lacks."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

REDUCE_OPS = ("ReduceProd", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
X = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4) / 8


def reduce_model(op: str = "ReduceProd", opset: int = 18, axes=(1,)) -> onnx.ModelProto:
    """``op`` at ``opset`` with its axes from graph input 'b', whose initializer is ``axes``."""
    g = h.make_graph([h.make_node(op, ["x", "b"], ["y"], keepdims=0, name="r")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4]),
                      h.make_tensor_value_info("b", T.INT64, [len(axes)])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     initializer=[nh.from_array(np.array(axes, np.int64), "b")])
    return onnx.shape_inference.infer_shapes(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]))


def upsample_model() -> onnx.ModelProto:
    """Upsample-9 with its scales from graph input 's' (default [1, 1, 2, 2])."""
    g = h.make_graph([h.make_node("Upsample", ["x", "s"], ["y"], mode="nearest", name="u")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 2, 2]), h.make_tensor_value_info("s", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 1, 4, 4])],
                     initializer=[nh.from_array(np.array([1, 1, 2, 2], np.float32), "s")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 9)], ir_version=4)


def ir3_model() -> onnx.ModelProto:
    """An IR-3 model (opset 8): every weight is a graph input with an initializer, as IR 3 requires."""
    rng = np.random.default_rng(0)
    weights = {"W": rng.standard_normal((4, 6)).astype(np.float32), "s": np.array([8], np.int64),
               "B": rng.standard_normal(8).astype(np.float32)}
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [2, 6])] + [
        h.make_tensor_value_info(k, h.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in weights.items()]
    nodes = [h.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0], name="t"),
             h.make_node("MatMul", ["x", "Wt"], ["m"], name="mm"),
             h.make_node("Reshape", ["m", "s"], ["r"], name="reshape"),
             h.make_node("Add", ["r", "B"], ["y"], name="add")]
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, [8])],
                     initializer=[nh.from_array(v, k) for k, v in weights.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 8)], ir_version=3)


IR3_FEEDS = {"x": np.random.default_rng(1).standard_normal((2, 6)).astype(np.float32)}


def ort_run(model: onnx.ModelProto, feeds) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


class Reshape(OpRun):
    """Reshape-1 (shape as an attribute), which onnx.reference lacks: numpy's reshape, as the spec says."""

    op_domain = ""

    def _run(self, data, shape=None, allowzero=None):
        return (np.reshape(data, shape),)


def reference_run(model: onnx.ModelProto, feeds) -> list[np.ndarray]:
    return [np.asarray(o) for o in ReferenceEvaluator(model, new_ops=[Reshape]).run(None, feeds)]
