"""The half-precision comparison (relative L2, with an RMS floor for outputs all near 0): the RMS
difference is the square root of the mean square difference, so 10,000 values of about 1e-4 each
off by 1e-4 (RMS 1e-4, ten times the floor; relative error about 1) fail (issue 39).

Oracle: exact arithmetic (the RMS of a constant difference d is d).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.verify.numerics import verify_numerics
from rewriter.verify.numerics.rel_l2 import HALF_RMS_FLOOR, compare_rel_l2, rel_l2_measure

N = 10_000
NEAR_ZERO = (1e-4 * (1.0 + 0.5 * np.sin(np.arange(N)))).astype(np.float32)  # 0.5e-4 .. 1.5e-4, not constant


def _off_by(d: float) -> np.ndarray:
    return (NEAR_ZERO.astype(np.float64) + d).astype(np.float32)


def test_the_rms_is_the_square_root_of_the_mean_square():
    off = _off_by(1e-4)
    error, rms, largest, reason = rel_l2_measure(NEAR_ZERO, off)
    d = off.astype(np.float64) - NEAR_ZERO.astype(np.float64)
    assert reason == "" and abs(rms - np.sqrt(np.mean(d * d))) < 1e-12
    assert abs(rms - 1e-4) < 1e-7 and rms > 10 * HALF_RMS_FLOOR
    assert error > 0.5 and abs(largest - 1e-4) < 1e-7


def test_near_zero_values_with_a_large_relative_error_fail_the_comparison():
    assert not compare_rel_l2(NEAR_ZERO, _off_by(1e-4), 1e-2)[3]
    assert compare_rel_l2(NEAR_ZERO, _off_by(1e-7), 1e-2)[3]  # the control: RMS 1e-7, under the floor


def _constant_model(values):
    """y = x * 0 + values (x random, of no consequence)."""
    graph = h.make_graph([h.make_node("Mul", ["x", "zero"], ["z"]), h.make_node("Add", ["z", "c"], ["y"])], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [N])], [h.make_tensor_value_info("y", T.FLOAT, [N])],
                         [nh.from_array(np.float32(0.0), "zero"), nh.from_array(values, "c")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_verify_numerics_by_relative_l2_fails_near_zero_outputs_each_off_by_as_much():
    source = _constant_model(NEAR_ZERO)
    report = verify_numerics(source, _constant_model(_off_by(1e-4)), rel_l2=1e-2)
    assert not report.ok and [o.ok for o in report.outputs] == [False], report.outputs
    assert verify_numerics(source, _constant_model(_off_by(1e-7)), rel_l2=1e-2).ok
