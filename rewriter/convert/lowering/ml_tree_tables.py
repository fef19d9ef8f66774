"""A TreeEnsembleRegressor's or TreeEnsembleClassifier's attributes read the way ONNX Runtime's
``TreeEnsembleCommon::Init`` reads them, into flat tables the tree-traversal graph gathers from:

- a tree is a run of nodes with one ``nodes_treeids`` value, its root the run's first node; trees
  are summed in the order of their runs;
- children are found by (tree id, node id); a node reached by two branches is allowed (LightGBM's
  set membership writes such DAGs), a cycle is not;
- a leaf's weights are the ``target_*`` / ``class_*`` entries naming it, in attribute order;
  entries naming a branch node are ignored; with one target the kernel reads only a leaf's first
  weight, and a leaf without any reads its ``nodes_values`` entry.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rewriter.convert.lowering.registry import Blocked

__all__ = ["MODES", "Forest", "read_forest"]

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
LEAF = -1


@dataclasses.dataclass
class Forest:
    """Flat tables over all nodes (attribute order): children point to themselves at leaves."""

    roots: np.ndarray  # int64 [T]: the first node of each tree's run
    feature: np.ndarray  # int64 [M] (0 at leaves)
    threshold: np.ndarray  # [M] float32 or float64
    mode: np.ndarray  # int64 [M]: index in MODES, LEAF at leaves
    track: np.ndarray  # bool [M]: missing_value_tracks_true
    true_child: np.ndarray  # int64 [M]
    false_child: np.ndarray  # int64 [M]
    depth: int  # the longest root-to-leaf path, in branches
    weights: dict  # leaf -> [(target, weight), ...] in the kernel's order
    first: np.ndarray  # [M]: the value a one-target kernel adds for a leaf
    n_targets: int

    @property
    def n_trees(self) -> int:
        return len(self.roots)


def _lengths(a: dict, names) -> int:
    sizes = {n: len(a[n]) for n in names}
    if len(set(sizes.values())) != 1:
        raise Blocked("node attributes of different lengths: " + ", ".join(f"{n} {s}" for n, s in sizes.items()))
    return next(iter(sizes.values()))


def _runs(treeids: np.ndarray) -> list[int]:
    """Start index of each run of equal tree ids; a tree id in two runs is refused."""
    starts = [i for i in range(len(treeids)) if i == 0 or treeids[i] != treeids[i - 1]]
    seen = [int(treeids[i]) for i in starts]
    if len(set(seen)) != len(seen):
        raise Blocked("a tree's nodes are not listed together (onnxruntime starts a new tree at each run)")
    return starts


def _depth(roots, true_child, false_child, is_leaf) -> int:
    """Longest path from a root to a leaf; a cycle is refused."""
    memo: dict[int, int] = {}
    for root in roots:
        stack = [(int(root), False)]
        on_path: set[int] = set()
        while stack:
            n, done = stack.pop()
            if done:
                on_path.discard(n)
                memo[n] = 0 if is_leaf[n] else 1 + max(memo[int(true_child[n])], memo[int(false_child[n])])
                continue
            if n in memo:
                continue
            if n in on_path:
                raise Blocked("a tree has a cycle")
            on_path.add(n)
            stack.append((n, True))
            if not is_leaf[n]:
                stack.extend((int(c), False) for c in (true_child[n], false_child[n]) if int(c) not in memo)
    return max(memo[int(r)] for r in roots) if len(roots) else 0


def _children(nodes: dict, treeids, nodeids, children, is_leaf, which: str) -> np.ndarray:
    out = np.arange(len(treeids), dtype=np.int64)
    for i in np.flatnonzero(~is_leaf):
        key = (int(treeids[i]), int(children[i]))
        if key not in nodes:
            raise Blocked(f"node {int(nodeids[i])} of tree {int(treeids[i])}: its {which} node {int(children[i])} "
                          "does not exist")
        if nodes[key] == i:
            raise Blocked(f"node {int(nodeids[i])} of tree {int(treeids[i])} is its own {which} node")
        out[i] = nodes[key]
    return out


def read_forest(a: dict, prefix: str, n_targets: int, thresholds: np.ndarray, weights: np.ndarray) -> Forest:
    """The tables of an ensemble whose attributes (names -> values) are ``a``; ``prefix`` is
    "target" or "class"; ``thresholds`` and ``weights`` are already in the kernel's type."""
    names = ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_truenodeids",
             "nodes_falsenodeids"]
    m = _lengths(a, names)
    if len(thresholds) != m:
        raise Blocked(f"{len(thresholds)} node values for {m} nodes")
    if m == 0:
        raise Blocked("no nodes")
    treeids, nodeids = np.asarray(a["nodes_treeids"], np.int64), np.asarray(a["nodes_nodeids"], np.int64)
    modes = [s.decode() if isinstance(s, bytes) else s for s in a["nodes_modes"]]
    unknown = sorted(set(modes) - set(MODES) - {"LEAF"})
    if unknown:
        raise Blocked(f"node mode(s) {', '.join(unknown)} are none of LEAF, {', '.join(MODES)}")
    is_leaf = np.array([s == "LEAF" for s in modes])
    nodes = {}
    for i, key in enumerate(zip(treeids.tolist(), nodeids.tolist())):
        if key in nodes:
            raise Blocked(f"node {key[1]} of tree {key[0]} is listed twice")
        nodes[key] = i
    true_child = _children(nodes, treeids, nodeids, np.asarray(a["nodes_truenodeids"], np.int64), is_leaf, "true")
    false_child = _children(nodes, treeids, nodeids, np.asarray(a["nodes_falsenodeids"], np.int64), is_leaf, "false")
    roots = np.asarray(_runs(treeids), np.int64)
    if any(treeids[true_child] != treeids) or any(treeids[false_child] != treeids):
        raise Blocked("a branch leads into another tree")
    feature = np.where(is_leaf, 0, np.asarray(a["nodes_featureids"], np.int64))
    if (feature < 0).any():
        raise Blocked("a negative feature id")
    tracks = list(a.get("nodes_missing_value_tracks_true", []))
    track = np.array([i < len(tracks) and tracks[i] == 1 for i in range(m)]) & ~is_leaf
    by_leaf = _leaf_weights(a, prefix, nodes, is_leaf, weights, n_targets)
    first = thresholds.copy()
    for leaf, entries in by_leaf.items():
        first[leaf] = entries[0][1]
    return Forest(roots, feature, np.where(is_leaf, 0, thresholds).astype(thresholds.dtype),
                  np.array([LEAF if s == "LEAF" else MODES.index(s) for s in modes], np.int64), track,
                  true_child, false_child, _depth(roots, true_child, false_child, is_leaf), by_leaf, first, n_targets)


def _leaf_weights(a: dict, prefix: str, nodes: dict, is_leaf, weights: np.ndarray, n_targets: int) -> dict:
    names = [f"{prefix}_treeids", f"{prefix}_nodeids", f"{prefix}_ids"]
    n = _lengths({k: a.get(k, []) for k in names}, names)
    if len(weights) != n:
        raise Blocked(f"{len(weights)} weights for {n} {prefix} entries")
    entries = sorted(range(n), key=lambda i: (int(a[names[0]][i]), int(a[names[1]][i]), i))
    out: dict[int, list] = {}
    for i in entries:
        key = (int(a[names[0]][i]), int(a[names[1]][i]))
        if key not in nodes:
            raise Blocked(f"a weight names node {key[1]} of tree {key[0]}, which does not exist")
        node = nodes[key]
        if not is_leaf[node]:
            continue  # onnxruntime ignores weights on branch nodes
        target = int(a[names[2]][i])
        if n_targets > 1 and not 0 <= target < n_targets:
            raise Blocked(f"a weight for target {target} of {n_targets}")
        out.setdefault(node, []).append((target, weights[i]))
    return out
