"""Random tree ensembles for the lowering tests: attributes of a TreeEnsembleRegressor or
TreeEnsembleClassifier from a numpy Generator (thresholds on a coarse grid so that inputs tie
with them, NaN tracks, every branch mode, several weights per leaf)."""

from __future__ import annotations

import numpy as np

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
GRID = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0], np.float32)


def random_forest(rng, *, trees=3, depth=3, features=4, targets=1, modes=None, tracks=True, weights_per_leaf=1,
                  prefix="target", shuffle=False, leaf_prob=0.3):
    """Attributes (a dict for helper.make_node) of a random ensemble."""
    modes = modes or MODES
    cols = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                            "nodes_truenodeids", "nodes_falsenodeids", "nodes_values",
                            "nodes_missing_value_tracks_true")}
    w = {f"{prefix}_treeids": [], f"{prefix}_nodeids": [], f"{prefix}_ids": [], f"{prefix}_weights": []}
    for t in range(trees):
        rows = []

        def build(level):
            nid = len(rows)
            rows.append(None)
            if level >= depth or (level > 0 and rng.random() < leaf_prob):
                rows[nid] = (nid, 0, "LEAF", 0, 0, 0.0, 0)
                for _ in range(weights_per_leaf):
                    for target in range(targets):
                        if targets > 1 and rng.random() < 0.15:
                            continue  # a leaf that does not score this target
                        w[f"{prefix}_treeids"].append(t)
                        w[f"{prefix}_nodeids"].append(nid)
                        w[f"{prefix}_ids"].append(target)
                        w[f"{prefix}_weights"].append(float(np.float32(rng.normal())))
                return nid
            false = build(level + 1)
            true = build(level + 1)
            rows[nid] = (nid, int(rng.integers(features)), str(rng.choice(modes)), true, false,
                         float(rng.choice(GRID)), int(tracks and rng.random() < 0.5))
            return nid

        build(0)
        order = list(range(len(rows)))
        if shuffle:
            rest = order[1:]
            rng.shuffle(rest)
            order = [0] + rest
        for i in order:
            nid, feat, mode, true, false, value, track = rows[i]
            cols["nodes_treeids"].append(t)
            cols["nodes_nodeids"].append(nid)
            cols["nodes_featureids"].append(feat)
            cols["nodes_modes"].append(mode)
            cols["nodes_truenodeids"].append(true)
            cols["nodes_falsenodeids"].append(false)
            cols["nodes_values"].append(value)
            cols["nodes_missing_value_tracks_true"].append(track)
    cols.update(w)
    return cols


def random_inputs(rng, rows, features, nan=0.15, dtype=np.float32):
    """Inputs drawn from the threshold grid (ties), its neighbours and NaN."""
    near = np.concatenate([GRID, np.nextafter(GRID, np.float32(2)), np.nextafter(GRID, np.float32(-2))])
    x = rng.choice(near, size=(rows, features)).astype(dtype)
    x[rng.random((rows, features)) < nan] = np.nan
    return x
