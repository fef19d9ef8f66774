"""SVMClassifier's pairwise coupling for a runtime without Loop (tract 0.23, TVM 0.27, LiteRT 2.6):
the 100 rounds written one after the other give the Loop form's results bit for bit (ONNX Runtime
runs both), for any input, and ONNX Runtime's own kernel's within the coupling's stated tolerance;
convert --target chooses the form from the release's data, lower_ops alone keeps the Loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewriter.convert.for_target import convert_for, lower_for
from rewriter.convert.lower_ops import lower_ops
from rewriter.convert.lowering import ml_svm_prob
from rewriter.convert.lowering.avoid import LOOP, avoiding, avoids
from rewriter.graph import traversal
from rewriter.targets import parse_target
from tests.convert.support.lowering_oracle import check_lowering, ort_run, same_bits
from tests.convert.test_lowering_ml_svm import KERNELS, TOL, TRANSFORMS, _rows, svc

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, 3.0]


def _ops(model) -> dict:
    counts: dict = {}
    for scope in traversal.iter_scopes(model):
        for n in scope.body.node:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def _both(model):
    loop = lower_ops(model)[0]
    with avoiding({LOOP}):
        unrolled = lower_ops(model)[0]
    return loop, unrolled


def _same(loop, unrolled, feeds):
    a, b = ort_run(loop, feeds), ort_run(unrolled, feeds)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert same_bits(x, y), (x, y)
    return a


def _inputs(rng, features, specials):
    x = np.concatenate([_rows(rng, 12, features), (rng.normal(size=(6, features)) * 10).astype(np.float32)])
    for r, c, v in specials:
        x[r % len(x), c % features] = v
    return x


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 4), min_size=2, max_size=5), st.sampled_from(KERNELS), st.sampled_from(TRANSFORMS),
       st.integers(0, 2 ** 16), st.integers(1, 4),
       st.lists(st.tuples(st.integers(0, 17), st.integers(0, 3), st.sampled_from(SPECIAL)), max_size=4))
def test_unrolled_is_the_loop_bit_for_bit(per_class, kernel, how, seed, features, specials):
    """Random models and rows (NaN, infinities, signed zeros, huge values among them): the unrolled
    form's outputs are the Loop form's, bit for bit, in ONNX Runtime; it holds no Loop."""
    rng = np.random.default_rng(seed)
    model = svc(rng, per_class, features, kernel, proba=True, how=how,
                params=(float(rng.uniform(0.05, 1)), float(rng.normal()), float(rng.integers(1, 4))))
    loop, unrolled = _both(model)
    assert _ops(loop).get("Loop") == 1 and "Loop" not in _ops(unrolled)
    _same(loop, unrolled, {"X": _inputs(rng, features, specials)})


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("per_class", [(3, 4), (2, 3, 4), (2, 1, 3, 2, 2)], ids=["2classes", "3classes", "5classes"])
def test_unrolled_against_onnxruntimes_kernel(kernel, per_class):
    """The unrolled form against ONNX Runtime's SVMClassifier: labels equal, probabilities within
    the coupling's tolerance (the logistic's exp is the runtime's), as the Loop form."""
    rng = np.random.default_rng(len(per_class) + len(kernel))
    model = svc(rng, per_class, 4, kernel, proba=True)
    with avoiding({LOOP}):
        lowered = check_lowering(model, {"X": _rows(rng)}, exact_ort=False, exact_ref=False, reference=False, **TOL)
    assert "Loop" not in _ops(lowered)


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_unrolled_takes_the_loops_rounds(monkeypatch, rounds):
    """With the round limit lowered (rows that have not stopped by then keep the last p), the two
    forms still agree bit for bit, and differ from the full 100 rounds: the unrolled form writes as
    many rounds as the Loop's trip count, each one the Loop body's."""
    rng = np.random.default_rng(40)
    model = svc(rng, (2, 3, 2, 3), 3, "RBF", proba=True)
    feeds = {"X": _rows(rng, 30, 3)}
    full = _same(*_both(model), feeds)
    monkeypatch.setattr(ml_svm_prob, "LOOPS", rounds)
    short = _same(*_both(model), feeds)
    assert not same_bits(full[1], short[1])  # these rows need more rounds than that


def test_a_stopped_row_keeps_its_p_while_others_go_on():
    """Rows that stop at different rounds in one batch: each keeps the p it stopped with."""
    rng = np.random.default_rng(9)
    model = svc(rng, (2, 2, 3, 1, 2), 3, "POLY", proba=True)
    x = np.concatenate([_rows(rng, 20, 3), np.zeros((1, 3), np.float32), np.full((1, 3), np.nan, np.float32)])
    _same(*_both(model), {"X": x})


@pytest.mark.parametrize("release,has_loop", [("tract==0.23", False), ("tvm==0.27", False), ("litert==2.6", False),
                                              ("openvino==2026.4", True)])
def test_the_target_chooses_the_form(release, has_loop):
    """lower_for writes the Loop for a release that has one, the rounds for one that lacks it (the
    release's data); lower_ops alone writes the Loop; nothing is avoided after."""
    model = svc(np.random.default_rng(2), (2, 3, 2), 3, "LINEAR", proba=True)
    lowered, report = lower_for(model, parse_target(release))
    assert report is not None and ("Loop" in _ops(lowered)) == has_loop
    assert "Loop" in _ops(lower_ops(model)[0])
    assert not avoids(LOOP)


def test_convert_for_a_runtime_without_loop():
    """convert --target tract==0.23 of an SVC with probabilities: converted (it was refused naming the
    Loop), and the result in ONNX Runtime is the Loop form's bit for bit."""
    rng = np.random.default_rng(3)
    model = svc(rng, (2, 3, 2), 3, "RBF", proba=True)
    converted, _ = convert_for(model, runtime="tract==0.23")
    assert "Loop" not in _ops(converted) and "SVMClassifier" not in _ops(converted)
    feeds = {"X": _rows(rng, 16, 3)}
    for a, b in zip(ort_run(lower_ops(model)[0], feeds), ort_run(converted, feeds)):
        assert same_bits(a, b)


def test_avoiding_nests_and_restores():
    with avoiding({LOOP}):
        assert avoids(LOOP)
        with avoiding(()):
            assert not avoids(LOOP)
        assert avoids(LOOP)
    assert not avoids(LOOP)
