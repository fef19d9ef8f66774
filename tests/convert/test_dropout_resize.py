"""Dropout (6, 7, 10, 12), ArgMax/ArgMin (12), Upsample (7, 9) and Resize (10, 11, 13, 18, 19):
own adapters both ways, refusals and the official backend cases."""

from __future__ import annotations

import onnx
import pytest

from rewriter.convert import registry, steps
from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, convert_model, helper, model, np,
                                        reference, refused, run_backend_case)
from tests.convert.support.moves_util import constantized

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
X = np.random.default_rng(0).normal(size=[2, 3, 4]).astype(np.float32)
OPS = ["Dropout", "ArgMax", "ArgMin", "Upsample", "Resize"]


def test_every_step_is_own_or_type_only_both_ways():
    for op in OPS:
        versions = registry.schema_versions(op)
        for a, b in zip(versions, versions[1:]):
            for x, y in ((a, b), (b, a)):
                assert steps.step_kind(op, x, y) in ("own", "type-only"), (op, x, y)


# ---------------------------------------------------------------- Dropout

def _dropout(opset, inputs=(), init=(), mask=None, **attrs):
    outs = ["y"] + (["m"] if mask else [])
    out_info = [("y", F, [2, 3, 4])] + ([("m", mask, [2, 3, 4])] if mask else [])
    return model([helper.make_node("Dropout", ["x", *inputs], outs, name="d", **attrs)], opset,
                 [("x", F, [2, 3, 4])], out_info, initializers=list(init))


@pytest.mark.parametrize("target", [10, 7, 6, 1])
def test_dropout_12_down(target):
    init = [helper.make_tensor("r", F, [], [0.3]), helper.make_tensor("t", B, [], [False])]
    m = _dropout(13, ["r", "t"], init, seed=3)
    if target >= 7:
        result, _ = converts(m, target, {"x": X}, expected=[X])
    else:  # no runtime has Dropout below 7
        result, _ = convert_model(m, target)
    node = result.graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert list(node.input) == ["x"] and abs(attrs["ratio"] - 0.3) < 1e-7 and "seed" not in attrs
    assert attrs.get("is_test") == (1 if target < 7 else None)
    assert not result.graph.initializer


def test_dropout_mask_down_is_all_true_and_up_keeps_the_types():
    m = _dropout(13, mask=B)
    for target in (10, 7):
        result, _ = converts(m, target, {"x": X}, expected=[X, np.ones([2, 3, 4], bool)])
        assert "m" not in result.graph.node[0].output
    m7 = _dropout(7, mask=F)
    result, _ = converts(m7, 10, {"x": X})  # the float mask is cast from / to bool
    assert [n.op_type for n in result.graph.node] == ["Dropout", "Cast"]
    refused(m7, 12, "'d'", "Dropout 10 -> 12", "mask output", "is used", "targets 10..11")


def test_dropout_refusals():
    m = _dropout(13, ["r", "t"], [helper.make_tensor("r", F, [], [0.3]), helper.make_tensor("t", B, [], [True])])
    refused(m, 11, "'d'", "Dropout 12 -> 10", "training_mode input 't' is true")
    zero = _dropout(13, ["r", "t"], [helper.make_tensor("r", F, [], [0.0]), helper.make_tensor("t", B, [], [True])])
    converts(zero, 11, {"x": X}, expected=[X])
    computed = model([helper.make_node("Dropout", ["x", "r"], ["y"], name="d")], 13,
                     [("x", F, [2, 3, 4]), ("r", F, [])], [("y", F, [2, 3, 4])])
    refused(computed, 11, "'d'", "ratio input 'r' is not a constant")


def test_dropout_up_from_6():
    m = model([helper.make_node("Dropout", ["x"], ["y"], name="d", is_test=1, ratio=0.2)], 6,
              [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])])
    result, _ = converts(m, LATEST, {"x": X}, expected=[X])
    assert len(result.graph.node[0].input) == 2 and not result.graph.node[0].attribute


# ---------------------------------------------------------------- ArgMax / ArgMin

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims", [(1, 1), (-1, 0), (0, 1)])
def test_select_last_index_becomes_reversed_data(op, axis, keepdims):
    x = np.random.default_rng(2).integers(0, 3, size=[3, 4, 5]).astype(np.float32)  # many ties
    m = model([helper.make_node(op, ["x"], ["y"], name="a", axis=axis, keepdims=keepdims, select_last_index=1)],
              13, [("x", F, [3, 4, 5])], [("y", I64, None)])
    for target in (11, 10, 7):  # below 10 the reversing Slice becomes a Gather (static dims)
        result, _ = converts(m, target, {"x": x})
        assert next(n for n in result.graph.node if "y" in n.output).name == "a"
    plain = model([helper.make_node(op, ["x"], ["y"], name="a", axis=axis, select_last_index=0)], 13,
                  [("x", F, [3, 4, 5])], [("y", I64, None)])
    result, _ = converts(plain, 7, {"x": x})
    assert [n.op_type for n in result.graph.node] == [op]


def test_select_last_index_with_a_dynamic_dim():
    x = np.array([[1, 3, 3, 0], [2, 2, 1, 2]], dtype=np.float32)
    m = model([helper.make_node("ArgMax", ["x"], ["y"], name="a", axis=1, select_last_index=1)], 13,
              [("x", F, ["n", "d"])], [("y", I64, ["n", 1])])
    converts(m, 11, {"x": x}, expected=[np.array([[2], [3]], dtype=np.int64)])
    refused(m, 9, "Slice 10 -> 1", "steps", "size of axis 1")


# ---------------------------------------------------------------- Upsample / Resize

def test_upsample_9_down_to_7_and_1_and_back():
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    m = model([helper.make_node("Upsample", ["x", "s"], ["y"], name="u", mode="nearest")], 9,
              [("x", F, [1, 2, 2, 2])], [("y", F, None)],
              initializers=[helper.make_tensor("s", F, [4], [1, 1, 2, 3])])
    down, _ = converts(m, 7, {"x": x})
    assert list(down.graph.node[0].input) == ["x"]
    one, _ = convert_model(m, 1)
    attrs = {a.name for a in one.graph.node[0].attribute}
    assert {"height_scale", "width_scale"} <= attrs
    converts(one, 9, {"x": x}, expected=reference(m, {"x": x}))


def test_upsample_computed_scales_refused():
    m = model([helper.make_node("Upsample", ["x", "s"], ["y"], name="u")], 9,
              [("x", F, [1, 2, 2, 2]), ("s", F, [4])], [("y", F, None)])
    refused(m, 8, "'u'", "Upsample 9 -> 7", "scales input 's' is not a constant")


def _resize(opset, inputs, init, x_shape=(1, 1, 4, 4), **attrs):
    return model([helper.make_node("Resize", ["x", *inputs], ["y"], name="r", **attrs)], opset,
                 [("x", F, None if x_shape is None else list(x_shape))], [("y", F, None)], initializers=list(init),
                 infer=x_shape is not None)


@pytest.mark.parametrize("axes,inputs", [([2, 3], ["", "s"]), ([3, 2], ["", "s"]), ([-1], ["", "", "z"]),
                                         ([3, 2], ["roi", "", "z"])])
def test_resize_axes_written_out_for_every_dim(axes, inputs):
    init = {"s": helper.make_tensor("s", F, [len(axes)], [2.0, 1.5][:len(axes)]),
            "z": helper.make_tensor("z", I64, [len(axes)], [8, 6][:len(axes)]),
            "roi": helper.make_tensor("roi", F, [2 * len(axes)], [0.1, 0.2, 0.8, 0.9][:2 * len(axes)])}
    attrs = {"coordinate_transformation_mode": "tf_crop_and_resize"} if "roi" in inputs else {}
    m = _resize(19, inputs, [init[i] for i in inputs if i], axes=axes, mode="linear", **attrs)
    for target in (13, 11):
        result, _ = converts(m, target, {"x": XR})
        assert not any(a.name == "axes" for a in result.graph.node[0].attribute)


XR = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)


@pytest.mark.parametrize("mode,scales", [("nearest", [1, 1, 2, 3]), ("linear", [1, 1, 2, 1.5]),
                                         ("linear", [1, 1, 0.5, 0.5])])
def test_resize_asymmetric_down_to_10(mode, scales):
    init = [helper.make_tensor("s", F, [4], scales)]
    attrs = {"coordinate_transformation_mode": "asymmetric", "mode": mode}
    if mode == "nearest":
        attrs["nearest_mode"] = "floor"
    m = _resize(LATEST, ["", "s"], init, **attrs)
    result, _ = converts(m, 10, {"x": XR})
    assert len(result.graph.node[0].input) == 2
    back, _ = converts(result, LATEST, {"x": XR})


def test_resize_refusals():
    s = [helper.make_tensor("s", F, [4], [1, 1, 2, 2])]
    refused(_resize(13, ["", "s"], s), 10, "'r'", "Resize 11 -> 10", "half_pixel")
    refused(_resize(13, ["", "s"], s, mode="cubic", coordinate_transformation_mode="asymmetric"), 10, "cubic")
    down = [helper.make_tensor("s", F, [4], [1, 1, 0.5, 0.5])]
    refused(_resize(13, ["", "s"], down, coordinate_transformation_mode="asymmetric", nearest_mode="floor"), 10,
            "scales [1.0, 1.0, 0.5, 0.5] < 1")
    refused(_resize(19, ["", "s"], s, coordinate_transformation_mode="half_pixel_symmetric"), 18,
            "'r'", "Resize 19 -> 18", "half_pixel_symmetric")
    refused(_resize(19, ["", "s"], s, antialias=1, mode="linear"), 17, "antialias=1")
    tf = _resize(11, ["roi", "s"], [helper.make_tensor("roi", F, [0], [])] + s,
                 coordinate_transformation_mode="tf_half_pixel_for_nn")
    refused(tf, 13, "'r'", "Resize 11 -> 13", "tf_half_pixel_for_nn")


def test_resize_axes_with_constants_and_dims_known_at_run_time_only():
    """Constant scales with the rank unknown, constant sizes with another dim symbolic: written
    out over every dim at run time (ScatterElements over ones / Shape), not refused."""
    two = [helper.make_tensor("s", F, [2], [2, 2])]
    m = model([helper.make_node("Reshape", ["x", "k"], ["xr"], name="reshape"),
               helper.make_node("Resize", ["xr", "", "s"], ["y"], name="r", axes=[2, 3])], 19,
              [("x", F, [1, 1, 4, 4]), ("k", I64, [4])], [("y", F, None)], initializers=two)
    feeds = {"x": XR, "k": np.array([1, 1, 4, 4], np.int64)}
    result, _ = converts(m, 17, feeds)
    assert not any(a.name == "axes" for n in result.graph.node for a in n.attribute)
    sizes = model([helper.make_node("Resize", ["x", "", "", "z"], ["y"], name="r", axes=[-1])], 19,
                  [("x", F, [1, "c", 4, 4])], [("y", F, None)], initializers=[helper.make_tensor("z", I64, [1], [8])])
    converts(sizes, 17, {"x": XR})


def test_resize_optional_inputs_filled_going_to_11():
    sizes = [helper.make_tensor("sz", I64, [4], [1, 1, 8, 6])]
    m = _resize(LATEST, ["", "", "sz"], sizes, axes=[0, 1, 2, 3], mode="linear")
    result, _ = converts(m, 11, {"x": XR})
    assert all(result.graph.node[0].input)


def test_resize_10_up():
    m = model([helper.make_node("Resize", ["x", "s"], ["y"], name="r", mode="linear")], 10,
              [("x", F, [1, 1, 4, 4])], [("y", F, None)],
              initializers=[helper.make_tensor("s", F, [4], [1, 1, 2, 0.5])])
    result, _ = converts(m, LATEST, {"x": XR})
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in result.graph.node[0].attribute}
    assert attrs["coordinate_transformation_mode"] == b"asymmetric"
    m = model([helper.make_node("Resize", ["x", "s"], ["y"], name="r")], 10,
              [("x", F, [1, 1, 4, 4])], [("y", F, None)],
              initializers=[helper.make_tensor("s", F, [4], [1, 1, 0.6, 2])])
    refused(m, 11, "'r'", "Resize 10 -> 11", "< 1")


# ---------------------------------------------------------------- the official backend cases

# ONNX Runtime itself disagrees with these cases' expected outputs (at their own opset too)
_ORT_DIFFERS = {"test_resize_downsample_scales_linear_align_corners",
                "test_resize_downsample_scales_cubic_align_corners"}
_RANDOM = {"test_training_dropout", "test_training_dropout_mask", "test_training_dropout_default",
           "test_training_dropout_default_mask"}  # training mode with a ratio: random outputs


def _usable(c):
    return c.name not in _ORT_DIFFERS | _RANDOM


@pytest.mark.parametrize("case", [c for c in cases(*OPS) if _usable(c)], ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case, (7, 11, 13, 17, 18))


@pytest.mark.parametrize("case", [c for c in cases(*OPS) if len(c.model.graph.input) > 1 and _usable(c)],
                         ids=lambda c: c.name)
def test_backend_cases_with_constant_inputs(case):
    k = constantized(case)
    source = next(o.version for o in case.model.opset_import if o.domain == "")
    targets = [t for t in (7, 11, 13, 17, 18) if t != source]
    done = run_backend_case(k, targets)
    if case.model.graph.node[0].op_type == "Dropout":
        assert done == len(targets), case.name


def test_upsample_up_from_9_becomes_resize():
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    for mode in ("nearest", "linear"):
        m = model([helper.make_node("Upsample", ["x", "s"], ["y"], name="u", mode=mode)], 9,
                  [("x", F, [1, 2, 2, 2])], [("y", F, None)],
                  initializers=[helper.make_tensor("s", F, [4], [1, 1, 2, 3])])
        for target in (10, 13, LATEST):
            result, _ = converts(m, target, {"x": x})
            assert [(n.op_type, n.name) for n in result.graph.node] == [("Resize", "u")]
    computed = model([helper.make_node("Upsample", ["x", "s"], ["y"], name="u")], 9,
                     [("x", F, [1, 2, 2, 2]), ("s", F, [4])], [("y", F, None)])
    converts(computed, 10, {"x": x, "s": np.array([1, 1, 2, 2], np.float32)})
    refused(computed, 11, "'u'", "Resize 10 -> 11", "not a constant")
