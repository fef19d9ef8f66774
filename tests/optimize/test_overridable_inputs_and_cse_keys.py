"""Optimizer: overridable initializers, CSE of tensor constants.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

Each test checks the rewriter's result against an independent oracle (ONNX Runtime run on
the original model, with the same feeds), never against the rewriter itself.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.optimize import OptimizeOptions, optimize_proto
from rewriter.optimize.constant_folding import FoldConstantsPass
from rewriter.optimize.cse import CommonSubexpressionEliminationPass
from rewriter.passes import FoldConstantsPass as PublicFoldConstantsPass

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _fold_alone(model: onnx.ModelProto, cls=FoldConstantsPass) -> onnx.ModelProto:
    """The standalone fold pass (not the optimize pipeline, which hides overridables itself)."""
    m = ir.serde.deserialize_model(model)
    cls()(m)
    out = ir.serde.serialize_model(m)
    onnx.checker.check_model(out, full_check=True)
    return out


def _reshape_with_overridable_shape(data_is_initializer: bool) -> onnx.ModelProto:
    """y = Reshape(x, shape), where 'shape' = {2, 3} is an initializer AND a graph input."""
    x_value = np.arange(6, dtype=np.float32).reshape(2, 3)
    shape_init = nh.from_array(np.array([2, 3], dtype=np.int64), "shape")
    inputs = [h.make_tensor_value_info("shape", I64, [2])]
    inits = [shape_init]
    if data_is_initializer:
        inits.append(nh.from_array(x_value, "x"))  # a constant not in the inputs: needs IR >= 4
    else:
        inputs.insert(0, h.make_tensor_value_info("x", F, [2, 3]))
    graph = h.make_graph([h.make_node("Reshape", ["x", "shape"], ["y"])], "g", inputs,
                         [h.make_tensor_value_info("y", F, ["r", "c"])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _assert_override_still_works(original: onnx.ModelProto, folded: onnx.ModelProto, feeds: dict) -> None:
    override = np.array([3, 2], dtype=np.int64)
    for shape in (None, override):
        f = dict(feeds)
        if shape is not None:
            f["shape"] = shape
        want = _ort(original, f)
        got = _ort(folded, f)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert w.shape == g.shape, (shape, w.shape, g.shape)
            np.testing.assert_array_equal(g, w)
    # ORT on the original itself: the override is honoured (the oracle's own premise)
    assert _ort(original, {**feeds, "shape": override})[0].shape == (3, 2)


def test_fold_pass_alone_keeps_reshape_of_constant_data_with_an_overridable_shape():
    """Both inputs of Reshape are initializers, but 'shape' is also a graph input: folding the
    Reshape to a constant would ignore a shape fed at run time."""
    model = _reshape_with_overridable_shape(data_is_initializer=True)
    for cls in (FoldConstantsPass, PublicFoldConstantsPass):
        folded = _fold_alone(model, cls)
        assert "Reshape" in _ops(folded), _ops(folded)
        assert [i.name for i in folded.graph.input] == ["shape"]
        _assert_override_still_works(model, folded, {})


def test_fold_pass_alone_keeps_identity_looking_reshape_with_an_overridable_shape():
    """x is [2, 3] and the default shape is {2, 3}: the Reshape looks like a no-op only if
    the overridable shape is read as a constant."""
    model = _reshape_with_overridable_shape(data_is_initializer=False)
    folded = _fold_alone(model)
    assert "Reshape" in _ops(folded), _ops(folded)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _assert_override_still_works(model, folded, {"x": x})


def test_fold_pass_alone_restores_the_hidden_initializer_values():
    """The values hidden during the walk come back: the initializer keeps its data."""
    model = _reshape_with_overridable_shape(data_is_initializer=True)
    folded = _fold_alone(model)
    inits = {t.name: nh.to_array(t) for t in folded.graph.initializer}
    np.testing.assert_array_equal(inits["shape"], [2, 3])


def test_fold_pass_alone_still_folds_a_reshape_of_plain_constants():
    """Control: without the graph input, the same Reshape is a constant and is folded."""
    model = _reshape_with_overridable_shape(data_is_initializer=True)
    del model.graph.input[:]
    onnx.checker.check_model(model, full_check=True)
    folded = _fold_alone(model)
    assert "Reshape" not in _ops(folded)
    np.testing.assert_array_equal(_ort(folded, {})[0], _ort(model, {})[0])


# ------------------------------------------------------------------ CSE of tensor constants

def _two_constants_same_bytes_other_shapes(ir_version: int = 8) -> onnx.ModelProto:
    """a = x + float[2] {1, 2}; b = x + float[2, 1] {1, 2}: same dtype and bytes, other shapes.
    Broadcasting against x: float[2] gives [[1, 2], [1, 2]]-like rows, float[2, 1] columns."""
    c1 = h.make_node("Constant", [], ["c1"], value=nh.from_array(np.array([1, 2], np.float32), "v1"))
    c2 = h.make_node("Constant", [], ["c2"], value=nh.from_array(np.array([[1], [2]], np.float32), "v2"))
    nodes = [c1, c2, h.make_node("Add", ["x", "c1"], ["a"]), h.make_node("Add", ["x", "c2"], ["b"]),
             h.make_node("Sub", ["a", "b"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [2, 2])],
                         [h.make_tensor_value_info("y", F, [2, 2]), h.make_tensor_value_info("a", F, [2, 2]),
                          h.make_tensor_value_info("b", F, [2, 2])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=ir_version)
    onnx.checker.check_model(model, full_check=True)
    return model


def _assert_matches_ort(original: onnx.ModelProto, result: onnx.ModelProto) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 2)).astype(np.float32)
    want, got = _ort(original, {"x": x}), _ort(result, {"x": x})
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.shape == g.shape
        np.testing.assert_array_equal(g, w)
    # the premise: the two constants really broadcast differently
    assert not np.array_equal(want[0], np.zeros((2, 2), np.float32))


def test_optimize_keeps_constants_with_equal_bytes_but_different_shapes_apart():
    for ir_version in (8, 3):  # IR 3: the constants stay Constant nodes to the end
        model = _two_constants_same_bytes_other_shapes(ir_version)
        if ir_version == 3:
            model.opset_import[0].version = 8
            onnx.checker.check_model(model, full_check=True)
        result, _ = optimize_proto(model, OptimizeOptions())
        onnx.checker.check_model(result, full_check=True)
        _assert_matches_ort(model, result)


def test_cse_pass_alone_keeps_constants_with_equal_bytes_but_different_shapes_apart():
    model = _two_constants_same_bytes_other_shapes()
    m = ir.serde.deserialize_model(model)
    cse = CommonSubexpressionEliminationPass()
    cse(m)
    assert cse.count == 0
    result = ir.serde.serialize_model(m)
    onnx.checker.check_model(result, full_check=True)
    assert _ops(result).count("Constant") == 2
    _assert_matches_ort(model, result)


def test_cse_pass_alone_merges_truly_equal_constants():
    """Control: same shape, dtype and bytes are merged, and the result still matches ORT."""
    model = _two_constants_same_bytes_other_shapes()
    model.graph.node[1].attribute[0].t.CopyFrom(nh.from_array(np.array([1, 2], np.float32), "v2"))
    m = ir.serde.deserialize_model(model)
    cse = CommonSubexpressionEliminationPass()
    cse(m)
    assert cse.count >= 1
    result = ir.serde.serialize_model(m)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 2)).astype(np.float32)
    for w, g in zip(_ort(model, {"x": x}), _ort(result, {"x": x})):
        np.testing.assert_array_equal(g, w)


def test_a_node_a_rewrite_makes_in_anothers_place_keeps_its_name():
    """Flatten of a static shape becomes a Reshape: the node that makes the output keeps the name."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from rewriter import optimize_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 1, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="/relu"),
                               helper.make_node("Flatten", ["r"], ["y"], name="/Flatten")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = optimize_model(model)
    maker = next(n for n in result.graph.node if "y" in n.output)
    assert maker.name == "/Flatten", [(n.op_type, n.name) for n in result.graph.node]
    assert all(n.name for n in result.graph.node)
    import onnxruntime as ort

    feeds = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3, 1, 1)}
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]  # noqa: E731
    np.testing.assert_array_equal(run(result), run(model))


def test_conv_and_batchnorm_with_constant_node_parameters_fuse_in_one_run():
    """Paddle exports give Conv and BatchNormalization their parameters by Constant nodes."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from rewriter import optimize_model

    rng = np.random.default_rng(0)
    consts = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
              "scale": rng.uniform(0.5, 1.5, 4).astype(np.float32), "bias": rng.standard_normal(4).astype(np.float32),
              "mean": rng.standard_normal(4).astype(np.float32), "var": rng.uniform(0.5, 1.5, 4).astype(np.float32)}
    nodes = [helper.make_node("Constant", [], [k], value=numpy_helper.from_array(v), name=f"c_{k}")
             for k, v in consts.items()]
    nodes += [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
              helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], name="bn")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    once = optimize_model(model)
    assert [n.op_type for n in once.graph.node] == ["Conv"]
    assert [n.op_type for n in optimize_model(once).graph.node] == ["Conv"]  # nothing left for a second run
    x = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]  # noqa: E731
    np.testing.assert_allclose(run(once), run(model), rtol=1e-4, atol=1e-5)
