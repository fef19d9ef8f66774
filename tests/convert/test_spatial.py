"""DepthToSpace mode (11), SpaceToDepth mode (28), GridSample mode names (20)."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, assert_valid, cases, converts, helper, model, np,
                                        reference, refused, run, run_backend_case)

X = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)


@pytest.mark.parametrize("mode", [None, "DCR", "CRD"])
@pytest.mark.parametrize("target", [9, 7, 4])
def test_depth_to_space_down(mode, target):
    attrs = {} if mode is None else {"mode": mode}
    node = helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=2, **attrs)
    m = model([node], 13, [("x", TensorProto.FLOAT, [2, 8, 2, 3])], [("y", TensorProto.FLOAT, [2, 2, 4, 6])])
    if target >= 7:
        result, _ = converts(m, target, {"x": X})
    else:  # no runtime runs Reshape-1: the round trip back up must compute the same
        result, _ = convert_model(m, target)
        assert_valid(result)
        converts(result, 13, {"x": X}, expected=run(m, {"x": X}))
    ops = [n.op_type for n in result.graph.node]
    assert ops == (["Reshape", "Transpose", "Reshape"] if mode == "CRD" else ["DepthToSpace"])
    assert next(n for n in result.graph.node if "y" in n.output).name == "d2s"


def test_depth_to_space_crd_needs_static_dims():
    node = helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=2, mode="CRD")
    m = model([node], 13, [("x", TensorProto.FLOAT, [2, 8, "h", 3])], [("y", TensorProto.FLOAT, None)])
    refused(m, 10, "'d2s'", "11 -> 1", "mode='CRD'", "static")


def test_space_to_depth_mode():
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], name="s2d", blocksize=2, mode="DCR")
    x = np.arange(2 * 2 * 4 * 6, dtype=np.float32).reshape(2, 2, 4, 6)
    m = model([node], LATEST, [("x", TensorProto.FLOAT, [2, 2, 4, 6])], [("y", TensorProto.FLOAT, [2, 8, 2, 3])])
    result, _ = converts(m, 13, {"x": x}, runner=reference)
    assert not result.graph.node[0].attribute[1:]
    node2 = helper.make_node("SpaceToDepth", ["x"], ["y"], name="s2d", blocksize=2, mode="CRD")
    m2 = model([node2], LATEST, [("x", TensorProto.FLOAT, [2, 2, 4, 6])], [("y", TensorProto.FLOAT, [2, 8, 2, 3])])
    for target in (13, 7):
        result2, _ = converts(m2, target, {"x": x}, expected=reference(m2, {"x": x}))
        assert [n.op_type for n in result2.graph.node] == ["Reshape", "Transpose", "Reshape"]
        assert result2.graph.node[-1].name == "s2d"
    node3 = helper.make_node("SpaceToDepth", ["x"], ["y"], name="s2d", blocksize=2, mode="CRD")
    m3 = model([node3], LATEST, [("x", TensorProto.FLOAT, [2, 2, "h", 6])], [("y", TensorProto.FLOAT, None)])
    refused(m3, 13, "'s2d'", "28 -> 13", "mode='CRD'", "static")


@pytest.mark.parametrize("mode16,mode20", [("bilinear", "linear"), ("bicubic", "cubic"), ("nearest", "nearest"),
                                           (None, None)])
def test_grid_sample_modes(mode16, mode20):
    rng = np.random.default_rng(0)
    feeds = {"x": rng.normal(size=[1, 1, 4, 4]).astype(np.float32),
             "g": rng.uniform(-1, 1, size=[1, 3, 3, 2]).astype(np.float32)}

    def m(opset, mode):
        attrs = {} if mode is None else {"mode": mode}
        node = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs", **attrs)
        return model([node], opset, [("x", TensorProto.FLOAT, [1, 1, 4, 4]), ("g", TensorProto.FLOAT, [1, 3, 3, 2])],
                     [("y", TensorProto.FLOAT, [1, 1, 3, 3])])

    down, _ = converts(m(20, mode20), 16, feeds, rtol=1e-5)
    assert {a.name: a.s for a in down.graph.node[0].attribute}.get("mode") == (mode16 and mode16.encode())
    up, _ = converts(m(16, mode16), LATEST, feeds, rtol=1e-5)
    assert {a.name: a.s for a in up.graph.node[0].attribute}.get("mode") == (mode20 and mode20.encode())


def test_grid_sample_5d_is_refused_below_20():
    node = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs")
    m = model([node], 20, [("x", TensorProto.FLOAT, [1, 1, 2, 4, 4]), ("g", TensorProto.FLOAT, [1, 2, 3, 3, 3])],
              [("y", TensorProto.FLOAT, None)])
    refused(m, 16, "'gs'", "20 -> 16", "4-D")


@pytest.mark.parametrize("case", cases("DepthToSpace", "SpaceToDepth", "GridSample"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
