"""``ai.onnx.ml`` TreeEnsembleRegressor-1/3 as TreeEnsemble-5 (see :mod:`rewriter.convert.adapters.ml_trees`
for the semantics both directions follow)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.adapters.ml_tree_parts import (
    ML, MODES, AGGREGATES, POST_TRANSFORMS, CONTESTED_POST_TRANSFORMS, type_name, Refuse, read_attrs,
    read_ints, read_tensor, flat, check_input_float, walk, REG_NODES, REG_TARGETS, REG_KNOWN, F32_MAX,
)

__all__ = ["regressor_to_tree_ensemble"]


def _twin(a: dict, name: str, refuse: Refuse) -> np.ndarray | None:
    """A regressor's float list ``name`` or its ``name_as_tensor`` twin, as float32 (double refused)."""
    plain, tensor = a.get(name), read_tensor(a, f"{name}_as_tensor", refuse)
    if plain is not None and tensor is not None:
        raise refuse(f"{name}_as_tensor", f"set together with {name}; onnxruntime refuses that")
    if tensor is not None:
        if tensor.data_type == TensorProto.DOUBLE:
            raise refuse(f"{name}_as_tensor", "double: with a double input the regressor still outputs float "
                                              "and TreeEnsemble would output double; on a float input "
                                              "onnxruntime takes no double attributes")
        if tensor.data_type != TensorProto.FLOAT:
            raise refuse(f"{name}_as_tensor", f"{type_name(tensor.data_type)}, not float or double")
        return flat(tensor).astype(np.float32)
    if plain is None:
        return None
    return np.asarray(plain, dtype=np.float32).reshape(-1)


def regressor_to_tree_ensemble(node: onnx.NodeProto, input_elem_type: int | None = None) -> onnx.NodeProto:
    """``ai.onnx.ml`` TreeEnsembleRegressor (schema 1 or 3 attributes) as an equal TreeEnsemble (schema 5).

    ``input_elem_type`` is X's ``TensorProto`` element type when known; None is taken as float
    (double ``*_as_tensor`` attributes are refused either way). Raises ConversionError for inputs
    other than float, non-zero base_values outside SUM, post_transform SOFTMAX or LOGISTIC, several
    votes on one leaf with n_targets 1, vote-less leaves under MIN/MAX, and malformed attributes
    (cycles, a tree's nodes not listed together, unknown nodes or modes, missing n_targets, ...).
    """
    refuse = Refuse(node)
    if node.op_type != "TreeEnsembleRegressor" or node.domain != ML:
        raise refuse("op_type", f"expected TreeEnsembleRegressor of {ML}, got {node.op_type} of "
                                f"{node.domain or 'ai.onnx'}")
    check_input_float(input_elem_type, refuse, "TreeEnsemble")
    a = read_attrs(node, REG_KNOWN, refuse)
    values, hitrates = _twin(a, "nodes_values", refuse), _twin(a, "nodes_hitrates", refuse)
    weights, base = _twin(a, "target_weights", refuse), _twin(a, "base_values", refuse)
    trees = _Trees(a, values, hitrates, refuse)
    n_targets, agg_name, post_code = _aggregation(a, refuse)
    trees.index_trees(refuse)
    votes = _votes(a, trees, weights, n_targets, refuse)
    base = _base(base, agg_name, n_targets, refuse)
    walks, most = _walks(trees, votes, agg_name, n_targets, base, refuse)
    scale = np.float32(1)
    if agg_name == "AVERAGE" and most > 1:
        copies = 1 << (most - 1).bit_length()
        scale = np.float32(copies)
        finite = weights[np.isfinite(weights)] if weights is not None else np.zeros(0, np.float32)
        if float(np.abs(finite.astype(np.float64)).sum()) * copies > F32_MAX:
            raise refuse("target_weights", f"a leaf has {most} votes, so each AVERAGE tree becomes {copies} trees "
                                           f"with weights times {copies}, which could overflow float")
        walks = [(tid, order, copies) for tid, order, _ in walks]
    te = _Ensemble()
    te.add_trees(trees, votes, walks, agg_name, scale, refuse)
    if base is not None:  # SUM: each base value as a last one-leaf tree
        for target, b in enumerate(base):
            if b != 0 or np.isnan(b):
                te.one_leaf_tree(te.add_leaf(target, b))
    return te.node(node, AGGREGATES.index(agg_name), post_code, n_targets, bool(trees.mvt),
                   trees.hitrates is not None)


class _Trees:
    """A regressor's nodes_* lists, checked: one entry per node, known modes, each tree's nodes
    listed together (after :meth:`index_trees`: ``tree_ids`` in listing order, ``root_of`` each
    tree's first node, ``index`` of (tree id, node id))."""

    def __init__(self, a: dict, values, hitrates, refuse: Refuse):
        self.values, self.hitrates = values, hitrates
        cols = {name: read_ints(a, name, refuse, default=[]) for name in REG_NODES if name != "nodes_modes"}
        cols["nodes_modes"] = [m.decode() if isinstance(m, bytes) else m for m in a.get("nodes_modes", [])]
        n = len(cols["nodes_treeids"])
        if n == 0:
            raise refuse("nodes_treeids", "no nodes, so no trees (TreeEnsemble needs at least one)")
        if self.values is None:
            raise refuse("nodes_values", "absent")
        lists = dict(cols, nodes_values=self.values)
        self.mvt = read_ints(a, "nodes_missing_value_tracks_true", refuse, default=[])
        if self.mvt:
            lists["nodes_missing_value_tracks_true"] = self.mvt
        if self.hitrates is not None:
            lists["nodes_hitrates"] = self.hitrates
        for name, col in lists.items():
            if len(col) != n:
                raise refuse(name, f"has {len(col)} entries and nodes_treeids {n}; every nodes_* has one per node")
        if any(v not in (0, 1) for v in self.mvt):
            raise refuse("nodes_missing_value_tracks_true", "values other than 0 and 1 (onnxruntime takes only 1 as "
                                                            "true, onnx.reference any non-zero)")
        self.cols, self.modes = cols, cols["nodes_modes"]
        for i, m in enumerate(self.modes):
            if m != "LEAF" and m not in MODES:
                raise refuse("nodes_modes", f"node {i}'s mode {m!r} is not one of {', '.join(MODES)}, LEAF")

    def index_trees(self, refuse: Refuse) -> None:
        cols = self.cols
        # trees: runs of nodes_treeids in listing order, root first (onnxruntime starts a tree wherever
        # the tree id changes, onnx.reference at a tree's first node: the same when each tree's nodes
        # are listed together, refused otherwise)
        self.tree_ids, self.root_of, self.index = [], {}, {}
        for i, (tid, nid) in enumerate(zip(cols["nodes_treeids"], cols["nodes_nodeids"])):
            if (tid, nid) in self.index:
                raise refuse("nodes_nodeids", f"node {nid} of tree {tid} is listed twice")
            self.index[tid, nid] = i
            if not self.tree_ids or self.tree_ids[-1] != tid:
                if tid in self.root_of:
                    raise refuse("nodes_treeids", f"the nodes of tree {tid} are not listed together: onnxruntime "
                                                  "would start another tree at the second run, onnx.reference not")
                self.tree_ids.append(tid)
                self.root_of[tid] = i

    def key(self, i: int) -> tuple[str, int]:
        return ("l" if self.modes[i] == "LEAF" else "n", i)

    def children(self, i: int, refuse: Refuse):
        cols, key = self.cols, []
        for which in ("true", "false"):
            nid = cols[f"nodes_{which}nodeids"][i]
            j = self.index.get((cols["nodes_treeids"][i], nid))
            if j is None:
                raise refuse(f"nodes_{which}nodeids", f"node {cols['nodes_nodeids'][i]} of tree "
                                                      f"{cols['nodes_treeids'][i]}: {which} child {nid} does not exist")
            key.append(self.key(j))
        return tuple(key)


def _aggregation(a: dict, refuse: Refuse) -> tuple[int, str, int]:
    """(n_targets, the aggregate function's name, TreeEnsemble's post_transform code)."""
    if "n_targets" not in a:
        raise refuse("n_targets", "absent; neither runtime runs a regressor without it")
    n_targets = int(a["n_targets"])
    if n_targets < 1:
        raise refuse("n_targets", f"is {n_targets}; it must be positive")
    agg_name = a.get("aggregate_function", b"SUM")
    agg_name = agg_name.decode() if isinstance(agg_name, bytes) else agg_name
    if agg_name not in AGGREGATES:
        raise refuse("aggregate_function", f"{agg_name!r} is not one of {', '.join(AGGREGATES)}")
    post_name = a.get("post_transform", b"NONE")
    post_name = post_name.decode() if isinstance(post_name, bytes) else post_name
    codes = {v: k for k, v in POST_TRANSFORMS.items()}
    if post_name in CONTESTED_POST_TRANSFORMS.values():
        code = next(k for k, v in CONTESTED_POST_TRANSFORMS.items() if v == post_name)
        raise refuse("post_transform", f"{post_name} is TreeEnsemble code {code} by the ONNX schema, but "
                                       f"onnxruntime reads {code} as {CONTESTED_POST_TRANSFORMS[3 - code]}, so "
                                       "either code would change what one of them computes")
    if post_name not in codes:
        raise refuse("post_transform", f"{post_name!r} is not NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT")
    return n_targets, agg_name, codes[post_name]


def _votes(a: dict, trees: _Trees, weights, n_targets: int, refuse: Refuse) -> dict[int, list]:
    """{leaf index: [(target, weight), ...]} in listing order (votes on branch nodes dropped)."""
    tcols = {name: read_ints(a, name, refuse, default=[]) for name in REG_TARGETS}
    n_votes = len(tcols["target_ids"])
    for name, col in [*tcols.items(), ("target_weights", [] if weights is None else weights)]:
        if len(col) != n_votes:
            raise refuse(name, f"has {len(col)} entries and target_ids {n_votes}")
    votes: dict[int, list[tuple[int, np.float32]]] = {}
    for k, (tid, nid, target) in enumerate(zip(tcols["target_treeids"], tcols["target_nodeids"],
                                               tcols["target_ids"])):
        i = trees.index.get((tid, nid))
        if i is None:
            raise refuse("target_nodeids", f"vote {k} names node {nid} of tree {tid}, which does not exist")
        if not 0 <= target < n_targets:
            raise refuse("target_ids", f"{target} is outside [0, n_targets={n_targets})")
        if trees.modes[i] == "LEAF":  # both runtimes ignore votes on branch nodes
            votes.setdefault(i, []).append((target, weights[k]))
    return votes


def _base(base, agg_name: str, n_targets: int, refuse: Refuse):
    """The base values when some is non-zero (SUM only, one per target), else None."""
    if base is None or not np.any(base != 0):  # NaN != 0 too
        return None
    if agg_name != "SUM":
        raise refuse("base_values", f"non-zero under {agg_name}: TreeEnsemble has no base values, and the base is "
                                    f"added after the {agg_name.lower()}, which no TreeEnsemble node can "
                                    "reproduce exactly (only SUM's base can be one more tree)")
    if base.size != n_targets:
        raise refuse("base_values", f"{base.size} values for {n_targets} targets (onnxruntime ignores or "
                                    "rejects them, onnx.reference broadcasts them)")
    return base


def _walks(trees: _Trees, votes: dict, agg_name: str, n_targets: int, base, refuse: Refuse):
    """([(tree id, its nodes root first, the most votes of one of its leaves)], the most of all)."""
    walks, most, always = [], 1, set()
    for tid in trees.tree_ids:
        order, _ = walk(trees.key(trees.root_of[tid]), lambda i: trees.children(i, refuse), refuse,
                        "nodes_truenodeids/nodes_falsenodeids")
        k, voted = 1, None  # voted: the targets every leaf of the tree votes for
        for kind, i in order:
            if kind != "l":
                continue
            m = len(votes.get(i, ()))
            voted = {t for t, _ in votes.get(i, ())} & (voted if voted is not None else set(range(n_targets)))
            if m == 0 and agg_name in ("MIN", "MAX"):
                raise refuse("target_nodeids", f"leaf {trees.cols['nodes_nodeids'][i]} of tree {tid} has no vote, "
                                               f"which no TreeEnsemble leaf can stand for under {agg_name}")
            if m > 1 and n_targets == 1:
                raise refuse("target_nodeids", f"leaf {trees.cols['nodes_nodeids'][i]} of tree {tid} has {m} votes "
                                               "with n_targets 1: onnxruntime reads only the first, the schema and "
                                               "onnx.reference add them all")
            k = max(k, m)
        walks.append((tid, order, k))
        most = max(most, k)
        always |= voted or set()
    if base is not None and n_targets > 1:
        unsure = [t for t in range(n_targets) if (base[t] != 0) and t not in always]
        if unsure:
            raise refuse("base_values", f"target {unsure[0]} has a non-zero base value and no tree votes for it "
                                        "whatever the input: onnxruntime then adds its base only where some "
                                        "tree voted for it, onnx.reference always, so the base has no one meaning")
    return walks, most


class _Ensemble:
    """TreeEnsemble's attribute lists, built node by node and leaf by leaf."""

    def __init__(self):
        self.te = {k: [] for k in ("nodes_modes", "nodes_featureids", "nodes_splits", "nodes_truenodeids",
                                   "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs",
                                   "nodes_missing_value_tracks_true", "nodes_hitrates", "leaf_targetids",
                                   "leaf_weights", "tree_roots")}

    def add_leaf(self, target: int, weight) -> int:
        te = self.te
        te["leaf_targetids"].append(int(target))
        te["leaf_weights"].append(np.float32(weight))
        return len(te["leaf_targetids"]) - 1

    def add_node(self, mode: int, feature: int, split, mvt_flag: int, hitrate) -> int:
        te = self.te
        te["nodes_modes"].append(mode)
        te["nodes_featureids"].append(int(feature))
        te["nodes_splits"].append(np.float32(split))
        te["nodes_missing_value_tracks_true"].append(int(mvt_flag))
        te["nodes_hitrates"].append(np.float32(hitrate))
        for k in ("nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs"):
            te[k].append(0)
        return len(te["nodes_modes"]) - 1

    def one_leaf_tree(self, leaf: int) -> None:
        # a branch node whose two branches are equal leaves: the schema's one-leaf tree (both branches
        # to one leaf) is read by onnx.reference as leaf tree_roots[t] instead, which is another leaf
        # unless the two indices happen to be equal
        te = self.te
        twin = self.add_leaf(te["leaf_targetids"][leaf], te["leaf_weights"][leaf])
        at = self.add_node(0, 0, 0.0, 0, 0)
        te["nodes_truenodeids"][at], te["nodes_falsenodeids"][at] = leaf, twin
        te["nodes_trueleafs"][at] = te["nodes_falseleafs"][at] = 1
        te["tree_roots"].append(at)

    def add_trees(self, trees: _Trees, votes: dict, walks, agg_name: str, scale, refuse: Refuse) -> None:
        """Each walked tree ``copies`` times (AVERAGE with several votes on a leaf: the c-th copy
        takes each leaf's c-th vote)."""
        te, mvt, hitrates = self.te, trees.mvt, trees.hitrates
        for tid, order, copies in walks:
            for c in range(copies):
                where = {}
                for kind, i in order:
                    if kind == "l":
                        vs = votes.get(i, [])
                        if c < len(vs):
                            target, w = vs[c]
                        elif agg_name in ("MIN", "MAX"):
                            target, w = vs[0]  # the same vote again: min/max are idempotent
                        else:
                            target, w = (vs[0][0] if vs else 0), np.float32(0.0)
                        where[kind, i] = self.add_leaf(target, np.float32(w) * scale)
                    else:
                        where[kind, i] = self.add_node(MODES.index(trees.modes[i]), trees.cols["nodes_featureids"][i],
                                                       trees.values[i], mvt[i] if mvt else 0,
                                                       hitrates[i] if hitrates is not None else 0)
                root = order[0]
                if root[0] == "l":
                    self.one_leaf_tree(where[root])
                    continue
                te["tree_roots"].append(where[root])
                for kind, i in order:
                    if kind == "l":
                        continue
                    at = where[kind, i]
                    for which, child in zip(("true", "false"), trees.children(i, refuse)):
                        te[f"nodes_{which}nodeids"][at] = where[child]
                        te[f"nodes_{which}leafs"][at] = int(child[0] == "l")

    def node(self, node: onnx.NodeProto, aggregate: int, post: int, n_targets: int, mvt: bool,
             hitrates: bool) -> onnx.NodeProto:
        """The TreeEnsemble node in ``node``'s place (its inputs, outputs, name and doc string)."""
        te = self.te
        attrs = {
            "aggregate_function": aggregate,
            "post_transform": post,
            "n_targets": n_targets,
            "tree_roots": te["tree_roots"],
            "nodes_modes": numpy_helper.from_array(np.asarray(te["nodes_modes"], dtype=np.uint8), "nodes_modes"),
            "nodes_featureids": te["nodes_featureids"],
            "nodes_splits": numpy_helper.from_array(np.asarray(te["nodes_splits"], dtype=np.float32), "nodes_splits"),
            "nodes_truenodeids": te["nodes_truenodeids"], "nodes_trueleafs": te["nodes_trueleafs"],
            "nodes_falsenodeids": te["nodes_falsenodeids"], "nodes_falseleafs": te["nodes_falseleafs"],
            "leaf_targetids": te["leaf_targetids"],
            "leaf_weights": numpy_helper.from_array(np.asarray(te["leaf_weights"], dtype=np.float32), "leaf_weights"),
        }
        if mvt:
            attrs["nodes_missing_value_tracks_true"] = te["nodes_missing_value_tracks_true"]
        if hitrates:
            attrs["nodes_hitrates"] = numpy_helper.from_array(np.asarray(te["nodes_hitrates"], dtype=np.float32),
                                                              "nodes_hitrates")
        return helper.make_node("TreeEnsemble", list(node.input), list(node.output), name=node.name, domain=ML,
                                doc_string=node.doc_string or None, **{k: attrs[k] for k in sorted(attrs)})
