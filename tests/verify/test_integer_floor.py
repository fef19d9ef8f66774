"""Issue 39 §4 for integer outputs: a half-precision result's labels (an ArgMax, the labels of
detections after NMS) are judged against their floor, the share of values that rounding only
the float32 source's inputs to half changes, as its float outputs are judged against theirs.

Oracle: numpy's argmax on the inputs and on the inputs rounded to float16."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.verify.numerics.int_floor import (
    compare_integers,
    floor_checks_nothing,
    integer_floors,
)

X = (1000 + np.random.default_rng(3).uniform(-1, 1, (16, 8))).astype(np.float32)


def _argmax_model():
    """x -> Sub(1000) -> d, ArgMax(d) -> idx: float16 holds x near 1000 in 0.5 steps, so
    rounding x alone changes a quarter of the argmaxes."""
    m = h.make_model(h.make_graph(
        [h.make_node("Sub", ["x", "c"], ["d"], name="sub"),
         h.make_node("ArgMax", ["d"], ["idx"], axis=1, keepdims=0, name="argmax")], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [16, 8])],
        [h.make_tensor_value_info("d", T.FLOAT, [16, 8]), h.make_tensor_value_info("idx", T.INT64, [16])],
        [nh.from_array(np.array(1000.0, np.float32), "c")]), opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _oracle_share():
    return float(np.mean(X.argmax(1) != X.astype(np.float16).astype(np.float32).argmax(1)))


def _verify_half(tmp_path, x):
    """``convert --dtype float16 --verify --json`` of the ArgMax model on ``x`` (exit 0 asserted)."""
    src, out, data = tmp_path / "m.onnx", tmp_path / "h.onnx", tmp_path / "x.npz"
    onnx.save(_argmax_model(), src)
    np.savez(data, x=x)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16",
                          "--no-keep-io-types", "--verify", "--calibration-data", str(data), "-o", str(out),
                          "--json"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def test_labels_that_rounding_the_inputs_changes_are_judged_against_their_floor(tmp_path):
    share = _oracle_share()
    assert 0 < share < 0.5
    run = _verify_half(tmp_path, X)
    idx = next(o for o in json.loads(run.stdout)["verification"]["numerics"]["outputs"] if o["output"] == "idx")
    assert idx["ok"] is True
    assert abs(idx["floor"] - share) < 1e-12
    assert "2 x floor" in idx["tolerance"]


def test_integer_floor_is_the_share_of_values_rounding_changes():
    want = [np.zeros(4, np.float32), np.array([1, 2, 3, 4]), np.array([True, False])]
    got = [np.ones(4, np.float32), np.array([1, 2, 0, 4]), np.array([True, False])]
    assert integer_floors([0.5, 0.0, 0.0], want, got) == [0.5, 0.25, 0.0]
    assert integer_floors([0.0, 0.0, 0.0], want, []) == [0.0, 0.0, 0.0]  # no input rounded
    assert integer_floors(None, want, got) is None
    assert integer_floors([0.0], [np.arange(3)], [np.arange(4)]) == [float("inf")]


def test_labels_within_twice_their_floor_pass_and_beyond_fail():
    a = np.arange(20)
    b = a.copy()
    b[:4] += 1  # 4 of 20 differ: 0.2
    assert compare_integers("labels", "int64", a, b, 0.1).ok  # 0.2 <= 2 x 0.1
    c = compare_integers("labels", "int64", a, b, 0.09)  # 0.2 > 0.18
    assert not c.ok and c.reason == "integers differ" and c.mismatch
    assert "measured 0.2" in c.tolerance and c.max_abs_diff == 1


def test_labels_whose_count_rounding_changes_must_still_be_equal():
    a = np.arange(5)
    ok = compare_integers("labels", "int64", a, a.copy(), float("inf"))
    assert ok.ok and "floor n/a" in ok.tolerance
    bad = compare_integers("labels", "int64", a, np.arange(6), float("inf"))
    assert not bad.ok and bad.reason.startswith("shape")
    differ = compare_integers("labels", "int64", a, a[::-1].copy(), float("inf"))
    assert not differ.ok and differ.reason == "integers differ"
    shape = compare_integers("labels", "int64", a, np.arange(6), 0.3)
    assert not shape.ok and shape.reason.startswith("shape")


def test_a_floor_that_lets_any_output_pass_is_not_a_check():
    a = np.arange(10)
    b = a.copy()
    b[:6] = 0  # 6 of 10 differ, floor 0.5: 2 x floor accepts every value
    c = compare_integers("labels", "int64", a, b, 0.5)
    assert c.ok  # within 2 x floor...
    assert floor_checks_nothing(0.5) and floor_checks_nothing(0.96)  # ...which is no check
    assert not floor_checks_nothing(0.49) and not floor_checks_nothing(None)
    assert not floor_checks_nothing(float("inf"))  # no floor: judged by the limit


def test_verify_says_not_verified_where_the_floor_accepts_anything(tmp_path):
    """Rows of 8 values within 0.25 of 1000: float16 rounds nearly all to one value, and ArgMax
    then picks the first: rounding the input alone changes most labels."""
    x = (1000 + np.random.default_rng(5).uniform(-0.2, 0.2, (16, 8))).astype(np.float32)
    share = float(np.mean(x.argmax(1) != x.astype(np.float16).astype(np.float32).argmax(1)))
    assert share >= 0.5
    run = _verify_half(tmp_path, x)
    numerics = json.loads(run.stdout)["verification"]["numerics"]
    idx = next(o for o in numerics["outputs"] if o["output"] == "idx")
    assert numerics["status"] == "not verified" and idx["ok"] is False
    assert "lets any output pass" in idx["degenerate"]
    d = next(o for o in numerics["outputs"] if o["output"] == "d")  # x - 1000 rounded: mostly 0, a floor near 1
    assert d["floor"] >= 0.5 and d["ok"] is False and "lets any output pass" in d["degenerate"]
