"""AveragePool 7/10/19, MaxPool 8/10, LpPool 2/18: new optional features dropped at their
defaults (or when they change nothing), refused otherwise."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, helper, model, np, reference,
                                        refused, run_backend_case)

X = np.random.default_rng(0).normal(size=[1, 2, 6, 7]).astype(np.float32)


def _pool(op, opset, outputs=("y",), **attrs):
    attrs.setdefault("kernel_shape", [3, 3])
    node = helper.make_node(op, ["x"], list(outputs), name="pool", **attrs)
    outs = [("y", TensorProto.FLOAT, None)] + ([("i", TensorProto.INT64, None)] if len(outputs) > 1 else [])
    return model([node], opset, [("x", TensorProto.FLOAT, [1, 2, 6, 7])], outs)


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool", "LpPool"])
@pytest.mark.parametrize("target", [7, 9, 11, 17])
@pytest.mark.parametrize("attrs", [{}, {"ceil_mode": 0}, {"dilations": [1, 1]},
                                   {"ceil_mode": 1, "strides": [3, 2], "pads": [0, 0, 0, 0]},
                                   {"ceil_mode": 1, "strides": [1, 1]}])
def test_defaults_and_harmless_values_are_dropped(op, target, attrs):
    if op == "AveragePool":
        attrs = {**attrs, "count_include_pad": 0}
    m = _pool(op, LATEST, **attrs)
    runner = reference if target < 8 else None
    result, report = converts(m, target, {"x": X}, rtol=1e-5, **({"runner": runner} if runner else {}))
    kept = {a.name for a in result.graph.node[0].attribute}
    since = {"AveragePool": {"ceil_mode": 10, "dilations": 19}, "MaxPool": {"ceil_mode": 10, "dilations": 10},
             "LpPool": {"ceil_mode": 18, "dilations": 18}}[op]
    assert all(target >= since[a] for a in kept & {"dilations", "ceil_mode"}), kept
    assert not report.version_converter_called


@pytest.mark.parametrize("op,step,since", [("AveragePool", "10 -> 7", 10), ("MaxPool", "10 -> 8", 10),
                                           ("LpPool", "18 -> 11", 18)])
def test_ceil_mode_that_rounds_up_becomes_end_padding(op, step, since):
    """The end padding that gives ceil's windows: padding takes no part in a max, an average
    that does not count pads, or an Lp norm (|0|^p = 0); see tests/convert/test_pool_ceil.py."""
    result, report = converts(_pool(op, LATEST, ceil_mode=1, strides=[2, 2]), 7, {"x": X})
    assert report.changes[f"{op} ceil_mode=1 -> floor with more end padding"] == 1
    refused(_pool(op, LATEST, ceil_mode=1, strides=[2, 2], dilations=[2, 1]), 7, "'pool'")  # dilations block


@pytest.mark.parametrize("op,since", [("AveragePool", 19), ("MaxPool", 10), ("LpPool", 18)])
def test_dilations_are_refused(op, since):
    refused(_pool(op, LATEST, dilations=[2, 1]), 7, "'pool'", "dilations=[2, 1]", f"opset {since}")


def test_count_include_pad_is_refused_below_7():
    m = _pool("AveragePool", 13, count_include_pad=1, pads=[1, 1, 1, 1])
    refused(m, 6, "'pool'", "7 -> 1", "count_include_pad=1")
    result, _ = converts(m, 7, {"x": X})
    assert any(a.name == "count_include_pad" for a in result.graph.node[0].attribute)


def test_maxpool_indices_are_refused_below_8_and_storage_order_dropped_without_them():
    refused(_pool("MaxPool", 13, outputs=("y", "i")), 7, "'pool'", "8 -> 1", "Indices output 'i'")
    result, _ = converts(_pool("MaxPool", 13, storage_order=1), 7, {"x": X}, runner=reference)
    assert [a.name for a in result.graph.node[0].attribute] == ["kernel_shape"]


def test_maxpool_int8_goes_below_12_through_float():
    # MaxPool-11 takes floats only; the route (tests/convert/test_type_routes_maxpool.py) is exact
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2])
    m = model([node], 13, [("x", TensorProto.INT8, [1, 1, 4])], [("y", TensorProto.INT8, None)])
    result, _ = converts(m, 11, {"x": np.array([[[-128, 5, 127, -3]]], np.int8)})
    assert [n.op_type for n in result.graph.node] == ["Cast", "MaxPool", "Cast"]


def test_lppool_p_is_an_int_from_2():
    node = helper.make_node("LpPool", ["x"], ["y"], name="pool", kernel_shape=[3, 3], p=3)
    m = model([node], 11, [("x", TensorProto.FLOAT, [1, 2, 6, 7])], [("y", TensorProto.FLOAT, [1, 2, 4, 5])])
    down, _ = convert_model(m, 1)
    assert down.graph.node[0].attribute[-1].f == 3.0
    converts(down, 11, {"x": X}, expected=reference(m, {"x": X}))
    node1 = helper.make_node("LpPool", ["x"], ["y"], name="pool", kernel_shape=[3, 3], p=2.5)
    m1 = model([node1], 1, [("x", TensorProto.FLOAT, [1, 2, 6, 7])], [("y", TensorProto.FLOAT, [1, 2, 4, 5])],
               infer=False)
    refused(m1, 11, "'pool'", "p=2.5")


@pytest.mark.parametrize("case", cases("AveragePool", "MaxPool", "LpPool"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool", "LpPool"])
@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 1, 1, 1]])
def test_ceil_window_starting_in_padding_becomes_floor_below_22(op, pads):
    """From 22 a ceil_mode window that would start in the end padding is dropped; before 22 the
    output size counts it: the floor sizes are the 22 sizes, so ceil_mode=0 below 22."""
    attrs = {"count_include_pad": 1} if op == "AveragePool" else {}
    kernel = [1, 1] if pads == [0, 0, 0, 0] else [3, 3]
    node = helper.make_node(op, ["x"], ["y"], name="pool", kernel_shape=kernel, strides=[2, 2] if
                            kernel == [1, 1] else [3, 3], ceil_mode=1, pads=pads, **attrs)
    x = np.random.default_rng(1).normal(size=[1, 1, 2, 2]).astype(np.float32)
    m = model([node], 22, [("x", TensorProto.FLOAT, [1, 1, 2, 2])], [("y", TensorProto.FLOAT, [1, 1, 1, 1])])
    result, report = converts(m, 21, {"x": x}, rtol=1e-5)
    assert {a.name: a.i for a in result.graph.node[0].attribute}["ceil_mode"] == 0
    ok = _pool(op, 22, ceil_mode=1, strides=[2, 2])  # 6x7 input, 3x3 kernel: a real extra window
    result, _ = converts(ok, 21, {"x": X}, rtol=1e-5)
    assert {a.name: a.i for a in result.graph.node[0].attribute}["ceil_mode"] == 1


def test_ceil_windows_of_both_kinds_are_refused_below_22():
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[1, 3], strides=[2, 2], ceil_mode=1)
    m = model([node], 22, [("x", TensorProto.FLOAT, [1, 1, 2, 6])], [("y", TensorProto.FLOAT, None)])
    refused(m, 21, "'pool'", "22 -> 12", "starts in the end padding")
