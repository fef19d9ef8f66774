"""``ai.onnx.ml`` TreeEnsemble-5 <-> TreeEnsembleRegressor-1/3, node for node, exactly or not at all.

Pure functions on :class:`onnx.NodeProto` (no registration: :mod:`rewriter.convert.ml_opsets` calls them).
Every rewrite keeps the node's name, inputs and outputs; anything whose meaning would change is
refused with a :class:`~rewriter.errors.ConversionError` naming the attribute and the reason.

Semantics, from the schemas and the two runtimes (``onnx.reference`` and onnxruntime):

- A TreeEnsemble tree starts at ``tree_roots[t]``; a root whose two branches are leaves and
  name the same leaf is a one-leaf tree. Branch children index ``nodes_*`` or, where
  ``nodes_trueleafs``/``nodes_falseleafs`` is set, ``leaf_*``; each leaf is one (target, weight).
  A regressor tree is the nodes sharing a ``nodes_treeids`` value, its root the first listed;
  a LEAF node's votes are the ``target_*`` entries naming it (several are allowed), votes on
  branch nodes are ignored by both runtimes.
- Modes 0..5 are BRANCH_LEQ, LT, GTE, GT, EQ, NEQ on both sides; BRANCH_MEMBER (6) is refused
  (the regressor has no set-membership mode; a chain of BRANCH_EQ nodes could encode it, this
  adapter does not write one).
- ``aggregate_function`` 0..3 are AVERAGE, SUM, MIN, MAX. AVERAGE divides by the number of trees.
- ``post_transform``: the schema says 0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT,
  and onnxruntime (1.32) reads 1 as LOGISTIC and 2 as SOFTMAX. NONE, SOFTMAX_ZERO and PROBIT
  convert; SOFTMAX and LOGISTIC are refused both ways, since a converted model would compute
  something else under one of the two readings.
- Only float32 inputs: the regressor's output is always float32 and TreeEnsemble's is its
  input's type, so a double ensemble cannot become a regressor (nor a double-input regressor a
  TreeEnsemble) inside one node; TreeEnsemble takes no integer inputs and the regressor no float16.
- onnxruntime's regressor takes only trees (a node reached twice on false branches fails to
  load), so TreeEnsemble nodes or leaves shared by several branches are copied, one per branch
  (refused past MAX_NODES). The schema and onnx.reference take shared TreeEnsemble nodes, onnxruntime
  (1.32) refuses a shared internal node; a regressor's trees share none, so the other way writes none.
- A one-leaf TreeEnsemble tree is the leaf both branches of its root name (schema, onnxruntime);
  onnx.reference (1.23) takes leaf ``tree_roots[t]`` instead. TreeEnsembles written here have no
  such roots (a branch to two equal leaves instead), so both runtimes read them alike.
- Missing-value tracking carries over per branch node (0 or 1 only: onnxruntime tests ``== 1``,
  onnx.reference any non-zero); hitrates carry over for branch nodes (0 for leaves), they do not
  change any output.

Regressor features TreeEnsemble lacks, and what becomes of them:

- A leaf with several votes: tree t is written k_t times (k_t its largest vote count), copy c
  casting vote c of every leaf. Where a leaf has fewer votes the copy casts a neutral one: +0.0
  (SUM, AVERAGE) or the leaf's first vote again (MIN, MAX: idempotent, NaN included). Per target
  the additions happen in the original order, so sums are bit-identical (where onnxruntime runs
  the trees one after the other: past 80 trees it may split them among threads, and the split
  then depends on the tree count). AVERAGE divides by the
  tree count, so there every tree gets the same number K of copies, K a power of two, and the
  weights are multiplied by K (exact; refused if it could overflow). With n_targets == 1 this is
  refused: onnxruntime then reads only a leaf's first vote, the schema and onnx.reference add them.
- base_values: TreeEnsemble has none. Under SUM each non-zero base value becomes one more
  one-leaf tree (a branch to two equal leaves), after all others; both runtimes add the base
  after the last tree, so the sum is the same number. With several targets onnxruntime adds a
  target's base only where some tree voted for the target (onnx.reference always), so a non-zero
  base is converted only for a target some tree votes for on every path. Under AVERAGE, MIN and
  MAX the base is added after the division/min/max and no encoding inside one node is exact:
  refused unless every base value is zero.
- A leaf without votes: +0.0 under SUM/AVERAGE (adds nothing); refused under MIN/MAX.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from rewriter.convert.adapters.ml_tree_parts import (
    ML, MODES, BRANCH_MEMBER, AGGREGATES, POST_TRANSFORMS, CONTESTED_POST_TRANSFORMS, MAX_NODES, type_name,
    Refuse, read_attrs, read_ints, read_tensor, flat, check_input_float, walk, TE_REQUIRED, TE_KNOWN,
)
from rewriter.convert.adapters.ml_trees_to_ensemble import regressor_to_tree_ensemble

__all__ = ["tree_ensemble_to_regressor", "regressor_to_tree_ensemble"]


def tree_ensemble_to_regressor(node: onnx.NodeProto, input_elem_type: int | None = None) -> onnx.NodeProto:
    """``ai.onnx.ml`` TreeEnsemble (schema 5) as an equal TreeEnsembleRegressor (schema 3 attributes).

    ``input_elem_type`` is X's ``TensorProto`` element type when known; without it the type is
    read from ``nodes_splits``/``leaf_weights`` (TreeEnsemble's thresholds and weights have X's type).
    Raises ConversionError for BRANCH_MEMBER, float16/double, post_transform SOFTMAX or LOGISTIC,
    and malformed attributes (cycles, out-of-range indices, missing n_targets, ...).
    """
    refuse = Refuse(node)
    if node.op_type != "TreeEnsemble" or node.domain != ML:
        raise refuse("op_type", f"expected TreeEnsemble of {ML}, got {node.op_type} of {node.domain or 'ai.onnx'}")
    check_input_float(input_elem_type, refuse, "TreeEnsembleRegressor")
    a = read_attrs(node, TE_KNOWN, refuse)
    for name in TE_REQUIRED:
        if name not in a:
            raise refuse(name, "required and absent")
    e = _Ensemble(a, refuse)
    if "n_targets" not in a:
        raise refuse("n_targets", "absent; neither runtime runs a TreeEnsemble without it")
    n_targets = int(a["n_targets"])
    if n_targets < 1:
        raise refuse("n_targets", f"is {n_targets}; it must be positive")
    bad = [t for t in e.targets if not 0 <= t < n_targets]
    if bad:
        raise refuse("leaf_targetids", f"{bad[0]} is outside [0, n_targets={n_targets})")
    agg = int(a.get("aggregate_function", 1))
    if not 0 <= agg < len(AGGREGATES):
        raise refuse("aggregate_function", f"{agg} is not 0 (AVERAGE), 1 (SUM), 2 (MIN) or 3 (MAX)")
    post = int(a.get("post_transform", 0))
    if post in CONTESTED_POST_TRANSFORMS:
        raise refuse("post_transform", f"{post} is {CONTESTED_POST_TRANSFORMS[post]} by the ONNX schema but "
                                       f"{CONTESTED_POST_TRANSFORMS[3 - post]} to onnxruntime, so either string "
                                       "would change what one of them computes")
    if post not in POST_TRANSFORMS:
        raise refuse("post_transform", f"{post} is not a post_transform code (0..4)")
    roots = read_ints(a, "tree_roots", refuse)
    if not roots:
        raise refuse("tree_roots", "no trees")
    out = e.regressor_lists(e.walks(roots))
    out.update(n_targets=n_targets, aggregate_function=AGGREGATES[agg], post_transform=POST_TRANSFORMS[post])
    return helper.make_node("TreeEnsembleRegressor", list(node.input), list(node.output), name=node.name,
                            domain=ML, doc_string=node.doc_string or None,
                            **{k: out[k] for k in sorted(out)})


class _Ensemble:
    """A TreeEnsemble's node and leaf lists, checked (float32 tensors, one entry per node, 0/1
    missing-value flags, one weight per leaf target)."""

    def __init__(self, a: dict, refuse: Refuse):
        self.refuse = refuse
        tensors = {}
        for name in ("nodes_splits", "leaf_weights", "nodes_hitrates"):
            t = read_tensor(a, name, refuse)
            if t is None:
                continue
            if t.data_type == TensorProto.FLOAT16:
                raise refuse(name, "float16 (so X is float16): TreeEnsembleRegressor has no float16")
            if t.data_type == TensorProto.DOUBLE and name != "nodes_hitrates":
                raise refuse(name, "double (so X and Y are double): TreeEnsembleRegressor's output is always float, "
                                   "so one regressor node cannot give TreeEnsemble's double result")
            if t.data_type != TensorProto.FLOAT and not (name == "nodes_hitrates" and t.data_type == TensorProto.DOUBLE):
                raise refuse(name, f"{type_name(t.data_type)} is not a type TreeEnsemble takes here (float)")
            tensors[name] = flat(t)
        self.splits = tensors["nodes_splits"].astype(np.float32)
        self.weights = tensors["leaf_weights"].astype(np.float32)
        self.hitrates = tensors.get("nodes_hitrates")
        modes_t = read_tensor(a, "nodes_modes", refuse)
        if modes_t.data_type != TensorProto.UINT8:
            raise refuse("nodes_modes", f"must be a uint8 tensor, is {type_name(modes_t.data_type)}")
        self.modes = [int(m) for m in flat(modes_t)]
        self.features = read_ints(a, "nodes_featureids", refuse)
        self.true_ids, self.false_ids = read_ints(a, "nodes_truenodeids", refuse), read_ints(a, "nodes_falsenodeids", refuse)
        self.true_leaf, self.false_leaf = read_ints(a, "nodes_trueleafs", refuse), read_ints(a, "nodes_falseleafs", refuse)
        self.n = n = len(self.modes)
        lists = {"nodes_splits": self.splits, "nodes_featureids": self.features, "nodes_truenodeids": self.true_ids,
                 "nodes_falsenodeids": self.false_ids, "nodes_trueleafs": self.true_leaf,
                 "nodes_falseleafs": self.false_leaf}
        mvt = read_ints(a, "nodes_missing_value_tracks_true", refuse, default=[])
        if mvt:
            lists["nodes_missing_value_tracks_true"] = mvt
        if self.hitrates is not None:
            lists["nodes_hitrates"] = self.hitrates
        for name, values in lists.items():
            if len(values) != n:
                raise refuse(name, f"has {len(values)} entries and nodes_modes {n}; every nodes_* has one per node")
        if any(v not in (0, 1) for v in mvt):
            raise refuse("nodes_missing_value_tracks_true", "values other than 0 and 1 (onnxruntime takes only 1 as "
                                                            "true, onnx.reference any non-zero)")
        self.mvt = mvt or [0] * n
        self.targets = read_ints(a, "leaf_targetids", refuse)
        if len(self.targets) != len(self.weights):
            raise refuse("leaf_weights", f"has {len(self.weights)} entries and leaf_targetids {len(self.targets)}")

    def leaf_key(self, i: int, flag: int, child: int, which: str):
        if flag:
            if not 0 <= child < len(self.targets):
                raise self.refuse(f"nodes_{which}nodeids", f"node {i}'s {which} leaf {child} is not a leaf index")
            return ("l", child)
        if not 0 <= child < self.n:
            raise self.refuse(f"nodes_{which}nodeids", f"node {i}'s {which} child {child} is not a node index")
        return ("n", child)

    def children(self, i: int):
        modes = self.modes
        if modes[i] == BRANCH_MEMBER:
            raise self.refuse("nodes_modes", f"node {i} is BRANCH_MEMBER (set membership), which has no "
                                             "TreeEnsembleRegressor equivalent mode")
        if not 0 <= modes[i] < len(MODES):
            raise self.refuse("nodes_modes", f"node {i} has mode {modes[i]}, not a TreeEnsemble mode (0..6)")
        return (self.leaf_key(i, self.true_leaf[i], self.true_ids[i], "true"),
                self.leaf_key(i, self.false_leaf[i], self.false_ids[i], "false"))

    def walks(self, roots: list[int]) -> list[tuple[str, int]]:
        """Each tree's top (a node, or the leaf of a one-leaf tree); refused when copying the
        nodes branches share would make more than MAX_NODES nodes."""
        refuse, walks, total = self.refuse, [], 0
        for tree, root in enumerate(roots):
            if not 0 <= root < self.n:
                raise refuse("tree_roots", f"tree {tree}'s root {root} is not a node index")
            if self.true_leaf[root] and self.false_leaf[root] and self.true_ids[root] == self.false_ids[root]:
                walks.append(self.leaf_key(root, 1, self.true_ids[root], "true"))  # the one-leaf tree
                total += 1
                continue
            top = ("n", root)
            _, post_order = walk(top, self.children, refuse, "nodes_truenodeids/nodes_falsenodeids")
            size = {}
            for key in post_order:  # nodes once every branch to a shared node is a copy of it
                size[key] = 1 if key[0] == "l" else 1 + sum(size[c] for c in self.children(key[1]))
            total += size[top]
            if total > MAX_NODES:
                raise refuse("nodes_truenodeids/nodes_falsenodeids", f"branches share nodes, and onnxruntime's "
                                                                     f"regressor takes only trees: copying the shared "
                                                                     f"nodes makes more than {MAX_NODES} nodes")
            walks.append(top)
        return walks

    def regressor_lists(self, walks) -> dict[str, list]:
        """The regressor's nodes_* and target_* lists: each tree in preorder, true branch first
        (node ids 0, 1, 2, ...), a shared node copied once per branch to it."""
        out = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                               "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                               "nodes_hitrates", "target_treeids", "target_nodeids", "target_ids", "target_weights")}
        hitrates = self.hitrates
        for tree, top in enumerate(walks):
            stack, at = [(top, -1, "")], 0
            while stack:
                (kind, i), parent, which = stack.pop()
                nid = at
                at += 1
                if parent >= 0:
                    out[f"nodes_{which}nodeids"][parent] = nid
                out["nodes_treeids"].append(tree)
                out["nodes_nodeids"].append(nid)
                out["nodes_truenodeids"].append(0)
                out["nodes_falsenodeids"].append(0)
                if kind == "l":
                    out["nodes_featureids"].append(0)
                    out["nodes_modes"].append("LEAF")
                    out["nodes_values"].append(0.0)
                    out["nodes_missing_value_tracks_true"].append(0)
                    out["nodes_hitrates"].append(0.0)
                    out["target_treeids"].append(tree)
                    out["target_nodeids"].append(nid)
                    out["target_ids"].append(self.targets[i])
                    out["target_weights"].append(float(self.weights[i]))
                else:
                    out["nodes_featureids"].append(self.features[i])
                    out["nodes_modes"].append(MODES[self.modes[i]])
                    out["nodes_values"].append(float(self.splits[i]))
                    out["nodes_missing_value_tracks_true"].append(self.mvt[i])
                    out["nodes_hitrates"].append(float(hitrates[i]) if hitrates is not None else 0.0)
                    t, f = self.children(i)
                    row = len(out["nodes_nodeids"]) - 1
                    stack.append((f, row, "false"))
                    stack.append((t, row, "true"))
        if hitrates is None:
            del out["nodes_hitrates"]
        return out
