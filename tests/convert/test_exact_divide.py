"""exact_divide.divide_rounded: the float32 quotient IEEE division gives, bit for bit, also when the
graph's Div is only faithful (emulated here in ONNX Runtime as a * (1 / b), what OpenVINO, tract and
LiteRT compute), on random pairs, pairs whose quotient lies next to a midpoint, and hypothesis' draws."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto as T, helper

from rewriter.convert.lowering.emit import Emitter, ScopeWriter
from rewriter.convert.lowering.exact_divide import divide_rounded


def _model(reciprocal: bool):
    writer = ScopeWriter({"a", "b", "y"}, False, 17)
    e = Emitter(writer, "d")
    e.identity(divide_rounded(e, "a", "b"), "y")
    nodes = list(e.nodes)
    if reciprocal:  # the one Div as a product with the reciprocal (a second rounding)
        div = next(n for n in nodes if n.op_type == "Div")
        nodes.insert(nodes.index(div), helper.make_node("Reciprocal", [div.input[1]], ["inverse"]))
        div.op_type, div.input[1] = "Mul", "inverse"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, T.FLOAT, [None]) for n in "ab"],
                              [helper.make_tensor_value_info("y", T.FLOAT, [None])], writer.initializers)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


SESSIONS = {r: _model(r) for r in (False, True)}


def _check(a: np.ndarray, b: np.ndarray) -> int:
    """Asserts both models give a / b bit for bit; returns how many a * (1 / b) alone got wrong."""
    want = (a / b).astype(np.float32)
    for reciprocal, session in SESSIONS.items():
        got = session.run(None, {"a": a, "b": b})[0]
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32), err_msg=f"reciprocal={reciprocal}")
    return int(np.count_nonzero((a * (np.float32(1) / b)).astype(np.float32) != want))


def test_random_pairs_and_small_counts():
    rng = np.random.default_rng(0)
    n = 400_000
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))).astype(np.float32)
    b = (rng.random(n) * np.exp2(rng.integers(-40, 40, n)) + np.float32(2.0 ** -50)).astype(np.float32)
    b[: n // 2] = rng.choice(np.float32([3, 5, 6, 7, 9, 10, 12, 255, 0.0117647, 0.003921569]), n // 2)
    assert _check(a, b) > n // 10  # (the reciprocal alone misses often: the test can tell)


def test_quotients_next_to_a_midpoint():
    """a = fl(m * b) for m the midpoint between a float q and the next: a / b within ulps of m."""
    rng = np.random.default_rng(1)
    q = (rng.random(200_000) + 1).astype(np.float32) * np.exp2(rng.integers(-20, 20, 200_000)).astype(np.float32)
    mid = q.astype(np.float64) + (np.nextafter(q, np.float32(np.inf)) - q).astype(np.float64) / 2
    b = rng.choice(np.float32([3, 6, 7, 11, 0.1, 0.0392157, 1.3]), q.size)
    a = (mid * b).astype(np.float32)
    assert _check(a, b) > 1000


def test_quotients_next_to_a_power_of_two():
    """Quotients within a few ulps of +-2^k, where the gap below |q| is half the gap above (both signs)."""
    rng = np.random.default_rng(2)
    n = 400_000
    target = np.exp2(rng.integers(-30, 30, n)) * rng.choice([-1.0, 1.0], n) * (1 + rng.uniform(-2.0 ** -21, 2.0 ** -21, n))
    b = (rng.random(n) * 2 + 0.5).astype(np.float32)
    b[: n // 4] = np.float32(3)
    a = (target * b).astype(np.float32)
    assert _check(a, b) > 1000


@settings(max_examples=150, deadline=None)
@given(hnp.arrays(np.float32, 32, elements=st.floats(-2.0 ** 99, 2.0 ** 99, width=32, allow_subnormal=False)),
       hnp.arrays(np.float32, 32, elements=st.floats(2.0 ** -99, 2.0 ** 99, width=32, allow_subnormal=False)))
def test_hypothesis(a, b):
    keep = (np.abs(a) > np.float32(1e-30)) | (a == 0)  # (a quotient below the normal range is left to the Div)
    a = np.where(keep, a, np.float32(0)).astype(np.float32)
    quotient = np.abs(a.astype(np.float64) / b)
    a = np.where((quotient < 1e30) & ((quotient > 1e-30) | (a == 0)), a, np.float32(1)).astype(np.float32)
    _check(a, b)


@pytest.mark.parametrize("a,b", [(0.0, 3.0), (-0.0, 6.0), (1.0, 3.0), (-7.0, 6.0), (2.0 ** 90, 3.0), (2.0 ** -90, 7.0)])
def test_edges(a, b):
    _check(np.float32([a]), np.float32([b]))
