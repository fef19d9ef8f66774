"""Equal initializers merge whatever their size; alike samples, shapes or dtypes alone do not
merge; an overridable initializer is never merged (checked against the numbers themselves)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from rewriter.optimize import optimize_proto


def _model(arrays: dict[str, np.ndarray], inputs_too: tuple[str, ...] = ()) -> onnx.ModelProto:
    """y_k = x + arrays[k] for each array, every array broadcast to x's shape [4096]."""
    nodes, outputs = [], []
    for k, name in enumerate(arrays):
        nodes.append(helper.make_node("Add", ["x", name], [f"y{k}"]))
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096])]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(arrays[n].shape)) for n in inputs_too]
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _same_outputs(a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for u, v in zip(run(a), run(b)):
        np.testing.assert_array_equal(u, v)


def test_equal_initializers_of_any_size_merge_into_the_first():
    big = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
    model = _model({"first": big, "copy": big.copy(), "other": big + 1})
    out, _ = optimize_proto(model)
    assert [i.name for i in out.graph.initializer] == ["first", "other"]
    assert [n.input[1] for n in out.graph.node] == ["first", "first", "other"]
    _same_outputs(model, out)


def test_alike_samples_with_other_contents_stay_apart():
    base = np.zeros(4096, np.float32)
    changed = base.copy()
    changed[1] = 5.0  # not one of the 64 sampled elements (every 64th)
    model = _model({"a": base, "b": changed})
    out, _ = optimize_proto(model)
    assert sorted(i.name for i in out.graph.initializer) == ["a", "b"]
    _same_outputs(model, out)


def test_equal_bytes_of_other_shapes_stay_apart():
    data = np.arange(4096, dtype=np.float32)
    model = _model({"flat": data, "column": data.reshape(4096, 1)[:, 0].reshape(1, 4096)})
    out, _ = optimize_proto(model)
    assert sorted(i.name for i in out.graph.initializer) == ["column", "flat"]


def test_an_overridable_initializer_is_never_merged():
    data = np.arange(4096, dtype=np.float32)
    model = _model({"fixed": data, "overridable": data.copy()}, inputs_too=("overridable",))
    out, _ = optimize_proto(model)
    assert sorted(i.name for i in out.graph.initializer) == ["fixed", "overridable"]
    assert [n.input[1] for n in out.graph.node] == ["fixed", "overridable"]
