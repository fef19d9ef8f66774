"""Inputs that must become attributes going down, computed in the graph but decided by static
shapes and constants (``Range(0, Size(Shape(x)))``, ``Slice(Shape(x))``, ...): evaluated with
onnx.reference and moved like constants; the nodes that computed them go when nobody else reads
them. A value known only at run time still blocks (tests/convert/test_axes_moves.py).

Oracles: ONNX Runtime on the original and the result, the checker with full_check."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from tests.oracle import assert_valid, run

F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(nodes, opset, outputs, inits):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3, 4])],
                              [helper.make_tensor_value_info(n, F, s) for n, s in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _rms_axes(axis):
    """RMSNormalization's own way: axes = Range(axis, rank) with rank = Size(Shape(x))."""
    return [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
            helper.make_node("Size", ["shape"], ["rank"], name="rank"),
            helper.make_node("Range", ["start", "rank", "one"], ["axes"], name="range")], \
        [_ints("start", axis), _ints("one", 1)]


@pytest.mark.parametrize("target", [11, 13, 17])
@pytest.mark.parametrize("axis", [1, 2])
def test_reduce_mean_axes_from_the_rank(target, axis):
    nodes, inits = _rms_axes(axis)
    inits[0] = numpy_helper.from_array(np.array(axis, np.int64), "start")
    inits[1] = numpy_helper.from_array(np.array(1, np.int64), "one")
    nodes.append(helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean", keepdims=1))
    out = [2, 3, 4][:axis] + [1] * (3 - axis)
    model = _model(nodes, 18, [("y", out)], inits)
    converted, _ = convert_model(model, target)
    assert_valid(converted)
    np.testing.assert_allclose(run(converted, {"x": X})[0], run(model, {"x": X})[0], rtol=1e-6)
    assert [n.op_type for n in converted.graph.node] == ["ReduceMean"]  # the computation went too


def test_split_sizes_and_unsqueeze_axes_from_the_shape():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "b0", "b1"], ["first"], name="first"),  # [2]
             helper.make_node("Concat", ["first", "first"], ["sizes"], name="sizes", axis=0),  # [2, 2]
             helper.make_node("Split", ["x", "sizes"], ["p", "q"], name="split", axis=2),
             helper.make_node("Sub", ["first", "one"], ["ax"], name="ax"),  # [1]
             helper.make_node("Unsqueeze", ["p", "ax"], ["u"], name="unsq")]
    model = _model(nodes, 13, [("u", [2, 1, 3, 2]), ("q", [2, 3, 2])],
                   [_ints("b0", [0]), _ints("b1", [1]), _ints("one", [1])])
    converted, _ = convert_model(model, 11)
    assert_valid(converted)
    for got, want in zip(run(converted, {"x": X}), run(model, {"x": X})):
        np.testing.assert_array_equal(got, want)
    attrs = {n.op_type: {a.name: list(a.ints) for a in n.attribute} for n in converted.graph.node}
    assert attrs["Split"]["split"] == [2, 2] and attrs["Unsqueeze"]["axes"] == [1]
    assert [n.op_type for n in converted.graph.node] == ["Split", "Unsqueeze"]  # nobody reads the rest


# ---------------------------------------------------------------- ranks behind computed Reshapes

def _detection_like(opset: int) -> onnx.ModelProto:
    """As torch's legacy exporter writes ``p = conv(x).flatten(2).transpose(1, 2); box, score = p.split(...,
    dim=-1); score.sigmoid().amax(-1)``: Reshape to Concat(Slice(Shape(y)), [-1]), whose rank ONNX's
    inference leaves unknown, then negative axes that going below 11 need the rank for."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
             helper.make_node("Shape", ["y"], ["s"], name="shape"),
             helper.make_node("Constant", [], ["c0"], name="c0", value=numpy_helper.from_array(np.array([0], np.int64))),
             helper.make_node("Constant", [], ["c2"], name="c2", value=numpy_helper.from_array(np.array([2], np.int64))),
             helper.make_node("Slice", ["s", "c0", "c2", "c0"], ["lead"], name="lead"),
             helper.make_node("Constant", [], ["m1"], name="m1", value=numpy_helper.from_array(np.array([-1], np.int64))),
             helper.make_node("Concat", ["lead", "m1"], ["target"], name="target", axis=0),
             helper.make_node("Reshape", ["y", "target"], ["flat"], name="flat"),
             helper.make_node("Transpose", ["flat"], ["t"], name="t", perm=[0, 2, 1]),
             helper.make_node("Split", ["t"], ["box", "score"], name="split", axis=-1, split=[2, 1]),
             helper.make_node("Sigmoid", ["score"], ["sig"], name="sig"),
             helper.make_node("ReduceMax", ["sig"], ["best"], name="best", axes=[-1], keepdims=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("box", F, [1, 16, 2]),
                               helper.make_tensor_value_info("best", F, [1, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 6
    return model


def test_onnx_inference_alone_leaves_the_rank_unknown():
    inferred = onnx.shape_inference.infer_shapes(_detection_like(11), data_prop=True)
    typed = {v.name for v in inferred.graph.value_info if v.type.tensor_type.HasField("shape")}
    assert "flat" not in typed and "t" not in typed  # the premise of the next test


@pytest.mark.parametrize("target", [9, 10])
def test_negative_axes_below_11_behind_a_computed_reshape(target):
    from rewriter.graph.inferred import infer_with_static_shapes

    model = _detection_like(11)
    inferred = infer_with_static_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in inferred.graph.value_info}
    assert shapes["flat"] == [1, 3, 16] and shapes["t"] == [1, 16, 3]
    converted, _ = convert_model(model, target)
    onnx.checker.check_model(converted, full_check=True)
    attrs = {n.name: {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in converted.graph.node}
    assert attrs["split"]["axis"] == 2 and attrs["best"]["axes"] == [2]  # normalized with the rank
    x = np.random.default_rng(1).standard_normal([1, 3, 4, 4]).astype(np.float32)
    for got, want in zip(run(converted, {"x": x}), run(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------- ops the target lacks, on constants

def test_an_op_the_target_lacks_on_constant_inputs_becomes_its_value():
    """As torch's legacy exporter writes a head split: Slice ends = Reshape(Mod(c4, c5)); Mod does
    not exist below 10 and has no function body, but its inputs are constants."""
    const = lambda name, v: helper.make_node("Constant", [], [name], name=name,  # noqa: E731
                                             value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [const("c4", 7), const("c5", 4), helper.make_node("Mod", ["c4", "c5"], ["m"], name="mod"),
             const("one", [1]), helper.make_node("Reshape", ["m", "one"], ["end"], name="end"),
             const("zero", [0]), const("ax", [2]),
             helper.make_node("Slice", ["x", "zero", "end", "ax"], ["y"], name="slice")]
    model = _model(nodes, 13, [("y", [2, 3, 3])], [])
    converted, report = convert_model(model, 9)
    assert_valid(converted)
    assert report.changes["Mod of constant inputs -> Constant"] == 1 and report.steps[("Mod", "evaluated")] == 1
    assert "Mod" not in {n.op_type for n in converted.graph.node}
    np.testing.assert_array_equal(run(converted, {"x": X})[0], run(model, {"x": X})[0])


def test_an_op_the_target_lacks_on_a_large_or_computed_input_still_blocks():
    from rewriter.convert.planner import ConversionBlocked

    big = [helper.make_node("Constant", [], ["shape"], name="shape",
                            value=numpy_helper.from_array(np.array([100, 100], np.int64))),
           helper.make_node("ConstantOfShape", ["shape"], ["big"], name="big"),
           helper.make_node("ReduceSum", ["big"], ["s"], name="sum", keepdims=0),
           helper.make_node("Add", ["x", "s"], ["y"], name="add")]
    with pytest.raises(ConversionBlocked, match="'big'.*ConstantOfShape expand"):
        convert_model(_model(big, 13, [("y", [2, 3, 4])], []), 8)  # 10,000 values: not written out
    computed = [helper.make_node("Shape", ["x"], ["s"], name="s"),
                helper.make_node("Relu", ["x"], ["r"], name="relu"),
                helper.make_node("Where", ["c", "x", "r"], ["y"], name="where")]
    graph = helper.make_graph(computed, "g", [helper.make_tensor_value_info("x", F, [2, 3, 4]),
                                              helper.make_tensor_value_info("c", TensorProto.BOOL, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", F, [2, 3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ConversionBlocked, match="'where'.*Where expand"):
        convert_model(model, 8)


# ---------------------------------------------------------------- static inputs: dims that stay symbolic

def _framing(n):
    """onnx-asr's wespeaker framing: x [1, n] sliced to n - (n - 400) % 160 samples from 240 and
    reshaped to [0, -1, 160]; the Slice's end needs Mod, and ONNX's inference leaves its dims symbolic."""
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["n1"], start=1, end=2), helper.make_node("Squeeze", ["n1"], ["n"]),
             helper.make_node("Sub", ["n", "win"], ["over"]), helper.make_node("Mod", ["over", "hop"], ["rest"]),
             helper.make_node("Sub", ["n", "rest"], ["keep"]), helper.make_node("Unsqueeze", ["keep", "zero"], ["end"]),
             helper.make_node("Slice", ["x", "start", "end", "one"], ["kept"]),
             helper.make_node("Reshape", ["kept", "frames"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [i64("win", 400), i64("hop", 160), i64("zero", [0]), i64("one", [1]), i64("start", [240]),
                               i64("frames", [0, -1, 160])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_static_inputs_decide_dims_inference_leaves_symbolic():
    from rewriter.graph.inferred import infer_with_static_shapes

    dims = lambda m, name: [d.dim_value if d.HasField("dim_value") else d.dim_param  # noqa: E731
                            for v in [*m.graph.value_info, *m.graph.output] if v.name == name
                            for d in v.type.tensor_type.shape.dim]
    plain = onnx.shape_inference.infer_shapes(_framing(16000), data_prop=True)
    assert not all(isinstance(d, int) for d in dims(plain, "y"))  # (what ONNX's inference alone leaves)
    inferred = infer_with_static_shapes(_framing(16000))
    assert dims(inferred, "kept") == [1, 15680] and dims(inferred, "y") == [1, 98, 160]
    y = run(_framing(16000), {"x": np.zeros((1, 16000), np.float32)})[0]
    assert list(y.shape) == [1, 98, 160]
    symbolic = _framing("n")
    assert not all(isinstance(d, int) for d in dims(infer_with_static_shapes(symbolic), "y"))


def test_a_value_decided_keeps_its_shape_where_the_model_declares_only_its_type():
    """onnxruntime-genai's builder declares its scalars with an element type only; such a value
    decided by static dims (the framing's "n", a Squeeze of a dim) is described by its array, a
    scalar, not by the declaration the copy kept (TVM's Reshape of a scalar to [1] is found so)."""
    from rewriter.graph.inferred import infer_with_static_shapes

    model = _framing(16000)
    model.graph.value_info.append(helper.make_tensor_value_info("n", TensorProto.INT64, None))
    model.graph.value_info.append(helper.make_tensor_value_info("keep", TensorProto.INT64, None))
    inferred = infer_with_static_shapes(model)
    typed = {v.name: v.type.tensor_type for v in inferred.graph.value_info}
    for name in ("n", "keep"):
        assert typed[name].elem_type == TensorProto.INT64 and typed[name].HasField("shape"), name
        assert len(typed[name].shape.dim) == 0, name
    assert sum(v.name == "n" for v in inferred.graph.value_info) == 1
    assert [d.dim_value for v in inferred.graph.value_info if v.name == "kept" for d in v.type.tensor_type.shape.dim] \
        == [1, 15680]


def test_a_scan_over_those_frames_is_unrolled_with_static_inputs():
    from rewriter.convert.for_target import convert_for

    model = _framing(2000)  # (2000 - 240) / 160 = 11 frames
    f = TensorProto.FLOAT
    body = helper.make_graph([helper.make_node("Add", ["s", "frame"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
                             "body", [helper.make_tensor_value_info("s", f, [1, 160]),
                                      helper.make_tensor_value_info("frame", f, [1, 160])],
                             [helper.make_tensor_value_info("s2", f, [1, 160]), helper.make_tensor_value_info("o", f, [1, 160])])
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 160), np.float32), "s0"))
    model.graph.node.append(helper.make_node("Scan", ["s0", "y"], ["total", "sums"], name="scan", body=body,
                                             num_scan_inputs=1, scan_input_axes=[1], scan_output_axes=[1]))
    del model.graph.output[:]
    model.graph.output.extend([helper.make_tensor_value_info("total", f, [1, 160]),
                               helper.make_tensor_value_info("sums", f, [1, 11, 160])])
    result, report = convert_for(model, runtime="tvm==0.27")
    assert report.decomposed["Scan"] == 1
    x = {"x": np.random.default_rng(0).standard_normal((1, 2000)).astype(np.float32)}
    for got, want in zip(run(result, x), run(model, x), strict=True):
        np.testing.assert_array_equal(got, want)
