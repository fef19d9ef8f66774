"""TreeEnsembleRegressor and TreeEnsembleClassifier lowered to the tree-traversal graph: random
ensembles (every branch mode, NaN tracks, inputs tied with thresholds, several weights per leaf,
leaves that score only some targets, shuffled node lists), checked against ONNX Runtime's own
kernel (one thread: it adds the trees in order) in ONNX Runtime and onnx.reference, bit for bit
without post_transform and within the stated tolerance with one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from onnx import TensorProto as T, numpy_helper

from rewriter.errors import RewriterError
from rewriter.convert.lower_ops import lower_ops
from tests.convert.support.lowering_oracle import assert_outputs, check_lowering, one_node, ort_run
from tests.convert.support.lowering_trees import MODES, random_forest, random_inputs

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TRANSFORMS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
TOL = dict(rtol=1e-5, atol=1e-6)
SLOW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _regressor(attrs, targets, elem=T.FLOAT, **kw):
    return one_node("TreeEnsembleRegressor", [("X", elem, [None, 4])], [("Y", T.FLOAT, [None, targets])],
                    n_targets=targets, **kw, **attrs)


def _classifier(attrs, labels, elem=T.FLOAT, **kw):
    strings = isinstance(labels[0], str)
    key = "classlabels_strings" if strings else "classlabels_int64s"
    return one_node("TreeEnsembleClassifier", [("X", elem, [None, 4])],
                    [("Y", T.STRING if strings else T.INT64, [None]), ("Z", T.FLOAT, [None, len(labels)])],
                    **{key: labels}, **kw, **attrs)


def _check(model, x, how):
    try:
        ort_run(model, {"X": x})
    except Exception:  # onnxruntime fails on this ensemble and input: nothing to compare with
        return None
    return check_lowering(model, {"X": x}, exact_ort=how == "NONE", exact_ref=how == "NONE", **TOL)


@SLOW
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 1, 3]), st.sampled_from(["SUM", "AVERAGE", "MIN", "MAX"]),
       st.sampled_from(TRANSFORMS), st.booleans())
def test_random_regressors(seed, targets, aggregate, how, with_base):
    rng = np.random.default_rng(seed)
    attrs = random_forest(rng, trees=int(rng.integers(1, 6)), depth=int(rng.integers(0, 5)), targets=targets,
                          weights_per_leaf=int(rng.choice([1, 1, 2])), shuffle=bool(rng.random() < 0.3))
    base = {"base_values": rng.normal(size=targets).astype(np.float32).tolist()} if with_base else {}
    model = _regressor(attrs, targets, aggregate_function=aggregate, post_transform=how, **base)
    x = random_inputs(rng, 40, 4)
    _check(model, x * np.float32(0.01) if how == "PROBIT" else x, how)


@SLOW
@given(st.integers(0, 2**32 - 1), st.sampled_from([2, 2, 3, 4]), st.sampled_from(TRANSFORMS),
       st.sampled_from(["all", "one", "one positive"]), st.booleans())
def test_random_classifiers(seed, classes, how, weighted, strings):
    rng = np.random.default_rng(seed)
    attrs = random_forest(rng, trees=int(rng.integers(1, 6)), depth=int(rng.integers(0, 4)), targets=classes,
                          weights_per_leaf=int(rng.choice([1, 1, 2])), prefix="class")
    assume(attrs["class_ids"])  # (no leaf weighs anything: no ensemble to speak of)
    if weighted != "all":  # one class weighted: onnxruntime's binary_case
        keep = [i for i, c in enumerate(attrs["class_ids"]) if c == 1] or [0]
        for key in ("class_treeids", "class_nodeids", "class_ids", "class_weights"):
            attrs[key] = [attrs[key][i] for i in keep]
        attrs["class_ids"] = [1] * len(keep)
        if weighted == "one positive":
            attrs["class_weights"] = [abs(w) for w in attrs["class_weights"]]
    n_base = int(rng.choice([0, 1, 2])) if classes == 2 else int(rng.choice([0, classes]))
    base = {"base_values": rng.normal(size=n_base).astype(np.float32).tolist()} if n_base else {}
    labels = [f"c{i}" for i in range(classes)] if strings else [int(v) for v in rng.permutation(10)[:classes]]
    model = _classifier(attrs, labels, post_transform=how, **base)
    try:
        _check(model, random_inputs(rng, 40, 4), how)
    except RewriterError as e:  # the refusals test below names when
        assert "left unwritten" in str(e)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("track", [0, 1])
def test_each_mode_with_ties_and_nan(mode, track):
    rng = np.random.default_rng(MODES.index(mode))
    attrs = random_forest(rng, trees=4, depth=4, modes=[mode], tracks=False, leaf_prob=0.0)
    attrs["nodes_missing_value_tracks_true"] = [track] * len(attrs["nodes_modes"])
    _check(_regressor(attrs, 1), random_inputs(rng, 60, 4, nan=0.3), "NONE")


@pytest.mark.parametrize("elem,dtype", [(T.DOUBLE, np.float64), (T.FLOAT, np.float32)])
def test_tensor_attributes_and_double_input(elem, dtype):
    """ai.onnx.ml 3's *_as_tensor attributes; double input sums in double, as the kernel does."""
    rng = np.random.default_rng(7)
    attrs = random_forest(rng, trees=5, depth=3, targets=2)
    attrs["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(attrs.pop("nodes_values"), dtype) / 3)
    attrs["target_weights_as_tensor"] = numpy_helper.from_array(np.array(attrs.pop("target_weights"), dtype) / 7)
    attrs["base_values_as_tensor"] = numpy_helper.from_array(np.array([0.1, -0.2], dtype))
    model = _regressor(attrs, 2, elem=elem)
    model.opset_import[1].version = 3
    _check(model, random_inputs(rng, 30, 4, dtype=dtype) / dtype(3), "NONE")


@pytest.mark.parametrize("elem,dtype", [(T.DOUBLE, np.float64), (T.INT64, np.int64), (T.INT32, np.int32)])
def test_classifier_input_types(elem, dtype):
    rng = np.random.default_rng(11)
    attrs = random_forest(rng, trees=4, depth=3, targets=3, prefix="class")
    model = _classifier(attrs, [0, 1, 2], elem=elem, base_values=[0.5, -0.5, 0.0])
    x = random_inputs(rng, 30, 4, nan=0.0) * 4
    _check(model, x.astype(dtype), "NONE")


def test_shared_true_child_and_weightless_leaf():
    """LightGBM's set membership shares a child between BRANCH_EQ nodes; a one-target leaf without a
    weight adds its nodes_values entry (what onnxruntime reads)."""
    attrs = dict(nodes_treeids=[0] * 5, nodes_nodeids=[0, 1, 2, 3, 4], nodes_featureids=[0, 0, 0, 0, 0],
                 nodes_modes=["BRANCH_EQ", "BRANCH_EQ", "LEAF", "LEAF", "LEAF"], nodes_truenodeids=[2, 2, 0, 0, 0],
                 nodes_falsenodeids=[1, 3, 0, 0, 0], nodes_values=[1.0, 2.0, 0.0, 0.0, 4.5],
                 target_treeids=[0, 0], target_nodeids=[2, 3], target_ids=[0, 0], target_weights=[10.0, 20.0])
    model = _regressor(attrs, 1)
    _check(model, np.array([[1, 0, 0, 0], [2, 0, 0, 0], [3, 0, 0, 0], [np.nan, 0, 0, 0]], np.float32), "NONE")


def test_many_trees_many_rows_with_threads():
    """Past 50 rows onnxruntime (two threads) splits the trees among threads: the same labels, sums
    within a few ulp of the one-thread order the lowering keeps."""
    rng = np.random.default_rng(5)
    attrs = random_forest(rng, trees=90, depth=4, targets=3, prefix="class", tracks=False)
    model = _classifier(attrs, [0, 1, 2])
    x = random_inputs(rng, 200, 4, nan=0.0)
    lowered = check_lowering(model, {"X": x}, reference=False)
    assert_outputs(ort_run(model, {"X": x}, threads=2), ort_run(lowered, {"X": x}, threads=2), exact=False, **TOL)


def test_refusals_name_the_reason():
    rng = np.random.default_rng(3)
    attrs = random_forest(rng, trees=2, depth=2)
    attrs["nodes_treeids"] = attrs["nodes_treeids"][1:] + attrs["nodes_treeids"][:1]
    with pytest.raises(RewriterError, match="not listed together|does not exist"):
        lower_ops(_regressor(attrs, 1))
    cycle = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                 nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"], nodes_truenodeids=[1, 0, 0],
                 nodes_falsenodeids=[2, 2, 0], nodes_values=[0.0, 1.0, 0.0], target_treeids=[0], target_nodeids=[2],
                 target_ids=[0], target_weights=[1.0])
    with pytest.raises(RewriterError, match="cycle"):
        lower_ops(_regressor(cycle, 1))
    attrs = random_forest(rng, trees=1, depth=1, targets=2, prefix="class")
    keep = [i for i, c in enumerate(attrs["class_ids"]) if c == 0]
    for key in ("class_treeids", "class_nodeids", "class_ids", "class_weights"):
        attrs[key] = [attrs[key][i] for i in keep]
    with pytest.raises(RewriterError, match="left unwritten"):
        lower_ops(_classifier(attrs, [0, 1], post_transform="PROBIT"))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 3]), st.sampled_from(["SUM", "AVERAGE", "MIN", "MAX"]),
       st.integers(0, 4))
def test_tree_ensemble_opset_5(seed, targets, aggregate, post):
    """ai.onnx.ml 5's TreeEnsemble (written from a random regressor by the project's adapter); post
    transform codes 1 and 2 as onnxruntime reads them (LOGISTIC, SOFTMAX)."""
    from onnx import helper

    from rewriter.convert.adapters.ml_trees import regressor_to_tree_ensemble

    rng = np.random.default_rng(seed)
    attrs = random_forest(rng, trees=int(rng.integers(1, 5)), depth=int(rng.integers(0, 4)), targets=targets)
    assume(attrs["target_ids"])  # a forest with no vote at all (every leaf skipped every target) has no node
    regressor = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", n_targets=targets,
                                 aggregate_function=aggregate, **attrs)
    try:
        node = regressor_to_tree_ensemble(regressor, T.FLOAT)
    except RewriterError:  # an ensemble TreeEnsemble cannot hold (a leaf without a vote under MIN/MAX)
        assume(False)
    kept = [a for a in node.attribute if a.name != "post_transform"]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute("post_transform", post)])
    model = one_node("TreeEnsemble", [("X", T.FLOAT, [None, 4])], [("Y", T.FLOAT, [None, targets])], opset=21,
                     ml_opset=5)
    model.graph.node[0].CopyFrom(node)
    x = random_inputs(rng, 40, 4)
    _check(model, x * np.float32(0.01) if post == 4 else x, "NONE" if post == 0 else "transform")
