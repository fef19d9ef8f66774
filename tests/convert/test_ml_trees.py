"""TreeEnsemble-5 <-> TreeEnsembleRegressor-3 (rewriter.convert.adapters.ml_trees).

Seeded random ensembles (1-4 trees of depth 1-4, every comparison mode, thresholds on a grid
the inputs also hit, NaN inputs with missing-value tracking, shared leaves, shuffled listings,
1-3 targets, every aggregate function) are converted and must compute what the original
computes: bit for bit under onnxruntime, and under onnx.reference as a second oracle (to 1e-6
for AVERAGE, which onnx.reference's TreeEnsemble divides vote by vote). The refusals are checked
one by one.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from rewriter.convert.adapters.ml_trees import regressor_to_tree_ensemble, tree_ensemble_to_regressor
from rewriter.errors import ConversionError

ML = "ai.onnx.ml"
F = 4  # input features
GRID = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5], np.float32)  # thresholds, and input values hitting them
AGGS = ("AVERAGE", "SUM", "MIN", "MAX")
NEQ = 5


# ---------------------------------------------------------------- models and runs

def make_model(node, n_targets, ml_opset, opset=19):
    graph = helper.make_graph([node], "trees", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, F])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n_targets])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(ML, ml_opset)],
                          ir_version=10)
    onnx.checker.check_model(m, full_check=True)
    return m


def run_ort(m, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]


def run_ref(m, x):
    return ReferenceEvaluator(m).run(None, {"X": x})[0]


def inputs(rng, rows=40, nan=0.15):
    x = np.where(rng.random((rows, F)) < 0.6, rng.choice(GRID, (rows, F)),
                 rng.uniform(-2, 2, (rows, F))).astype(np.float32)
    x[rng.random((rows, F)) < nan] = np.nan
    return x


def neq_nan_rows(x, features):
    """Rows where onnx.reference's two implementations disagree: a NaN reaching a BRANCH_NEQ node whose
    missing value goes false (its TreeEnsemble evaluates NaN != split, true; its regressor only the flag)."""
    return np.isnan(x[:, sorted(features)]).any(axis=1) if features else np.zeros(len(x), bool)


def assert_same(m1, m2, x, *, reference=True, skip_rows=None, average=False):
    np.testing.assert_array_equal(run_ort(m2, x), run_ort(m1, x))
    if reference:
        keep = ~skip_rows if skip_rows is not None else slice(None)
        assert skip_rows is None or keep.sum() >= len(x) // 3
        a, b = run_ref(m1, x)[keep], run_ref(m2, x)[keep]
        if average:
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(b, a)


def attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def reference_misreads(te_node):
    """onnx.reference's TreeEnsemble takes a one-leaf tree's leaf to be leaf tree_roots[t], not the
    leaf both its branches name (the schema, onnxruntime): wrong whenever the two indices differ."""
    a = attrs(te_node)
    return any(a["nodes_trueleafs"][r] and a["nodes_falseleafs"][r]
               and a["nodes_truenodeids"][r] == a["nodes_falsenodeids"][r] != r for r in a["tree_roots"])


# ---------------------------------------------------------------- random TreeEnsemble-5

def random_tree_ensemble(rng, n_targets, agg, post=0, mvt=True, name="te", weights=None):
    """A TreeEnsemble node and the features of its NEQ nodes whose NaN goes false."""
    modes, feats, splits, tids, tleaf, fids, fleaf, miss = [], [], [], [], [], [], [], []
    leaf_t, leaf_w, roots = [], [], []

    def leaf():
        if leaf_t and rng.random() < 0.15:  # a leaf shared with another branch, maybe of another tree
            return int(rng.integers(len(leaf_t))), 1
        leaf_t.append(int(rng.integers(n_targets)))
        leaf_w.append(weights(rng) if weights else np.float32(rng.normal()))
        return len(leaf_t) - 1, 1

    def branch():
        modes.append(int(rng.integers(6)))
        feats.append(int(rng.integers(F)))
        splits.append(rng.choice(GRID))
        miss.append(int(mvt and rng.random() < 0.5))
        for col in (tids, tleaf, fids, fleaf):
            col.append(0)
        return len(modes) - 1

    def build(depth, top):
        if depth == 0 or (not top and rng.random() < 0.25):
            return leaf()
        i = branch()
        tids[i], tleaf[i] = build(depth - 1, False)
        fids[i], fleaf[i] = build(depth - 1, False)
        return i, 0

    for _ in range(int(rng.integers(1, 5))):
        if rng.random() < 0.1:  # a one-leaf tree
            i = branch()
            j, _ = leaf()
            tids[i] = fids[i] = j
            tleaf[i] = fleaf[i] = 1
            roots.append(i)
        else:
            roots.append(build(int(rng.integers(1, 5)), True)[0])
    # shuffle where the nodes and the leaves are listed
    pn, pl = rng.permutation(len(modes)), rng.permutation(len(leaf_t))
    new_n, new_l = np.argsort(pn), np.argsort(pl)

    def remap(ids, leafs):
        return [int(new_l[c]) if lf else int(new_n[c]) for c, lf in zip(ids, leafs)]

    tids, fids = remap(tids, tleaf), remap(fids, fleaf)
    perm = lambda col: [col[k] for k in pn]  # noqa: E731
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], name=name, domain=ML, n_targets=n_targets,
        aggregate_function=AGGS.index(agg), post_transform=post, tree_roots=[int(new_n[r]) for r in roots],
        nodes_modes=numpy_helper.from_array(np.array(perm(modes), np.uint8)),
        nodes_featureids=perm(feats), nodes_splits=numpy_helper.from_array(np.array(perm(splits), np.float32)),
        nodes_truenodeids=perm(tids), nodes_trueleafs=perm(tleaf), nodes_falsenodeids=perm(fids),
        nodes_falseleafs=perm(fleaf), nodes_missing_value_tracks_true=perm(miss),
        nodes_hitrates=numpy_helper.from_array(rng.random(len(modes)).astype(np.float32)),
        leaf_targetids=[leaf_t[k] for k in pl],
        leaf_weights=numpy_helper.from_array(np.array([leaf_w[k] for k in pl], np.float32)))
    neq = {f for m, f, s in zip(modes, feats, miss) if m == NEQ and not s}
    return node, neq


# ---------------------------------------------------------------- random TreeEnsembleRegressor

def random_regressor(rng, n_targets, agg, post="NONE", base=False, multi=True, name="reg"):
    """A TreeEnsembleRegressor node (trees listed one after the other, each root first and the rest
    shuffled, node ids a permutation) and the features of its NEQ nodes whose NaN goes false."""
    cols = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                            "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                            "nodes_hitrates")}
    votes = []
    neq = set()
    for tree in range(int(rng.integers(1, 5))):
        nodes = []  # (mode, feature, split, mvt, true, false) by local index, 0 the root

        def build(depth, top):
            i = len(nodes)
            if depth == 0 or (not top and rng.random() < 0.25) or (top and rng.random() < 0.1):
                nodes.append(["LEAF", 0, 0.0, 0, 0, 0])
                return i
            nodes.append([("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")[
                rng.integers(6)], int(rng.integers(F)), float(rng.choice(GRID)), int(rng.random() < 0.5), 0, 0])
            nodes[i][4] = build(depth - 1, False)
            nodes[i][5] = build(depth - 1, False)
            return i

        build(int(rng.integers(1, 5)), True)
        ids = [0, *(1 + rng.permutation(len(nodes) - 1))]  # root keeps id 0
        for i in [0, *(1 + rng.permutation(len(nodes) - 1))]:
            mode, feat, split, miss, t, f = nodes[i]
            cols["nodes_treeids"].append(tree)
            cols["nodes_nodeids"].append(int(ids[i]))
            cols["nodes_modes"].append(mode)
            cols["nodes_featureids"].append(feat)
            cols["nodes_values"].append(split)
            cols["nodes_missing_value_tracks_true"].append(miss)
            cols["nodes_hitrates"].append(float(rng.random()))
            cols["nodes_truenodeids"].append(int(ids[t]) if mode != "LEAF" else 0)
            cols["nodes_falsenodeids"].append(int(ids[f]) if mode != "LEAF" else 0)
            if mode == "BRANCH_NEQ" and not miss:
                neq.add(feat)
            if mode == "LEAF":
                if base and n_targets > 1:  # every target, some twice (onnxruntime adds a base only where voted)
                    targets = [*rng.permutation(n_targets), *rng.integers(n_targets, size=int(rng.integers(2)))]
                elif n_targets == 1 or not multi:
                    targets = [rng.integers(n_targets)]
                else:  # repeated targets allowed
                    targets = rng.integers(n_targets, size=int(rng.integers(1, n_targets + 2)))
                for t in targets:
                    votes.append((tree, int(ids[i]), int(t), float(np.float32(rng.normal()))))
            elif rng.random() < 0.1:
                votes.append((tree, int(ids[i]), 0, 100.0))  # a vote on a branch node: both runtimes ignore it
    order = rng.permutation(len(votes))
    votes = [votes[k] for k in order]
    kw = dict(cols, target_treeids=[v[0] for v in votes], target_nodeids=[v[1] for v in votes],
              target_ids=[v[2] for v in votes], target_weights=[v[3] for v in votes])
    if base:
        kw["base_values"] = [float(np.float32(v)) if rng.random() < 0.7 else 0.0 for v in rng.normal(size=n_targets)]
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], name=name, domain=ML, n_targets=n_targets,
                            aggregate_function=agg, post_transform=post, **kw)
    return node, neq


# ---------------------------------------------------------------- TreeEnsemble -> regressor

@pytest.mark.parametrize("seed", range(40))
def test_tree_ensemble_becomes_an_equal_regressor(seed):
    rng = np.random.default_rng(seed)
    agg, n_targets = AGGS[seed % 4], 1 + seed % 3
    node, neq = random_tree_ensemble(rng, n_targets, agg)
    new = tree_ensemble_to_regressor(node)
    assert (new.op_type, new.domain, new.name, list(new.input), list(new.output)) == (
        "TreeEnsembleRegressor", ML, "te", ["X"], ["Y"])
    a = attrs(new)
    assert a["aggregate_function"] == agg.encode() and a["n_targets"] == n_targets and "base_values" not in a
    assert len(a["nodes_hitrates"]) == len(a["nodes_modes"])
    for ids in ({}, {"input_elem_type": TensorProto.FLOAT}):
        assert tree_ensemble_to_regressor(node, **ids) == new
    opset = 13 + seed % 9
    original, converted = make_model(node, n_targets, 5, opset), make_model(new, n_targets, 3, opset)
    x = inputs(rng)
    ref = not reference_misreads(node)
    assert_same(original, converted, x, reference=ref, skip_rows=neq_nan_rows(x, neq), average=agg == "AVERAGE")
    back = regressor_to_tree_ensemble(new)
    assert not reference_misreads(back)
    assert_same(original, make_model(back, n_targets, 5, opset), x, reference=ref)  # the same op: exact


@pytest.mark.parametrize("post,agg", [(0, "SUM"), (3, "SUM"), (3, "MAX"), (4, "AVERAGE"), (4, "MIN")])
@pytest.mark.parametrize("n_targets", [1, 3])
def test_post_transforms_that_runtimes_agree_on(post, agg, n_targets):
    rng = np.random.default_rng(100 + post * 7 + n_targets)
    node, _ = random_tree_ensemble(rng, n_targets, agg, post=post,
                                   weights=lambda r: np.float32(r.uniform(0.05, 0.95)))
    new = tree_ensemble_to_regressor(node)
    assert attrs(new)["post_transform"] == {0: b"NONE", 3: b"SOFTMAX_ZERO", 4: b"PROBIT"}[post]
    x = inputs(rng, nan=0.05)
    original, converted = make_model(node, n_targets, 5), make_model(new, n_targets, 3)
    assert_same(original, converted, x, reference=False)
    if post == 4:
        assert np.isfinite(run_ort(original, x)).mean() > 0.5  # the probits compared are mostly numbers
    back = make_model(regressor_to_tree_ensemble(new), n_targets, 5)
    assert_same(original, back, x, reference=False)


def test_missing_values_and_modes_on_their_thresholds():
    """One node per mode on feature 0 (split 0.5), each tree to leaf weights 1 (true) and 2 (false),
    the missing value going true on LEQ/GT/EQ and false elsewhere; known answers."""
    n = 6
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain=ML, n_targets=n, aggregate_function=1, tree_roots=list(range(n)),
        nodes_modes=numpy_helper.from_array(np.arange(n, dtype=np.uint8)), nodes_featureids=[0] * n,
        nodes_splits=numpy_helper.from_array(np.full(n, 0.5, np.float32)),
        nodes_truenodeids=[2 * i for i in range(n)], nodes_trueleafs=[1] * n,
        nodes_falsenodeids=[2 * i + 1 for i in range(n)], nodes_falseleafs=[1] * n,
        nodes_missing_value_tracks_true=[1, 0, 0, 1, 1, 0],
        leaf_targetids=[i // 2 for i in range(2 * n)],
        leaf_weights=numpy_helper.from_array(np.tile(np.float32([1, 2]), n)))
    x = np.zeros((4, F), np.float32)
    x[:, 0] = [0.25, 0.5, 0.75, np.nan]
    expected = np.array([[1, 1, 2, 2, 2, 1],  # 0.25: <=, <, !>=, !>, !==, !=
                         [1, 2, 1, 2, 1, 2],  # 0.5 on the threshold
                         [2, 2, 1, 1, 2, 1],  # 0.75
                         [1, 2, 2, 1, 1, 1]],  # NaN: the flag, and NaN != 0.5 true (onnxruntime)
                        np.float32)
    new = make_model(tree_ensemble_to_regressor(node), n, 3)
    np.testing.assert_array_equal(run_ort(make_model(node, n, 5), x), expected)
    np.testing.assert_array_equal(run_ort(new, x), expected)
    np.testing.assert_array_equal(run_ref(new, x)[:3], expected[:3])
    assert attrs(tree_ensemble_to_regressor(node))["nodes_modes"] == [
        b"BRANCH_LEQ", b"LEAF", b"LEAF", b"BRANCH_LT", b"LEAF", b"LEAF", b"BRANCH_GTE", b"LEAF", b"LEAF",
        b"BRANCH_GT", b"LEAF", b"LEAF", b"BRANCH_EQ", b"LEAF", b"LEAF", b"BRANCH_NEQ", b"LEAF", b"LEAF"]


def test_a_one_leaf_tree_is_the_leaf_its_branches_name():
    """Tree 1's root is node 1, both branches to leaf 2 (weight 4): onnxruntime and the converted
    regressor give 4 (onnx.reference's TreeEnsemble would take leaf 1, weight 2)."""
    node = small_te(tree_roots=[0, 1], nodes_modes=numpy_helper.from_array(np.uint8([0, 0])),
                    nodes_featureids=[0, 0], nodes_splits=numpy_helper.from_array(np.float32([0.5, 0.5])),
                    nodes_truenodeids=[0, 2], nodes_trueleafs=[1, 1], nodes_falsenodeids=[1, 2],
                    nodes_falseleafs=[1, 1], leaf_targetids=[0, 0, 0],
                    leaf_weights=numpy_helper.from_array(np.float32([1, 2, 4])))
    x = np.array([[0, 0, 0, 0], [1, 0, 0, 0]], np.float32)
    expected = np.float32([[5], [6]])
    np.testing.assert_array_equal(run_ort(make_model(node, 1, 5), x), expected)
    new = make_model(tree_ensemble_to_regressor(node), 1, 3)
    np.testing.assert_array_equal(run_ort(new, x), expected)
    np.testing.assert_array_equal(run_ref(new, x), expected)
    back = regressor_to_tree_ensemble(tree_ensemble_to_regressor(node))
    np.testing.assert_array_equal(run_ref(make_model(back, 1, 5), x), expected)


# ---------------------------------------------------------------- regressor -> TreeEnsemble

@pytest.mark.parametrize("seed", range(40))
def test_regressor_becomes_an_equal_tree_ensemble_and_back(seed):
    rng = np.random.default_rng(1000 + seed)
    agg, n_targets = AGGS[seed % 4], 1 + (seed // 4) % 3
    version = 1 if seed % 5 == 0 else 3
    node, neq = random_regressor(rng, n_targets, agg, base=agg == "SUM" or seed % 3 == 0)
    if agg != "SUM" and "base_values" in attrs(node):
        node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], name="reg", domain=ML,
                                **{**attrs(node), "base_values": [0.0] * n_targets})  # zeros: dropped
    new = regressor_to_tree_ensemble(node)
    assert (new.op_type, new.domain, new.name, list(new.input), list(new.output)) == (
        "TreeEnsemble", ML, "reg", ["X"], ["Y"])
    assert attrs(new)["aggregate_function"] == seed % 4
    opset = 13 + seed % 9
    original, converted = make_model(node, n_targets, version, opset), make_model(new, n_targets, 5, opset)
    x = inputs(rng)
    skip = neq_nan_rows(x, neq)
    assert_same(original, converted, x, skip_rows=skip, average=agg == "AVERAGE")
    again = tree_ensemble_to_regressor(new)
    assert_same(original, make_model(again, n_targets, 3, opset), x)  # the same op: exact


@pytest.mark.parametrize("agg", AGGS)
def test_leaves_with_several_votes_become_tree_copies(agg):
    rng = np.random.default_rng(7)
    node, _ = random_regressor(rng, 3, agg)
    a = attrs(node)
    counts = np.unique(list(zip(a["target_treeids"], a["target_nodeids"])), axis=0, return_counts=True)[1]
    assert counts.max() > 1
    new = regressor_to_tree_ensemble(node)
    n_trees = len(set(a["nodes_treeids"]))
    roots = len(attrs(new)["tree_roots"])
    assert roots > n_trees
    if agg == "AVERAGE":
        assert roots % n_trees == 0 and (roots // n_trees) & (roots // n_trees - 1) == 0  # a power of two
    x = inputs(rng, nan=0.0)
    assert_same(make_model(node, 3, 3), make_model(new, 3, 5), x, average=agg == "AVERAGE")


def test_sum_base_values_become_last_one_leaf_trees():
    rng = np.random.default_rng(11)
    node, _ = random_regressor(rng, 3, "SUM", base=True)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML,
                            **{**attrs(node), "base_values": [0.5, 0.0, -2.25]})
    new = regressor_to_tree_ensemble(node)
    a = attrs(new)
    assert a["tree_roots"][-2:] == [len(a["nodes_featureids"]) - 2, len(a["nodes_featureids"]) - 1]
    assert a["leaf_targetids"][-4:] == [0, 0, 2, 2]
    assert numpy_helper.to_array(a["leaf_weights"])[-4:].tolist() == [0.5, 0.5, -2.25, -2.25]
    x = inputs(rng)
    assert_same(make_model(node, 3, 3), make_model(new, 3, 5), x, reference=False)
    np.testing.assert_array_equal(run_ref(make_model(new, 3, 5), x[:5]), run_ref(make_model(node, 3, 3), x[:5]))


def test_float_as_tensor_attributes_and_one_leaf_trees():
    node = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=1, aggregate_function="AVERAGE",
        nodes_treeids=[0, 0, 0, 1], nodes_nodeids=[0, 1, 2, 0], nodes_featureids=[1, 0, 0, 0],
        nodes_modes=["BRANCH_GT", "LEAF", "LEAF", "LEAF"], nodes_truenodeids=[2, 0, 0, 0],
        nodes_falsenodeids=[1, 0, 0, 0],
        nodes_values_as_tensor=numpy_helper.from_array(np.float32([0.25, 0, 0, 0])),
        target_treeids=[0, 0, 1], target_nodeids=[1, 2, 0], target_ids=[0, 0, 0],
        target_weights_as_tensor=numpy_helper.from_array(np.float32([1.5, -3.0, 0.125])))
    new = regressor_to_tree_ensemble(node)
    a = attrs(new)
    assert a["nodes_trueleafs"][a["tree_roots"][1]] == a["nodes_falseleafs"][a["tree_roots"][1]] == 1
    x = inputs(np.random.default_rng(3))
    expected = np.where(x[:, 1] > 0.25, -3.0, 1.5).astype(np.float32)
    expected = ((expected + np.float32(0.125)) / np.float32(2))[:, None]
    np.testing.assert_array_equal(run_ort(make_model(new, 1, 5), x), expected)
    np.testing.assert_array_equal(run_ort(make_model(node, 1, 3), x), expected)


# ---------------------------------------------------------------- refusals

def small_te(**over):
    kw = dict(n_targets=1, aggregate_function=1, post_transform=0, tree_roots=[0],
              nodes_modes=numpy_helper.from_array(np.uint8([0])), nodes_featureids=[0],
              nodes_splits=numpy_helper.from_array(np.float32([0.5])), nodes_truenodeids=[0], nodes_trueleafs=[1],
              nodes_falsenodeids=[1], nodes_falseleafs=[1], leaf_targetids=[0, 0],
              leaf_weights=numpy_helper.from_array(np.float32([1, 2])))
    kw.update(over)
    return helper.make_node("TreeEnsemble", ["X"], ["Y"], name="te", domain=ML,
                            **{k: v for k, v in kw.items() if v is not None})


def small_reg(**over):
    kw = dict(n_targets=2, aggregate_function="SUM", post_transform="NONE", nodes_treeids=[0, 0, 0],
              nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
              nodes_values=[0.5, 0.0, 0.0], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
              target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 1], target_weights=[1.0, 2.0])
    kw.update(over)
    return helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], name="reg", domain=ML,
                            **{k: v for k, v in kw.items() if v is not None})


def refused(fn, node, *words, **kw):
    with pytest.raises(ConversionError) as e:
        fn(node, **kw)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_the_small_nodes_convert():
    x = inputs(np.random.default_rng(0), nan=0)  # onnx.reference's regressor needs the missing-value flags
    assert_same(make_model(small_te(), 1, 5), make_model(tree_ensemble_to_regressor(small_te()), 1, 3), x)
    assert_same(make_model(small_reg(), 2, 3), make_model(regressor_to_tree_ensemble(small_reg()), 2, 5), x)


def test_branch_member_is_refused():
    member = small_te(nodes_modes=numpy_helper.from_array(np.uint8([6])),
                      membership_values=numpy_helper.from_array(np.float32([1, 2, np.nan])))
    refused(tree_ensemble_to_regressor, member, "'te'", "nodes_modes", "BRANCH_MEMBER",
            "has no TreeEnsembleRegressor equivalent")
    # a one-leaf tree's root compares nothing, whatever its mode
    leafy = small_te(nodes_modes=numpy_helper.from_array(np.uint8([6])), nodes_falsenodeids=[0])
    assert attrs(tree_ensemble_to_regressor(leafy))["nodes_modes"] == [b"LEAF"]


def test_float16_and_double_are_refused():
    refused(tree_ensemble_to_regressor, small_te(), "float16", "does not take", input_elem_type=TensorProto.FLOAT16)
    half = small_te(nodes_splits=numpy_helper.from_array(np.float16([0.5])),
                    leaf_weights=numpy_helper.from_array(np.float16([1, 2])))
    refused(tree_ensemble_to_regressor, half, "nodes_splits", "float16")
    double = small_te(nodes_splits=numpy_helper.from_array(np.float64([0.5])),
                      leaf_weights=numpy_helper.from_array(np.float64([1, 2])))
    refused(tree_ensemble_to_regressor, double, "nodes_splits", "double", "always float")
    refused(tree_ensemble_to_regressor, small_te(), "double", "always float", input_elem_type=TensorProto.DOUBLE)
    refused(regressor_to_tree_ensemble, small_reg(), "double", "always float", input_elem_type=TensorProto.DOUBLE)
    refused(regressor_to_tree_ensemble, small_reg(), "int64", input_elem_type=TensorProto.INT64)
    refused(regressor_to_tree_ensemble, small_reg(nodes_values=None, nodes_values_as_tensor=numpy_helper.from_array(
        np.float64([0.5, 0, 0]))), "nodes_values_as_tensor", "double", "outputs float")
    # float32 *_as_tensor attributes are the float lists
    as_tensor = small_reg(nodes_values=None, nodes_values_as_tensor=numpy_helper.from_array(np.float32([0.5, 0, 0])))
    assert regressor_to_tree_ensemble(as_tensor) == regressor_to_tree_ensemble(small_reg())


@pytest.mark.parametrize("agg", ["AVERAGE", "MIN", "MAX"])
def test_base_values_outside_sum_are_refused(agg):
    refused(regressor_to_tree_ensemble, small_reg(aggregate_function=agg, base_values=[0.0, 1.0]), "base_values",
            agg, "no TreeEnsemble node")
    refused(regressor_to_tree_ensemble, small_reg(aggregate_function=agg, base_values=[0.0, np.nan]),
            "base_values")
    assert regressor_to_tree_ensemble(small_reg(aggregate_function=agg, base_values=[0.0, -0.0])).op_type


def test_sum_base_values_of_the_wrong_size_or_of_targets_not_always_voted_for_are_refused():
    refused(regressor_to_tree_ensemble, small_reg(base_values=[1.0]), "base_values", "2 targets")
    refused(regressor_to_tree_ensemble, small_reg(base_values=[0.0, 1.0]), "base_values", "target 1",
            "onnxruntime")
    x = np.array([[0, 0, 0, 0], [1, 0, 0, 0]], np.float32)
    covered = small_reg(base_values=[0.0, 1.0], target_treeids=[0, 0, 0], target_nodeids=[1, 2, 1],
                        target_ids=[0, 1, 1], target_weights=[1.0, 2.0, 3.0])
    assert_same(make_model(covered, 2, 3), make_model(regressor_to_tree_ensemble(covered), 2, 5), x)


def test_post_transforms_read_two_ways_are_refused():
    for code, name in [(1, "SOFTMAX"), (2, "LOGISTIC")]:
        refused(tree_ensemble_to_regressor, small_te(post_transform=code), "post_transform", name, "onnxruntime")
        refused(regressor_to_tree_ensemble, small_reg(post_transform=name), "post_transform", name, "onnxruntime")
    refused(tree_ensemble_to_regressor, small_te(post_transform=5), "post_transform")
    refused(regressor_to_tree_ensemble, small_reg(post_transform="SIGMOID"), "post_transform")


def test_onnxruntime_still_reads_softmax_and_logistic_swapped():
    """Why those two are refused: onnxruntime 1.32 runs TreeEnsemble post_transform 1 (SOFTMAX by the
    schema) as LOGISTIC. When this fails, onnxruntime follows the schema and the refusal can go."""
    x = np.array([[0, 0, 0, 0], [1, 0, 0, 0]], np.float32)
    te = make_model(small_te(n_targets=2, post_transform=1, leaf_targetids=[0, 1]), 2, 5)
    logistic = make_model(small_reg(post_transform="LOGISTIC"), 2, 3)
    np.testing.assert_array_equal(run_ort(te, x), run_ort(logistic, x))


def test_malformed_or_ambiguous_regressors_are_refused():
    refused(regressor_to_tree_ensemble, small_reg(n_targets=1, target_ids=[0, 0], target_nodeids=[1, 1]),
            "target_nodeids", "n_targets 1")
    refused(regressor_to_tree_ensemble, small_reg(aggregate_function="MIN", target_treeids=[0],
                                                  target_nodeids=[1], target_ids=[0], target_weights=[1.0]),
            "no vote", "MIN")
    refused(regressor_to_tree_ensemble, small_reg(nodes_truenodeids=[0, 0, 0]), "cycle")
    refused(regressor_to_tree_ensemble, small_reg(nodes_treeids=[0, 1, 0], target_treeids=[1, 0]),
            "nodes_treeids", "not listed together")
    refused(regressor_to_tree_ensemble, small_reg(nodes_missing_value_tracks_true=[2, 0, 0]),
            "nodes_missing_value_tracks_true")
    refused(regressor_to_tree_ensemble, small_reg(n_targets=None), "n_targets")
    refused(regressor_to_tree_ensemble, small_reg(target_ids=[0, 2]), "target_ids")
    refused(regressor_to_tree_ensemble, small_reg(nodes_modes=["BRANCH_XX", "LEAF", "LEAF"]), "nodes_modes")
    refused(regressor_to_tree_ensemble, small_reg(nodes_falsenodeids=[7, 0, 0]), "nodes_falsenodeids")
    refused(regressor_to_tree_ensemble, small_reg(classlabels_int64s=[0, 1]), "classlabels_int64s")
    # a vote-less leaf under SUM adds nothing
    no_vote = small_reg(target_treeids=[0], target_nodeids=[1], target_ids=[1], target_weights=[4.0])
    a = attrs(regressor_to_tree_ensemble(no_vote))
    assert a["leaf_targetids"] == [1, 0] and numpy_helper.to_array(a["leaf_weights"]).tolist() == [4.0, 0.0]


def test_malformed_tree_ensembles_are_refused():
    refused(tree_ensemble_to_regressor, small_te(n_targets=None), "n_targets")
    refused(tree_ensemble_to_regressor, small_te(tree_roots=[3]), "tree_roots")
    refused(tree_ensemble_to_regressor, small_te(nodes_falsenodeids=[5]), "nodes_falsenodeids")
    refused(tree_ensemble_to_regressor, small_te(nodes_trueleafs=[0]), "cycle")
    refused(tree_ensemble_to_regressor, small_te(nodes_missing_value_tracks_true=[3]),
            "nodes_missing_value_tracks_true")
    refused(tree_ensemble_to_regressor, small_te(leaf_targetids=[0, 1]), "leaf_targetids")
    refused(tree_ensemble_to_regressor, small_te(aggregate_function=4), "aggregate_function")
    refused(tree_ensemble_to_regressor, small_te(nodes_modes=numpy_helper.from_array(np.int64([0]))), "uint8")
    refused(tree_ensemble_to_regressor, small_te(nodes_featureids=[0, 1]), "nodes_featureids")
    refused(tree_ensemble_to_regressor, small_te(base_values=[1.0]), "base_values")
    refused(tree_ensemble_to_regressor, small_reg(), "expected TreeEnsemble")
    refused(regressor_to_tree_ensemble, small_te(), "expected TreeEnsembleRegressor")


def test_a_regressor_node_listed_twice_is_refused():
    twice = small_reg(nodes_nodeids=[0, 1, 1], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[1, 0, 0],
                      target_nodeids=[1, 1])
    refused(regressor_to_tree_ensemble, twice, "'reg'", "nodes_nodeids", "node 1 of tree 0 is listed twice")


def _shared_chain(depth: int):
    """A TreeEnsemble tree of ``depth`` branch nodes, each with both branches to the next one (the
    last to two leaves): as a regressor tree, the node at depth k is copied 2**k times, so
    2**depth - 1 branch nodes and 2**depth leaves."""
    nxt = list(range(1, depth)) + [0]
    return small_te(nodes_modes=numpy_helper.from_array(np.uint8([0] * depth)), nodes_featureids=[0] * depth,
                    nodes_splits=numpy_helper.from_array(np.float32(np.arange(depth) / depth)),
                    nodes_truenodeids=nxt, nodes_trueleafs=[0] * (depth - 1) + [1],
                    nodes_falsenodeids=nxt[:-1] + [1], nodes_falseleafs=[0] * (depth - 1) + [1])


def test_copies_of_shared_nodes_count_against_the_limit(monkeypatch):
    from rewriter.convert.adapters import ml_trees

    monkeypatch.setattr(ml_trees, "MAX_NODES", 511)
    reg = tree_ensemble_to_regressor(_shared_chain(8))
    assert len(attrs(reg)["nodes_nodeids"]) == 511  # 255 branch nodes and 256 leaves
    x = inputs(np.random.default_rng(0), nan=0)
    source, result = make_model(_shared_chain(8), 1, 5), make_model(reg, 1, 3)
    # onnxruntime refuses the shared nodes of the source; onnx.reference runs it
    np.testing.assert_array_equal(run_ort(result, x), run_ref(source, x))
    np.testing.assert_array_equal(run_ref(result, x), run_ref(source, x))
    monkeypatch.setattr(ml_trees, "MAX_NODES", 510)
    refused(tree_ensemble_to_regressor, _shared_chain(8), "'te'", "branches share nodes", "more than 510 nodes")
