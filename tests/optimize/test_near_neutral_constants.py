"""Arithmetic with a constant that is close to neutral but not neutral is computation, kept:
LayerNorm's `+ 1e-12` (without it a row of equal values is 0 / 0 = NaN), `* 1.000001`.
Exactly neutral scalars go, whatever the other operand's shape."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.optimize import OptimizeOptions, optimize_proto

F = onnx.TensorProto.FLOAT


def _layer_norm(eps=1e-12):
    """LayerNorm as legacy exports write it: (x - mean) / sqrt(var + eps)."""
    nodes = [h.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
             h.make_node("Sub", ["x", "mean"], ["centered"]),
             h.make_node("Pow", ["centered", "two"], ["squared"]),
             h.make_node("ReduceMean", ["squared"], ["var"], axes=[-1]),
             h.make_node("Add", ["var", "eps"], ["var_eps"]),
             h.make_node("Sqrt", ["var_eps"], ["std"]),
             h.make_node("Div", ["centered", "std"], ["y"])]
    inits = [nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(eps, np.float32), "eps")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["n", 4])],
                         [h.make_tensor_value_info("y", F, ["n", 4])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _run(model, x):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


def test_layer_norms_epsilon_stays_and_a_constant_row_is_not_nan():
    model = _layer_norm()
    result, _ = optimize_proto(model, OptimizeOptions())
    assert "Add" in [n.op_type for n in result.graph.node]
    x = np.array([[3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    want, got = _run(model, x), _run(result, x)
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(got, want)


def _binary(op, value):
    graph = h.make_graph([h.make_node(op, ["x", "c"], ["t"]), h.make_node("Relu", ["t"], ["y"])], "g",
                         [h.make_tensor_value_info("x", F, None)], [h.make_tensor_value_info("y", F, None)],
                         [nh.from_array(np.array(value, np.float32), "c")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_near_neutral_scalars_stay_and_exact_ones_go_even_with_unknown_shapes():
    for op, value in (("Add", 1e-12), ("Sub", 5e-9), ("Mul", 1.000001), ("Div", 0.999995)):
        result, _ = optimize_proto(_binary(op, value), OptimizeOptions())
        assert [n.op_type for n in result.graph.node] == [op, "Relu"], (op, value)
    for op, value in (("Add", 0.0), ("Sub", 0.0), ("Mul", 1.0), ("Div", 1.0)):
        result, _ = optimize_proto(_binary(op, value), OptimizeOptions())
        assert [n.op_type for n in result.graph.node] == ["Relu"], (op, value)


def _layer_norm_affine():
    """A written-out LayerNorm of an untrained export: gamma all ones, beta all zeros."""
    model = _layer_norm(1e-5)
    graph = model.graph
    graph.node[-1].output[0] = "normalized"
    graph.node.extend([h.make_node("Mul", ["normalized", "gamma"], ["scaled"]),
                       h.make_node("Add", ["scaled", "beta"], ["y"])])
    graph.initializer.extend([nh.from_array(np.ones(4, np.float32), "gamma"),
                              nh.from_array(np.zeros(4, np.float32), "beta")])
    return model


def test_a_layer_norms_neutral_gamma_and_beta_stay_so_onnx_runtime_fuses_it(tmp_path):
    model = _layer_norm_affine()
    result, _ = optimize_proto(model, OptimizeOptions())
    ops = [n.op_type for n in result.graph.node]
    assert ops[-2:] == ["Mul", "Add"], ops
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "ort.onnx")
    ort.InferenceSession(result.SerializeToString(), options, providers=["CPUExecutionProvider"])
    fused = [n.op_type for n in onnx.load(str(tmp_path / "ort.onnx")).graph.node]
    assert fused == ["LayerNormalization"], fused
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(result, x), _run(model, x), rtol=1e-6, atol=1e-6)


def test_neutral_ones_elsewhere_still_go():
    graph = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("Mul", ["r", "ones"], ["t"]),
                          h.make_node("Add", ["t", "zeros"], ["u"]), h.make_node("Neg", ["u"], ["y"])], "g",
                         [h.make_tensor_value_info("x", F, [2, 4])], [h.make_tensor_value_info("y", F, [2, 4])],
                         [nh.from_array(np.ones(4, np.float32), "ones"), nh.from_array(np.zeros(4, np.float32), "zeros")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    result, _ = optimize_proto(model, OptimizeOptions())
    assert [n.op_type for n in result.graph.node] == ["Relu", "Neg"]


def _ort_graph(model, tmp_path) -> list[str]:
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "ort.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(tmp_path / "ort.onnx")).graph.node]


def _between_transposes():
    """ConvNeXt's channels-last LayerNorm: NCHW -> NHWC, LayerNorm over C, back to NCHW."""
    model = _layer_norm_affine()
    graph = model.graph
    for node in graph.node:
        node.input[:] = ["nhwc" if i == "x" else i for i in node.input]
    graph.node[-1].output[0] = "ln"
    graph.node.insert(0, h.make_node("Transpose", ["x"], ["nhwc"], perm=[0, 2, 3, 1]))
    graph.node.append(h.make_node("Transpose", ["ln"], ["y"], perm=[0, 3, 1, 2]))
    graph.input[0].CopyFrom(h.make_tensor_value_info("x", F, ["n", 4, 3, 3]))
    graph.output[0].CopyFrom(h.make_tensor_value_info("y", F, ["n", 4, 3, 3]))
    return model


def test_a_neutral_tail_onnx_runtime_would_not_fuse_goes(tmp_path):
    """Between Transposes (ORT's transpose optimizer then fuses no LayerNorm, checked here) and
    with per-channel [C, 1, 1] ones (ORT takes only a 1-D gamma and beta), the ones and zeros go."""
    model = _between_transposes()
    assert "LayerNormalization" not in _ort_graph(model, tmp_path)
    result, _ = optimize_proto(model, OptimizeOptions())
    ops = [n.op_type for n in result.graph.node]
    assert "Mul" not in ops and ops.count("Add") == 1, ops  # only the epsilon's Add is left
    assert len(_ort_graph(result, tmp_path)) < len(_ort_graph(model, tmp_path))
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(_run(result, x), _run(model, x), rtol=1e-6, atol=1e-6)

    model = _layer_norm_affine()
    for init in model.graph.initializer:
        if init.name in ("gamma", "beta"):
            init.CopyFrom(nh.from_array(nh.to_array(init).reshape(4, 1), init.name))
    model.graph.node[0].attribute[0].ints[:] = [1]  # mean over the dim [4, 1] lines up with
    model.graph.node[3].attribute[0].ints[:] = [1]
    model.graph.node[-1].output[0] = "ln"  # not the graph's output, whose name is the interface
    model.graph.node.append(h.make_node("Relu", ["ln"], ["y"]))
    model.graph.input[0].CopyFrom(h.make_tensor_value_info("x", F, ["n", 4, 1]))
    model.graph.output[0].CopyFrom(h.make_tensor_value_info("y", F, ["n", 4, 1]))
    result, _ = optimize_proto(model, OptimizeOptions())
    ops = [n.op_type for n in result.graph.node]
    assert "Mul" not in ops and ops.count("Add") == 1, ops


def _to_output(first_op="Relu", second_reader=False):
    nodes = [h.make_node(first_op, ["x"], ["r"]), h.make_node("Mul", ["r", "one"], ["y"])]
    outputs = [h.make_tensor_value_info("y", F, [2, 4])]
    if second_reader:
        nodes.append(h.make_node("Neg", ["r"], ["z"]))
        outputs.append(h.make_tensor_value_info("z", F, [2, 4]))
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [2, 4])], outputs,
                         [nh.from_array(np.array(1.0, np.float32), "one")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_neutral_node_making_a_graph_output_goes_and_its_input_takes_the_name():
    model = _to_output()
    result, _ = optimize_proto(model, OptimizeOptions())
    assert [(n.op_type, list(n.output)) for n in result.graph.node] == [("Relu", ["y"])]
    assert [o.name for o in result.graph.output] == ["y"]
    assert [d.dim_value for d in result.graph.output[0].type.tensor_type.shape.dim] == [2, 4]
    onnx.checker.check_model(result, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(_run(result, x), _run(model, x))


def test_a_graph_output_stays_where_its_input_is_read_elsewhere_or_is_an_input():
    result, _ = optimize_proto(_to_output(second_reader=True), OptimizeOptions())
    assert [n.op_type for n in result.graph.node] == ["Relu", "Mul", "Neg"]
    graph = h.make_graph([h.make_node("Mul", ["x", "one"], ["y"])], "g", [h.make_tensor_value_info("x", F, [2])],
                         [h.make_tensor_value_info("y", F, [2])], [nh.from_array(np.array(1.0, np.float32), "one")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    result, _ = optimize_proto(model, OptimizeOptions())
    assert [n.op_type for n in result.graph.node] == ["Mul"]


def _rms_norm(form: str, gamma: np.ndarray, pow_of=None):
    """An RMS norm (T5, Llama) with a scale of ones, as exporters write it: ``x / sqrt(mean(x^2) + eps)``
    (``div``), ``x * (1 / sqrt(...))`` (``div1``, torch's legacy export) or ``x * Reciprocal(sqrt(...))``
    (``reciprocal``, the dynamo exporter's)."""
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Neg", ["x"], ["b"]),
             h.make_node("Pow", [pow_of or "a", "two"], ["p"]), h.make_node("ReduceMean", ["p"], ["m"], axes=[-1]),
             h.make_node("Add", ["m", "eps"], ["v"]), h.make_node("Sqrt", ["v"], ["s"])]
    nodes += {"div": [h.make_node("Div", ["a", "s"], ["n"])],
              "div1": [h.make_node("Div", ["one", "s"], ["r"]), h.make_node("Mul", ["a", "r"], ["n"])],
              "div1r": [h.make_node("Div", ["one", "s"], ["r"]), h.make_node("Mul", ["r", "a"], ["n"])],
              "reciprocal": [h.make_node("Reciprocal", ["s"], ["r"]), h.make_node("Mul", ["r", "a"], ["n"])]}[form]
    nodes += [h.make_node("Mul", ["gamma", "n"], ["g"]), h.make_node("Add", ["g", "b"], ["y"])]
    inits = [nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1e-6, np.float32), "eps"),
             nh.from_array(np.array(1.0, np.float32), "one"), nh.from_array(gamma, "gamma")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, ["n", 3, 4])],
                         [h.make_tensor_value_info("y", F, ["n", 3, 4])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _muls(model) -> int:
    return [n.op_type for n in model.graph.node].count("Mul")


def test_an_rms_norms_scale_of_ones_stays_so_onnx_runtime_fuses_it(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for form in ("div", "div1", "div1r"):
        model = _rms_norm(form, np.ones(4, np.float32))
        assert "SimplifiedLayerNormalization" in _ort_graph(model, tmp_path)
        result, _ = optimize_proto(model, OptimizeOptions())
        assert _muls(result) == _muls(model), form
        assert "SimplifiedLayerNormalization" in _ort_graph(result, tmp_path)
        np.testing.assert_allclose(_run(result, x), _run(model, x), rtol=1e-6, atol=1e-6)


def test_an_rms_norms_scale_of_ones_goes_where_onnx_runtime_would_not_fuse_it(tmp_path):
    """A [1, 1, 4] scale, the Reciprocal form, or a Pow of another value than the one normalized:
    ORT fuses none of them (checked), and the Mul by ones goes."""
    cases = [("div", np.ones((1, 1, 4), np.float32), None), ("div1", np.ones((1, 1, 4), np.float32), None),
             ("reciprocal", np.ones(4, np.float32), None), ("div", np.ones(4, np.float32), "b"),
             ("div1", np.ones(4, np.float32), "b")]
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for form, gamma, pow_of in cases:
        model = _rms_norm(form, gamma, pow_of)
        assert "SimplifiedLayerNormalization" not in _ort_graph(model, tmp_path)
        result, _ = optimize_proto(model, OptimizeOptions())
        assert _muls(result) == _muls(model) - 1, (form, gamma.shape, pow_of)
        np.testing.assert_allclose(_run(result, x), _run(model, x), rtol=1e-6, atol=1e-6)
