"""SVMClassifier's pair sums for a runtime that computes no double (LiteRT 2.6: ``avoid.DOUBLE``,
from its measured CumSum refusal): float-float pairs in float32 alone
(rewriter/convert/lowering/ml_svm_sums.py).  Against ONNX Runtime's kernel: the same labels; against
the default lowering (the same kernel values, sums in double as the kernel adds them): scores within
2^-40 of the sum of the terms' magnitudes plus an ulp (both round; a sum that cancels keeps few
bits in either), for random models and rows with NaN, infinities, signed zeros and huge
values; no double tensor in the graph; sums near cancellation where a float sum
would flip the vote; convert --target litert==2.6 writes it and LiteRT (its venv; skipped when
absent) runs it with ONNX Runtime's labels."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T

from rewriter.convert.for_target import convert_for
from rewriter.convert.lower_ops import lower_ops
from rewriter.convert.lowering.avoid import DOUBLE, LOOP, avoiding
from rewriter.convert.lowering.ml_svm_sums import FLOAT_FLOAT
from rewriter.graph import traversal
from tests.convert.support.lowering_oracle import ort_run
from tests.convert.test_lowering_ml_svm import KERNELS, svc
from tests.convert.test_lowering_ml_svm_unrolled import SPECIAL, _inputs
from tests.targets.runtime_runs import run_in

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _no_double(model):
    with avoiding({DOUBLE, LOOP}):
        return lower_ops(model)


def _doubles(model) -> list[str]:
    inferred = onnx.shape_inference.infer_shapes(model)
    values = [*inferred.graph.value_info, *inferred.graph.output]
    found = [v.name for v in values if v.type.tensor_type.elem_type == T.DOUBLE]
    found += [t.name for s in traversal.iter_scopes(model) for t in getattr(s.body, "initializer", [])
              if t.data_type == T.DOUBLE]
    return found + [n.name for n in inferred.graph.node if n.op_type == "Cast"
                    and any(a.name == "to" and a.i == T.DOUBLE for a in n.attribute)]


def _magnitudes(model, x) -> np.ndarray:
    """[N, C] per pair, the sum of |coefficient x kernel value| over its support vectors plus |rho|
    (in double): the scale of the pair sum's rounding errors, ONNX Runtime's and the lowering's."""
    a = {at.name: onnx.helper.get_attribute_value(at) for at in model.graph.node[0].attribute}
    per_class, rho = list(a["vectors_per_class"]), np.abs(np.array(a["rho"], np.float64))
    gamma, coef0, degree = a["kernel_params"]
    sv = np.array(a["support_vectors"], np.float64).reshape(sum(per_class), -1)
    x = x.astype(np.float64)
    dot = x @ sv.T
    kv = {"LINEAR": dot, "POLY": (gamma * dot + coef0) ** degree, "SIGMOID": np.tanh(gamma * dot + coef0),
          "RBF": np.exp(-gamma * ((x[:, None, :] - sv[None]) ** 2).sum(-1))}[a["kernel_type"].decode()]
    coef = np.array(a["coefficients"], np.float64).reshape(len(per_class) - 1, -1)
    start = np.concatenate([[0], np.cumsum(per_class)[:-1]])
    out = []
    for i in range(len(per_class) - 1):
        for j in range(i + 1, len(per_class)):
            ii, jj = slice(start[i], start[i] + per_class[i]), slice(start[j], start[j] + per_class[j])
            out.append(np.abs(coef[j - 1, ii] * kv[:, ii]).sum(1) + np.abs(coef[i, jj] * kv[:, jj]).sum(1))
    return np.stack(out, 1) + rho[:len(out)]


def _close(want, got, scale):
    """NaN and infinities where ONNX Runtime has them; finite scores within 2^-40 of ``scale`` (the
    sums' roundings) plus one float32 ulp (the two sums may round to neighbouring floats)."""
    want, got = np.asarray(want), np.asarray(got)
    assert want.shape == got.shape and want.dtype == got.dtype
    assert np.array_equal(np.isnan(want), np.isnan(got))
    infinite = np.isinf(want)
    assert np.array_equal(want[infinite], got[infinite])
    check = np.isfinite(want) & np.isfinite(scale)
    ulp = np.spacing(np.abs(want[check])).astype(np.float64)
    assert (np.abs(want[check].astype(np.float64) - got[check]) <= 2.0 ** -40 * scale[check] + ulp).all()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 6), min_size=2, max_size=5), st.sampled_from(KERNELS), st.integers(0, 2 ** 16),
       st.integers(1, 5), st.lists(st.tuples(st.integers(0, 17), st.integers(0, 4), st.sampled_from(SPECIAL)),
                                   max_size=4))
def test_the_same_labels_and_scores_within_the_sums_rounding_without_a_double(per_class, kernel, seed, features, specials):
    rng = np.random.default_rng(seed)
    model = svc(rng, per_class, features, kernel, params=(float(rng.uniform(0.05, 1)), float(rng.normal()), 2.0))
    lowered, report = _no_double(model)
    assert _doubles(lowered) == []
    assert any(FLOAT_FLOAT in line for line in report.exactness[("ai.onnx.ml", "SVMClassifier")])
    feeds = {"X": _inputs(rng, features, specials)}
    with avoiding({LOOP}):
        double = ort_run(lower_ops(model)[0], feeds)  # the same kernel values, summed in double
    want, got = ort_run(model, feeds), ort_run(lowered, feeds)
    assert np.array_equal(want[0], got[0]) and np.array_equal(double[0], got[0])
    scale = _magnitudes(model, feeds["X"])
    _close(double[1], got[1], scale[:, 0:1] * [1, 1] if len(per_class) == 2 else scale)


def test_a_sum_a_float_accumulation_gets_wrong_keeps_the_kernels_vote():
    """Two classes, LINEAR kernel, coefficients 1e8, -1e8 and 1 against vectors that make the
    products 1e8, 1, -1e8 in that order (float32 sums lose the 1: the vote flips; double keeps it)."""
    model = svc(np.random.default_rng(0), (2, 1), 1, "LINEAR", params=(1.0, 0.0, 0.0))
    node = model.graph.node[0]
    attrs = {a.name: a for a in node.attribute}
    attrs["support_vectors"].floats[:] = [1.0, 1.0, 1.0]
    attrs["coefficients"].floats[:] = [1e8, 1.0, -1e8]
    attrs["rho"].floats[:] = [-0.5]
    feeds = {"X": np.array([[1.0], [2.0], [-1.0]], np.float32)}
    want = ort_run(model, feeds)
    lowered, _ = _no_double(model)
    got = ort_run(lowered, feeds)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    x = feeds["X"][:, 0].astype(np.float32)
    naive = (np.float32(1e8) * x + x) + np.float32(-1e8) * x + np.float32(-0.5)  # the float order
    assert not np.array_equal(naive > 0, want[1][:, 1] > 0)  # (so the case does tell float from double)


def test_lower_ops_alone_and_other_targets_keep_the_double_sums():
    model = svc(np.random.default_rng(1), (2, 3), 3, "RBF")
    assert _doubles(lower_ops(model)[0])
    assert _doubles(convert_for(model, runtime="openvino==2026.4")[0])
    assert _doubles(convert_for(model, runtime="litert==2.6")[0]) == []


@pytest.mark.parametrize("proba", [False, True], ids=["votes", "proba"])
def test_in_litert_the_labels_are_onnxruntimes(proba):
    rng = np.random.default_rng(5)
    model = svc(rng, (3, 2, 4), 4, "RBF", proba=proba)
    result, _ = convert_for(model, runtime="litert==2.6")
    feeds = {"X": rng.normal(size=(8, 4)).astype(np.float32)}
    want = ort_run(model, feeds)
    got = run_in("litert", "2.6", result, feeds)
    assert got["ok"], got
    assert np.array_equal(got["values"][0], want[0])
    np.testing.assert_allclose(got["values"][1], want[1], rtol=1e-5, atol=1e-6)
