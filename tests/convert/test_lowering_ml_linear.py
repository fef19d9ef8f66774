"""LinearRegressor and LinearClassifier lowered to a Gemm and the kernels' labels and post_transform:
bit-identical in ONNX Runtime (the same Gemm routine, Sigmoid/Softmax through the same MLAS
routines), within the stated tolerance where exp/log are the runtime's or onnx.reference sums the
products in its own order; labels always equal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto as T

from rewriter.errors import RewriterError
from rewriter.convert.lower_ops import lower_ops
from tests.convert.support.lowering_oracle import check_lowering, one_node

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TRANSFORMS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
TOL = dict(rtol=1e-5, atol=1e-6)  # docs/lowering.md: exp/log of the runtime, products summed in its order


def _inputs(rng, how, rows=9, features=4):
    if how == "PROBIT":  # scores inside (0, 1), where probit is defined
        return (rng.uniform(0.0, 0.1, size=(rows, features))).astype(np.float32)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    x[0] = 0
    return x


def _ort_exact(how, columns, binary_pair=False):
    """Where the lowering claims onnxruntime's bits: no transform, or the MLAS ones."""
    if binary_pair:
        return how != "LOGISTIC"
    return how == "NONE" or (columns > 1 and how == "LOGISTIC") or (how == "SOFTMAX" and columns >= 5) \
        or (columns == 1 and how != "PROBIT")


@pytest.mark.parametrize("targets", [1, 3, 6])
@pytest.mark.parametrize("how", TRANSFORMS)
def test_linear_regressor(targets, how):
    rng = np.random.default_rng(targets)
    coef = rng.normal(size=4 * targets).astype(np.float32).tolist()
    model = one_node("LinearRegressor", [("X", T.FLOAT, [None, 4])], [("Y", T.FLOAT, [None, targets])],
                     coefficients=coef, intercepts=rng.normal(size=targets).tolist(), targets=targets,
                     post_transform=how)
    check_lowering(model, {"X": _inputs(rng, how)}, exact_ort=_ort_exact(how, targets), exact_ref=False, **TOL)


def test_linear_regressor_default_targets_and_no_intercepts():
    """targets defaults to 1; intercepts of the wrong count are ignored, as the kernel does."""
    model = one_node("LinearRegressor", [("X", T.FLOAT, [None, 3])], [("Y", T.FLOAT, [None, 1])],
                     coefficients=[1.0, -2.0, 0.5], intercepts=[1.0, 2.0])
    check_lowering(model, {"X": _inputs(np.random.default_rng(0), "NONE", features=3)}, exact_ref=False, **TOL)


def test_linear_regressor_rank_one_input():
    model = one_node("LinearRegressor", [("X", T.FLOAT, [3])], [("Y", T.FLOAT, [1, 2])],
                     coefficients=[1.0, -2.0, 0.5, 3.0, 0.0, 1.0], intercepts=[1.0, 2.0], targets=2)
    check_lowering(model, {"X": np.array([1, 2, 3], np.float32)}, exact_ref=False, **TOL)


LABELS = [([0, 1], 1), ([], 1), (["no", "yes"], 1), ([5, 6, 7], 3), (["x", "y", "z"], 3),
          ([1, 2, 3, 4, 5], 5), ([3, 4], 2)]


@pytest.mark.parametrize("labels,classes", LABELS, ids=[f"{len(lb)}labels-{c}classes" for lb, c in LABELS])
@pytest.mark.parametrize("how", TRANSFORMS)
def test_linear_classifier(labels, classes, how):
    strings = bool(labels) and isinstance(labels[0], str)
    pair = classes == 1 and len(labels) == 2
    if pair and how == "PROBIT":
        pytest.skip("refused: onnxruntime leaves a column unwritten (test_linear_classifier_refusals)")
    rng = np.random.default_rng(classes)
    kw = {"classlabels_strings": labels} if strings else ({"classlabels_ints": labels} if labels else {})
    model = one_node("LinearClassifier", [("X", T.FLOAT, [None, 4])],
                     [("Y", T.STRING if strings else T.INT64, [None]), ("Z", T.FLOAT, [None, 2 if pair else classes])],
                     coefficients=rng.normal(size=4 * classes).astype(np.float32).tolist(),
                     intercepts=rng.normal(size=classes).tolist(), post_transform=how, **kw)
    check_lowering(model, {"X": _inputs(rng, how)}, exact_ort=_ort_exact(how, classes, pair), exact_ref=False, **TOL)


@pytest.mark.parametrize("elem,dtype", [(T.DOUBLE, np.float64), (T.INT64, np.int64), (T.INT32, np.int32)])
def test_linear_classifier_casts_its_input_to_float(elem, dtype):
    model = one_node("LinearClassifier", [("X", elem, [None, 3])], [("Y", T.INT64, [None]), ("Z", T.FLOAT, [None, 3])],
                     coefficients=[0.5, -1.0, 2.0, 1.0, 1.0, 1.0, -3.0, 0.25, 0.0], intercepts=[0.1, 0.2, 0.3],
                     classlabels_ints=[0, 1, 2])
    x = np.array([[1, 2, 3], [-4, 5, 0], [7, -8, 9]], dtype=dtype)
    check_lowering(model, {"X": x}, exact_ref=False, **TOL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 6), st.lists(st.floats(-3, 3, width=32) | st.just(float("nan")), min_size=12, max_size=12))
def test_linear_classifier_labels_with_ties_and_nan(classes, values):
    """The label is the first class of highest score; NaN never wins after the first, as in the kernel."""
    coef = np.zeros((classes, 2), np.float32)
    coef[:, 0] = 1.0  # every class scores x0 + intercept: ties everywhere
    model = one_node("LinearClassifier", [("X", T.FLOAT, [None, 2])],
                     [("Y", T.INT64, [None]), ("Z", T.FLOAT, [None, classes])], coefficients=coef.ravel().tolist(),
                     intercepts=[0.0, 0.5, 0.5, 0.0, 1.0, 1.0][:classes],
                     classlabels_ints=list(range(10, 10 + classes)))
    check_lowering(model, {"X": np.array(values, np.float32).reshape(6, 2)}, exact_ref=False, **TOL)


def test_linear_classifier_refusals():
    pair_probit = one_node("LinearClassifier", [("X", T.FLOAT, [None, 2])], [("Y", T.INT64, [None]),
                                                                              ("Z", T.FLOAT, [None, 2])],
                           coefficients=[1.0, 2.0], intercepts=[0.5], classlabels_ints=[0, 1], post_transform="PROBIT")
    with pytest.raises(RewriterError, match="second probability column unwritten"):
        lower_ops(pair_probit)
    too_few = one_node("LinearClassifier", [("X", T.FLOAT, [None, 2])], [("Y", T.INT64, [None]),
                                                                         ("Z", T.FLOAT, [None, 3])],
                       coefficients=[1.0] * 6, intercepts=[0.5, 0.1, 0.2], classlabels_ints=[0, 1])
    with pytest.raises(RewriterError, match="3 classes but 2 class labels"):
        lower_ops(too_few)


def test_unread_probabilities_are_not_computed():
    model = one_node("LinearClassifier", [("X", T.FLOAT, [None, 2])], [("Y", T.INT64, [None]),
                                                                       ("Z", T.FLOAT, [None, 2])],
                     coefficients=[1.0, 2.0, -1.0, 0.5], intercepts=[0.5, 0.1], classlabels_ints=[4, 9],
                     post_transform="SOFTMAX")
    del model.graph.output[1]  # Z: an output of the node nothing reads
    x = _inputs(np.random.default_rng(3), "NONE", features=2)
    lowered = check_lowering(model, {"X": x}, exact_ref=False, **TOL)
    assert not any(n.op_type in ("Exp", "Softmax") for n in lowered.graph.node)
