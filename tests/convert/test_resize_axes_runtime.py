"""Resize 18 -> 13 with ``axes`` and roi/scales/sizes computed at run time: the converted model
scatters them over every dim (ScatterElements), and ONNX Runtime gives what it gives on the
original model (the oracle: the original Resize-18/19 with axes, run as it is)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model
from rewriter.convert.planner import ConversionBlocked

F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = np.random.default_rng(0).normal(size=[2, 3, 4, 5]).astype(np.float32)
SCALES = {2: [2.0, 1.5], 3: [0.6, 2.5]}  # per axis of X: dim 2 = 4, dim 3 = 5
SIZES = {2: 7, 3: 3}


def _model(opset, nodes, inputs, x_shape=(2, 3, 4, 5), initializers=(), valid=True):
    """A model around ``nodes`` (reading "x", writing "y"). ``x_shape`` None: x of a rank known only
    at run time, Reshape(xs, k) (a graph input needs a shape), and y flattened (a graph output too)."""
    nodes, outputs = list(nodes), [helper.make_tensor_value_info("y", F, None)]
    if x_shape is None:
        nodes.insert(0, helper.make_node("Reshape", ["xs", "k"], ["x"]))
        for n in nodes:
            n.output[:] = [o if o != "y" else "y_any_rank" for o in n.output]
        nodes.append(helper.make_node("Reshape", ["y_any_rank", "flat"], ["y"]))
        initializers = [*initializers, helper.make_tensor("flat", I64, [1], [-1])]
        inputs = [("xs", F, ["n"]), ("k", I64, ["r"]), *inputs]
    else:
        inputs = [("x", F, list(x_shape)), *inputs]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs], outputs,
                              initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    if valid:
        onnx.checker.check_model(m, full_check=True)  # the oracle's model is valid
    return m


def _feeds(x, **others):
    """Feeds for x given as it is and as Reshape(xs, k) (rank unknown)."""
    return {"x": x, "xs": x.reshape(-1), "k": np.array(x.shape, np.int64), **others}


def _run(m, feeds):
    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _opset(m):
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def _converts(m, target, feeds):
    """Convert ``m``: valid at ``target``, no Resize with axes left, ONNX Runtime's outputs
    those of the original. Returns the result."""
    result, _ = convert_model(m, target)
    onnx.checker.check_model(result, full_check=True)
    assert _opset(result) == target
    resizes = [n for n in result.graph.node if n.op_type == "Resize"]
    assert len(resizes) == 1 and not any(a.name == "axes" for a in resizes[0].attribute)
    expected, got = _run(m, feeds), _run(result, feeds)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
    return result


def _ops(m):
    return [n.op_type for n in m.graph.node]


AXES = [[2, 3], [3, 2], [-1, -2], [3], [-2]]


def _dims(axes):
    return [a % 4 for a in axes]


@pytest.mark.parametrize("opset", [18, 19])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("axes", AXES, ids=str)
def test_scales_graph_input(opset, mode, axes):
    scales = np.array([SCALES[d][0] for d in _dims(axes)], np.float32)
    m = _model(opset, [helper.make_node("Resize", ["x", "", "s"], ["y"], name="r", axes=axes, mode=mode)],
               [("s", F, [len(axes)])])
    feeds = {"x": X, "s": scales}
    for target in (13, 11):
        result = _converts(m, target, feeds)
        assert "ScatterElements" in _ops(result)
    # other values of the same input: the scales are really read at run time
    _converts(m, 13, {"x": X, "s": np.array([SCALES[d][1] for d in _dims(axes)], np.float32)})


@pytest.mark.parametrize("opset", [18, 19])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("axes", AXES, ids=str)
def test_sizes_graph_input(opset, mode, axes):
    m = _model(opset, [helper.make_node("Resize", ["x", "", "", "z"], ["y"], name="r", axes=axes, mode=mode)],
               [("z", I64, [len(axes)])])
    for target in (13, 11):
        result = _converts(m, target, {"x": X, "z": np.array([SIZES[d] for d in _dims(axes)], np.int64)})
        assert {"Shape", "ScatterElements"} <= set(_ops(result))
    _converts(m, 13, {"x": X, "z": np.array([9 - SIZES[d] for d in _dims(axes)], np.int64)})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_scales_and_sizes_computed_by_a_node(mode):
    # scales = f * [1, 2], sizes = Concat(z, [6]): both made by a node of the graph
    scaled = _model(19, [helper.make_node("Mul", ["f", "two"], ["s"]),
                         helper.make_node("Resize", ["x", "", "s"], ["y"], name="r", axes=[3, 2], mode=mode)],
                    [("f", F, [2])], initializers=[helper.make_tensor("two", F, [2], [1.0, 2.0])])
    sized = _model(18, [helper.make_node("Concat", ["z", "six"], ["s"], axis=0),
                        helper.make_node("Resize", ["x", "", "", "s"], ["y"], name="r", axes=[-2, -1], mode=mode)],
                   [("z", I64, [1])], initializers=[helper.make_tensor("six", I64, [1], [6])])
    for target in (13, 11):
        _converts(scaled, target, {"x": X, "f": np.array([1.5, 0.75], np.float32)})
        _converts(sized, target, {"x": X, "z": np.array([3], np.int64)})


def test_dynamic_dims_and_unknown_rank():
    scales = helper.make_node("Resize", ["x", "", "s"], ["y"], name="r", axes=[3, 2], mode="linear")
    sizes = helper.make_node("Resize", ["x", "", "", "z"], ["y"], name="r", axes=[2, 3], mode="nearest")
    dynamic = _model(19, [sizes], [("z", I64, [2])], x_shape=["n", 3, "h", "w"])
    unknown_scales = _model(19, [scales], [("s", F, [2])], x_shape=None)
    unknown_sizes = _model(19, [sizes], [("z", I64, [2])], x_shape=None)
    feeds_s = _feeds(X, s=np.array([2.0, 1.5], np.float32))
    feeds_z = _feeds(X, z=np.array([5, 8], np.int64))
    for target in (13, 11):
        _converts(dynamic, target, feeds_z)
        result = _converts(unknown_scales, target, feeds_s)
        assert "ConstantOfShape" in _ops(result)  # ones of a rank known only at run time
        _converts(unknown_sizes, target, feeds_z)
    # the same model on a tensor of another rank: the rank really is read at run time
    x5 = np.random.default_rng(1).normal(size=[1, 2, 3, 4, 2]).astype(np.float32)
    _converts(unknown_scales, 13, _feeds(x5, s=np.array([2.0, 1.5], np.float32)))
    _converts(unknown_sizes, 13, _feeds(x5, z=np.array([5, 8], np.int64)))


@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), None], ids=["rank known", "rank unknown"])
def test_computed_roi(x_shape):
    crop = helper.make_node("Resize", ["x", "roi", "", "z"], ["y"], name="r", axes=[3, 2], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0)
    m = _model(19, [crop], [("roi", F, [4]), ("z", I64, [2])], x_shape=x_shape)
    feeds = _feeds(X, roi=np.array([0.1, 0.2, 0.9, 1.2], np.float32), z=np.array([6, 5], np.int64))
    for target in (13, 11):
        _converts(m, target, feeds)
    # a roi that the mode does not read goes
    unread = helper.make_node("Resize", ["x", "roi", "s"], ["y"], name="r", axes=[2, 3], mode="linear")
    m = _model(19, [unread], [("roi", F, [4]), ("s", F, [2])], x_shape=x_shape)
    feeds = _feeds(X, roi=np.array([0.1, 0.2, 0.9, 1.2], np.float32), s=np.array([2.0, 0.5], np.float32))
    result = _converts(m, 13, feeds)
    assert next(n for n in result.graph.node if n.op_type == "Resize").input[1] == ""


def test_constant_inputs_still_constants():
    m = _model(19, [helper.make_node("Resize", ["x", "", "s"], ["y"], name="r", axes=[3, 2])], [],
               initializers=[helper.make_tensor("s", F, [2], [2.0, 1.5])])
    result = _converts(m, 13, {"x": X})
    assert _ops(result) == ["Resize"]
    assert onnx.numpy_helper.to_array(result.graph.initializer[0]).tolist() == [1.0, 1.0, 1.5, 2.0]


def _blocked(m, target, *fragments):
    with pytest.raises(ConversionBlocked) as info:
        convert_model(m, target)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_refusals():
    negative = _model(19, [helper.make_node("Resize", ["x", "", "s"], ["y"], name="r", axes=[-1, 2])],
                      [("s", F, [2])], x_shape=None)
    _blocked(negative, 13, "'r'", "Resize 18 -> 13", "negative axes [-1, 2]", "rank of 'x' unknown")
    policy = _model(19, [helper.make_node("Resize", ["x", "", "", "z"], ["y"], name="r", axes=[2, 3],
                                          keep_aspect_ratio_policy="not_larger")], [("z", I64, [2])])
    _blocked(policy, 13, "'r'", "keep_aspect_ratio_policy='not_larger'")
    both = _model(19, [helper.make_node("Resize", ["x", "", "s", "z"], ["y"], name="r", axes=[2, 3])],
                  [("s", F, ["m"]), ("z", I64, [2])], valid=False)  # one of them must be empty
    _blocked(both, 13, "'r'", "scales 's' and sizes 'z' both given")
