"""A model with a map in a value's type (ZipMap's seq(map(int64, float)), as every scikit-learn
classifier converted by skl2onnx has) optimizes: onnx_ir has no map types, so those values
cross untyped and get their declared types back."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h

from rewriter.optimize import OptimizeOptions, optimize_proto


def _zipmap_model():
    probabilities = h.make_sequence_type_proto(h.make_map_type_proto(onnx.TensorProto.INT64,
                                                                     h.make_tensor_type_proto(onnx.TensorProto.FLOAT, [])))
    nodes = [h.make_node("Identity", ["x"], ["x1"]), h.make_node("Softmax", ["x1"], ["p"], axis=1),
             h.make_node("ZipMap", ["p"], ["probabilities"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
                         [h.make_value_info("probabilities", probabilities)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("ai.onnx.ml", 1)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def test_a_zipmap_output_keeps_its_type_and_values():
    model = _zipmap_model()
    result, _ = optimize_proto(model, OptimizeOptions())
    onnx.checker.check_model(result, full_check=True)
    assert result.graph.output[0] == model.graph.output[0]
    assert [n.op_type for n in result.graph.node] == ["Softmax", "ZipMap"]
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], np.float32)
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    want, got = run(model), run(result)
    assert len(want) == len(got) == 2
    for w, g in zip(want, got):
        assert w.keys() == g.keys() and all(np.isclose(w[k], g[k], rtol=0, atol=0) for k in w)
