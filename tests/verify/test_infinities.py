"""Numerical check: infinities must be where they are, with their sign (issue 27).

+inf against -inf, and an infinity against a finite value, in the same position of the same
output, in float16, float32 and float64 outputs, is a mismatch whatever the tolerances; the
same infinities in the same places are not.

The models compute ``y = x + c`` for a constant ``c`` holding infinities (or, for the control,
``y = x - (-c)``, which is the same exactly). The oracle: ONNX Runtime run on the very feeds the
check draws (``random_inputs`` with the same seed) says where each side's infinities are, and
numpy says whether the two outputs agree; the report must say the same.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper

from rewriter import verify_numerics as public_verify_numerics
from rewriter.verify.numerics import random_inputs, verify_numerics

TYPES = {TensorProto.FLOAT16: np.float16, TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64}
SHAPE = (2, 3)
INF = np.inf


def _model(elem: int, c: list[float], op: str = "Add") -> onnx.ModelProto:
    """y = x + c (op Add) or y = x - c (op Sub), c a constant of ``elem`` with ``SHAPE``."""
    const = numpy_helper.from_array(np.array(c, dtype=TYPES[elem]).reshape(SHAPE), "c")
    graph = h.make_graph([h.make_node(op, ["x", "c"], ["y"])], "g",
                         [h.make_tensor_value_info("x", elem, list(SHAPE))],
                         [h.make_tensor_value_info("y", elem, list(SHAPE))], [const])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _ort(model: onnx.ModelProto, feeds) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _outputs(a, b, seed=0):
    feeds = random_inputs(a, seed)
    return _ort(a, feeds), _ort(b, feeds)


def _numpy_agrees(ya: np.ndarray, yb: np.ndarray) -> bool:
    """numpy's verdict: same infinities (sign included) in the same places, finite parts equal."""
    return bool(np.array_equal(ya, yb))  # no NaN here; the finite parts are equal by construction


def _assert_mismatch(a, b, dtype):
    for fn in (verify_numerics, public_verify_numerics):
        for first, second in ((a, b), (b, a)):  # the odd value on either side
            for kwargs in ({}, {"rtol": 1e9, "atol": 1e9}):  # no tolerance hides it
                report = fn(first, second, **kwargs)
                assert not report.ok, report.summary_lines()
                (out,) = report.outputs
                assert not out.ok and out.dtype == dtype, out
                assert "infinit" in out.reason, out.reason
                assert report.to_dict()["ok"] is False
        report = verify_numerics(first, second, rel_l2=1e9)  # the half-precision comparison too
        assert not report.ok, report.summary_lines()
        assert "infinit" in report.outputs[0].reason


C_FINITE = [0.0] * 6


@pytest.mark.parametrize("elem", list(TYPES), ids=lambda e: TensorProto.DataType.Name(e).lower())
@pytest.mark.parametrize("where", [0, 4])
def test_plus_inf_against_minus_inf_in_the_same_place_is_a_mismatch(elem, where):
    plus, minus = list(C_FINITE), list(C_FINITE)
    plus[where], minus[where] = INF, -INF
    a, b = _model(elem, plus), _model(elem, minus)
    ya, yb = _outputs(a, b)
    assert np.isposinf(ya.reshape(-1)[where]) and np.isneginf(yb.reshape(-1)[where])  # the premise
    assert np.array_equal(np.isinf(ya), np.isinf(yb))  # same places: only the sign differs
    assert not _numpy_agrees(ya, yb)
    _assert_mismatch(a, b, TensorProto.DataType.Name(elem).lower())


@pytest.mark.parametrize("elem", list(TYPES), ids=lambda e: TensorProto.DataType.Name(e).lower())
@pytest.mark.parametrize("sign", [1, -1], ids=["plus", "minus"])
def test_inf_against_a_finite_value_in_the_same_place_is_a_mismatch(elem, sign):
    with_inf = list(C_FINITE)
    with_inf[2] = sign * INF
    a, b = _model(elem, with_inf), _model(elem, C_FINITE)
    ya, yb = _outputs(a, b)
    assert np.isinf(ya.reshape(-1)[2]) and np.isfinite(yb).all()  # the premise
    assert np.array_equal(ya[np.isfinite(ya)], yb[np.isfinite(ya)])  # everything else is equal
    assert not _numpy_agrees(ya, yb)
    _assert_mismatch(a, b, TensorProto.DataType.Name(elem).lower())


@pytest.mark.parametrize("elem", list(TYPES), ids=lambda e: TensorProto.DataType.Name(e).lower())
def test_an_infinity_moved_to_another_place_is_a_mismatch(elem):
    first, second = list(C_FINITE), list(C_FINITE)
    first[1], second[3] = INF, INF
    a, b = _model(elem, first), _model(elem, second)
    ya, yb = _outputs(a, b)
    assert np.isinf(ya).sum() == np.isinf(yb).sum() == 1 and not _numpy_agrees(ya, yb)
    _assert_mismatch(a, b, TensorProto.DataType.Name(elem).lower())


@pytest.mark.parametrize("elem", list(TYPES), ids=lambda e: TensorProto.DataType.Name(e).lower())
def test_the_same_infinities_in_the_same_places_are_ok(elem):
    """Control: x + c and x - (-c) with c = [inf, 0, -inf, 0, inf, 0]: equal outputs, infinities included."""
    c = [INF, 0.0, -INF, 0.0, INF, 0.0]
    a, b = _model(elem, c), _model(elem, [-v for v in c], op="Sub")
    for seed in (0, 1):
        ya, yb = _outputs(a, b, seed)
        assert np.isinf(ya).sum() == 3 and _numpy_agrees(ya, yb)  # the premise
        for fn in (verify_numerics, public_verify_numerics):
            report = fn(a, b, seed=seed)
            assert report.ok, report.summary_lines()
            assert report.outputs[0].max_abs_diff == 0.0  # the finite elements are compared, and equal
        assert verify_numerics(a, b, seed=seed, rel_l2=1e-6).ok


@pytest.mark.parametrize("elem", list(TYPES), ids=lambda e: TensorProto.DataType.Name(e).lower())
def test_finite_differences_beside_equal_infinities_are_still_compared(elem):
    """Control of the other side: equal infinities do not hide a finite element beyond tolerance."""
    c = [INF, 0.0, -INF, 0.0, 0.0, 0.0]
    off = list(c)
    off[5] = 0.25
    a, b = _model(elem, c), _model(elem, off)
    ya, yb = _outputs(a, b)
    assert np.array_equal(np.isinf(ya), np.isinf(yb)) and not _numpy_agrees(ya, yb)
    report = verify_numerics(a, b)
    assert not report.ok and report.outputs[0].reason == "beyond tolerance", report.summary_lines()
    assert report.outputs[0].max_abs_diff == pytest.approx(0.25)
