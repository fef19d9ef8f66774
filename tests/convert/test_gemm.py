"""Gemm across 7 (broadcast attribute) and 11 (optional C)."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, assert_valid, cases, converts, helper, model, np,
                                        refused, run, run_backend_case)

RNG = np.random.default_rng(0)
A = RNG.normal(size=[3, 4]).astype(np.float32)
B = RNG.normal(size=[4, 5]).astype(np.float32)


def _gemm(opset, c_shape=None, **attrs):
    inputs = [("a", TensorProto.FLOAT, [3, 4]), ("b", TensorProto.FLOAT, [4, 5])]
    names = ["a", "b"]
    if c_shape is not None:
        inputs.append(("c", TensorProto.FLOAT, c_shape))
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], name="gemm", **attrs)
    return model([node], opset, inputs, [("y", TensorProto.FLOAT, [3, 5])])


@pytest.mark.parametrize("attrs", [{}, {"beta": -2.0}, {"beta": 0.0, "alpha": 0.5}, {"transA": 0}])
@pytest.mark.parametrize("target", [9, 7])
def test_absent_c_becomes_a_signed_zero(attrs, target):
    m = _gemm(13, **attrs)
    a = A.copy()
    a[0] = 0.0
    b = B.copy()
    b[:, 0] = -1.0  # rows of A of zeros times negative entries give -0.0: the zero C must keep it
    feeds = {"a": a, "b": b}
    result, report = converts(m, target, feeds)
    assert len(result.graph.node[0].input) == 3 and not report.version_converter_called
    got, want = run(result, feeds)[0], run(m, feeds)[0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("c_shape,broadcast", [([3, 5], 0), ([5], 1), ([1], 1), ([1, 5], 1)])
def test_c_broadcast_down_to_6_and_back(c_shape, broadcast):
    m = _gemm(13, c_shape)
    feeds = {"a": A, "b": B, "c": RNG.normal(size=c_shape).astype(np.float32)}
    down, _ = convert_model(m, 6)
    assert_valid(down)
    node = next(n for n in down.graph.node if n.op_type == "Gemm")
    assert {a.name: a.i for a in node.attribute}.get("broadcast", 0) == broadcast
    converts(down, 13, feeds, expected=run(m, feeds))


def test_c_broadcasting_by_columns_is_refused_below_7():
    refused(_gemm(13, [3, 1]), 6, "'gemm'", "7 -> 6", "C of shape [3, 1]")


def test_legacy_broadcast_goes_up():
    m = _gemm(6, [5], broadcast=1)
    c = RNG.normal(size=[5]).astype(np.float32)
    result, _ = converts(m, LATEST, {"a": A, "b": B, "c": c}, expected=[A @ B + c])
    assert not result.graph.node[0].attribute


def test_int_gemm_is_refused_below_9():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm")
    m = model([node], 13, [("a", TensorProto.INT32, [2, 2])] * 1 + [("b", TensorProto.INT32, [2, 2]),
              ("c", TensorProto.INT32, [2, 2])], [("y", TensorProto.INT32, [2, 2])])
    refused(m, 8, "'gemm'", "tensor(int32)")


@pytest.mark.parametrize("case", cases("Gemm"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
