"""``ai.onnx.ml`` TreeEnsemble-5 <-> TreeEnsembleRegressor-1/3, node for node, exactly or not at all.

Pure functions on :class:`onnx.NodeProto` (no registration: :mod:`rewriter.convert.ml` calls them).
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
  (refused past MAX_NODES). TreeEnsemble takes shared nodes, so the other way keeps the sharing.
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
from onnx import TensorProto, helper, numpy_helper

from rewriter.errors import ConversionError

__all__ = ["tree_ensemble_to_regressor", "regressor_to_tree_ensemble"]

ML = "ai.onnx.ml"
MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")  # TreeEnsemble codes 0..5
BRANCH_MEMBER = 6
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # TreeEnsemble codes 0..3
POST_TRANSFORMS = {0: "NONE", 3: "SOFTMAX_ZERO", 4: "PROBIT"}  # the codes the schema and onnxruntime agree on
CONTESTED_POST_TRANSFORMS = {1: "SOFTMAX", 2: "LOGISTIC"}  # the schema's reading; onnxruntime swaps them

_TE_REQUIRED = ("tree_roots", "nodes_modes", "nodes_featureids", "nodes_splits", "nodes_truenodeids",
                "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs", "leaf_targetids", "leaf_weights")
_TE_KNOWN = set(_TE_REQUIRED) | {"aggregate_function", "post_transform", "n_targets", "nodes_hitrates",
                                 "nodes_missing_value_tracks_true", "membership_values"}
_REG_NODES = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_truenodeids",
              "nodes_falsenodeids")
_REG_TARGETS = ("target_treeids", "target_nodeids", "target_ids")
_REG_TWINS = ("nodes_values", "nodes_hitrates", "target_weights", "base_values")  # FLOATS and *_as_tensor
_REG_KNOWN = (set(_REG_NODES) | set(_REG_TARGETS) | set(_REG_TWINS) | {f"{n}_as_tensor" for n in _REG_TWINS}
              | {"aggregate_function", "post_transform", "n_targets", "nodes_missing_value_tracks_true"})
_F32_MAX = float(np.finfo(np.float32).max)
MAX_NODES = 1 << 22  # regressor nodes written at most when shared TreeEnsemble nodes are copied


def _type_name(t: int) -> str:
    try:
        return TensorProto.DataType.Name(t).lower()
    except ValueError:
        return f"element type {t}"


class _Refuse:
    def __init__(self, node: onnx.NodeProto):
        self.where = f"{node.op_type} {node.name!r}" if node.name else node.op_type

    def __call__(self, attr: str, reason: str) -> ConversionError:
        return ConversionError(f"{self.where}: {attr}: {reason}")


def _attrs(node: onnx.NodeProto, known: set[str], refuse: _Refuse) -> dict:
    out = {}
    for a in node.attribute:
        if a.name not in known:
            raise refuse(a.name, f"not an attribute of {node.op_type}; its meaning is unknown")
        if a.ref_attr_name:
            raise refuse(a.name, f"refers to the function attribute {a.ref_attr_name!r}, whose value is unknown here")
        out[a.name] = helper.get_attribute_value(a)
    return out


def _ints(a: dict, name: str, refuse: _Refuse, default=None) -> list[int]:
    if name not in a:
        if default is None:
            raise refuse(name, "required and absent")
        return default
    v = a[name]
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) for x in v):
        raise refuse(name, "must be a list of integers")
    return [int(x) for x in v]


def _tensor(a: dict, name: str, refuse: _Refuse) -> onnx.TensorProto | None:
    v = a.get(name)
    if v is not None and not isinstance(v, onnx.TensorProto):
        raise refuse(name, "must be a tensor")
    return v


def _flat(t: onnx.TensorProto) -> np.ndarray:
    return numpy_helper.to_array(t).reshape(-1)


def _check_input_float(input_elem_type: int | None, refuse: _Refuse, target: str) -> None:
    if input_elem_type is None or input_elem_type == TensorProto.FLOAT:
        return
    name = _type_name(input_elem_type)
    if input_elem_type == TensorProto.FLOAT16:
        raise refuse("X", f"the input is float16, which {target} does not take")
    if input_elem_type == TensorProto.DOUBLE:
        raise refuse("X", "the input is double: TreeEnsemble's output has its input's type and "
                          "TreeEnsembleRegressor's is always float, so one node cannot stand for the other")
    raise refuse("X", f"the input is {name}; only float inputs convert ({target} "
                      + ("takes float, double and float16 only)" if target == "TreeEnsemble" else "cannot take it)"))


def _walk(root, children, refuse: _Refuse, attr: str):
    """Depth-first walk (true branch first) of the keys reachable from ``root``, each once: its
    preorder and its postorder. A key is ``("n", i)`` for a branch node, ``("l", j)`` for a leaf;
    a cycle is refused."""
    pre, post, state = [], [], {}
    stack = [(root, False)]
    while stack:
        key, leaving = stack.pop()
        if leaving:
            state[key] = 2
            post.append(key)
            continue
        s = state.get(key)
        if s == 1:
            raise refuse(attr, f"node {key[1]} is its own descendant (a cycle): no runtime finishes that walk")
        if s == 2:
            continue
        pre.append(key)
        if key[0] == "l":
            state[key] = 2
            post.append(key)
            continue
        state[key] = 1
        stack.append((key, True))
        t, f = children(key[1])
        stack.append((f, False))
        stack.append((t, False))
    return pre, post


def tree_ensemble_to_regressor(node: onnx.NodeProto, input_elem_type: int | None = None) -> onnx.NodeProto:
    """``ai.onnx.ml`` TreeEnsemble (schema 5) as an equal TreeEnsembleRegressor (schema 3 attributes).

    ``input_elem_type`` is X's ``TensorProto`` element type when known; without it the type is
    read from ``nodes_splits``/``leaf_weights`` (TreeEnsemble's thresholds and weights have X's type).
    Raises ConversionError for BRANCH_MEMBER, float16/double, post_transform SOFTMAX or LOGISTIC,
    and malformed attributes (cycles, out-of-range indices, missing n_targets, ...).
    """
    refuse = _Refuse(node)
    if node.op_type != "TreeEnsemble" or node.domain != ML:
        raise refuse("op_type", f"expected TreeEnsemble of {ML}, got {node.op_type} of {node.domain or 'ai.onnx'}")
    _check_input_float(input_elem_type, refuse, "TreeEnsembleRegressor")
    a = _attrs(node, _TE_KNOWN, refuse)
    for name in _TE_REQUIRED:
        if name not in a:
            raise refuse(name, "required and absent")

    tensors = {}
    for name in ("nodes_splits", "leaf_weights", "nodes_hitrates"):
        t = _tensor(a, name, refuse)
        if t is None:
            continue
        if t.data_type == TensorProto.FLOAT16:
            raise refuse(name, "float16 (so X is float16): TreeEnsembleRegressor has no float16")
        if t.data_type == TensorProto.DOUBLE and name != "nodes_hitrates":
            raise refuse(name, "double (so X and Y are double): TreeEnsembleRegressor's output is always float, "
                               "so one regressor node cannot give TreeEnsemble's double result")
        if t.data_type != TensorProto.FLOAT and not (name == "nodes_hitrates" and t.data_type == TensorProto.DOUBLE):
            raise refuse(name, f"{_type_name(t.data_type)} is not a type TreeEnsemble takes here (float)")
        tensors[name] = _flat(t)
    splits, weights = tensors["nodes_splits"].astype(np.float32), tensors["leaf_weights"].astype(np.float32)
    hitrates = tensors.get("nodes_hitrates")

    modes_t = _tensor(a, "nodes_modes", refuse)
    if modes_t.data_type != TensorProto.UINT8:
        raise refuse("nodes_modes", f"must be a uint8 tensor, is {_type_name(modes_t.data_type)}")
    modes = [int(m) for m in _flat(modes_t)]
    features = _ints(a, "nodes_featureids", refuse)
    true_ids, false_ids = _ints(a, "nodes_truenodeids", refuse), _ints(a, "nodes_falsenodeids", refuse)
    true_leaf, false_leaf = _ints(a, "nodes_trueleafs", refuse), _ints(a, "nodes_falseleafs", refuse)
    n = len(modes)
    lists = {"nodes_splits": splits, "nodes_featureids": features, "nodes_truenodeids": true_ids,
             "nodes_falsenodeids": false_ids, "nodes_trueleafs": true_leaf, "nodes_falseleafs": false_leaf}
    mvt = _ints(a, "nodes_missing_value_tracks_true", refuse, default=[])
    if mvt:
        lists["nodes_missing_value_tracks_true"] = mvt
    if hitrates is not None:
        lists["nodes_hitrates"] = hitrates
    for name, values in lists.items():
        if len(values) != n:
            raise refuse(name, f"has {len(values)} entries and nodes_modes {n}; every nodes_* has one per node")
    if any(v not in (0, 1) for v in mvt):
        raise refuse("nodes_missing_value_tracks_true", "values other than 0 and 1 (onnxruntime takes only 1 as "
                                                        "true, onnx.reference any non-zero)")
    mvt = mvt or [0] * n
    targets = _ints(a, "leaf_targetids", refuse)
    if len(targets) != len(weights):
        raise refuse("leaf_weights", f"has {len(weights)} entries and leaf_targetids {len(targets)}")
    if "n_targets" not in a:
        raise refuse("n_targets", "absent; neither runtime runs a TreeEnsemble without it")
    n_targets = int(a["n_targets"])
    if n_targets < 1:
        raise refuse("n_targets", f"is {n_targets}; it must be positive")
    bad = [t for t in targets if not 0 <= t < n_targets]
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
    roots = _ints(a, "tree_roots", refuse)
    if not roots:
        raise refuse("tree_roots", "no trees")

    def leaf_key(i: int, flag: int, child: int, which: str):
        if flag:
            if not 0 <= child < len(targets):
                raise refuse(f"nodes_{which}nodeids", f"node {i}'s {which} leaf {child} is not a leaf index")
            return ("l", child)
        if not 0 <= child < n:
            raise refuse(f"nodes_{which}nodeids", f"node {i}'s {which} child {child} is not a node index")
        return ("n", child)

    def children(i: int):
        if modes[i] == BRANCH_MEMBER:
            raise refuse("nodes_modes", f"node {i} is BRANCH_MEMBER (set membership), which has no "
                                        "TreeEnsembleRegressor equivalent mode")
        if not 0 <= modes[i] < len(MODES):
            raise refuse("nodes_modes", f"node {i} has mode {modes[i]}, not a TreeEnsemble mode (0..6)")
        return (leaf_key(i, true_leaf[i], true_ids[i], "true"), leaf_key(i, false_leaf[i], false_ids[i], "false"))

    out = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                           "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                           "nodes_hitrates", "target_treeids", "target_nodeids", "target_ids", "target_weights")}
    walks, total = [], 0
    for tree, root in enumerate(roots):
        if not 0 <= root < n:
            raise refuse("tree_roots", f"tree {tree}'s root {root} is not a node index")
        if true_leaf[root] and false_leaf[root] and true_ids[root] == false_ids[root]:
            top = leaf_key(root, 1, true_ids[root], "true")  # the one-leaf tree
            walks.append(top)
            total += 1
            continue
        top = ("n", root)
        _, post_order = _walk(top, children, refuse, "nodes_truenodeids/nodes_falsenodeids")
        size = {}
        for key in post_order:  # nodes once every branch to a shared node is a copy of it
            size[key] = 1 if key[0] == "l" else 1 + sum(size[c] for c in children(key[1]))
        total += size[top]
        if total > MAX_NODES:
            raise refuse("nodes_truenodeids/nodes_falsenodeids", f"branches share nodes, and onnxruntime's "
                                                                 f"regressor takes only trees: copying the shared "
                                                                 f"nodes makes more than {MAX_NODES} nodes")
        walks.append(top)
    for tree, top in enumerate(walks):
        stack, at = [(top, -1, "")], 0  # preorder, true branch first: the node ids 0, 1, 2, ...
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
                out["target_ids"].append(targets[i])
                out["target_weights"].append(float(weights[i]))
            else:
                out["nodes_featureids"].append(features[i])
                out["nodes_modes"].append(MODES[modes[i]])
                out["nodes_values"].append(float(splits[i]))
                out["nodes_missing_value_tracks_true"].append(mvt[i])
                out["nodes_hitrates"].append(float(hitrates[i]) if hitrates is not None else 0.0)
                t, f = children(i)
                row = len(out["nodes_nodeids"]) - 1
                stack.append((f, row, "false"))
                stack.append((t, row, "true"))
    if hitrates is None:
        del out["nodes_hitrates"]
    out.update(n_targets=n_targets, aggregate_function=AGGREGATES[agg], post_transform=POST_TRANSFORMS[post])
    return helper.make_node("TreeEnsembleRegressor", list(node.input), list(node.output), name=node.name,
                            domain=ML, doc_string=node.doc_string or None,
                            **{k: out[k] for k in sorted(out)})


def _twin(a: dict, name: str, refuse: _Refuse) -> np.ndarray | None:
    """A regressor's float list ``name`` or its ``name_as_tensor`` twin, as float32 (double refused)."""
    plain, tensor = a.get(name), _tensor(a, f"{name}_as_tensor", refuse)
    if plain is not None and tensor is not None:
        raise refuse(f"{name}_as_tensor", f"set together with {name}; onnxruntime refuses that")
    if tensor is not None:
        if tensor.data_type == TensorProto.DOUBLE:
            raise refuse(f"{name}_as_tensor", "double: with a double input the regressor still outputs float "
                                              "and TreeEnsemble would output double; on a float input "
                                              "onnxruntime takes no double attributes")
        if tensor.data_type != TensorProto.FLOAT:
            raise refuse(f"{name}_as_tensor", f"{_type_name(tensor.data_type)}, not float or double")
        return _flat(tensor).astype(np.float32)
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
    refuse = _Refuse(node)
    if node.op_type != "TreeEnsembleRegressor" or node.domain != ML:
        raise refuse("op_type", f"expected TreeEnsembleRegressor of {ML}, got {node.op_type} of "
                                f"{node.domain or 'ai.onnx'}")
    _check_input_float(input_elem_type, refuse, "TreeEnsemble")
    a = _attrs(node, _REG_KNOWN, refuse)
    values, hitrates = _twin(a, "nodes_values", refuse), _twin(a, "nodes_hitrates", refuse)
    weights, base = _twin(a, "target_weights", refuse), _twin(a, "base_values", refuse)

    cols = {name: _ints(a, name, refuse, default=[]) for name in _REG_NODES if name != "nodes_modes"}
    cols["nodes_modes"] = [m.decode() if isinstance(m, bytes) else m for m in a.get("nodes_modes", [])]
    n = len(cols["nodes_treeids"])
    if n == 0:
        raise refuse("nodes_treeids", "no nodes, so no trees (TreeEnsemble needs at least one)")
    if values is None:
        raise refuse("nodes_values", "absent")
    lists = dict(cols, nodes_values=values)
    mvt = _ints(a, "nodes_missing_value_tracks_true", refuse, default=[])
    if mvt:
        lists["nodes_missing_value_tracks_true"] = mvt
    if hitrates is not None:
        lists["nodes_hitrates"] = hitrates
    for name, col in lists.items():
        if len(col) != n:
            raise refuse(name, f"has {len(col)} entries and nodes_treeids {n}; every nodes_* has one per node")
    if any(v not in (0, 1) for v in mvt):
        raise refuse("nodes_missing_value_tracks_true", "values other than 0 and 1 (onnxruntime takes only 1 as "
                                                        "true, onnx.reference any non-zero)")
    modes = cols["nodes_modes"]
    for i, m in enumerate(modes):
        if m != "LEAF" and m not in MODES:
            raise refuse("nodes_modes", f"node {i}'s mode {m!r} is not one of {', '.join(MODES)}, LEAF")

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

    # trees: runs of nodes_treeids in listing order, root first (onnxruntime starts a tree wherever
    # the tree id changes, onnx.reference at a tree's first node: the same when each tree's nodes
    # are listed together, refused otherwise)
    tree_ids, nodes_of = [], {}
    index = {}
    for i, (tid, nid) in enumerate(zip(cols["nodes_treeids"], cols["nodes_nodeids"])):
        if (tid, nid) in index:
            raise refuse("nodes_nodeids", f"node {nid} of tree {tid} is listed twice")
        index[tid, nid] = i
        if not tree_ids or tree_ids[-1] != tid:
            if tid in nodes_of:
                raise refuse("nodes_treeids", f"the nodes of tree {tid} are not listed together: onnxruntime "
                                              "would start another tree at the second run, onnx.reference not")
            tree_ids.append(tid)
            nodes_of[tid] = i

    tcols = {name: _ints(a, name, refuse, default=[]) for name in _REG_TARGETS}
    n_votes = len(tcols["target_ids"])
    for name, col in [*tcols.items(), ("target_weights", [] if weights is None else weights)]:
        if len(col) != n_votes:
            raise refuse(name, f"has {len(col)} entries and target_ids {n_votes}")
    votes: dict[int, list[tuple[int, np.float32]]] = {}
    for k, (tid, nid, target) in enumerate(zip(tcols["target_treeids"], tcols["target_nodeids"],
                                               tcols["target_ids"])):
        i = index.get((tid, nid))
        if i is None:
            raise refuse("target_nodeids", f"vote {k} names node {nid} of tree {tid}, which does not exist")
        if not 0 <= target < n_targets:
            raise refuse("target_ids", f"{target} is outside [0, n_targets={n_targets})")
        if modes[i] == "LEAF":  # both runtimes ignore votes on branch nodes
            votes.setdefault(i, []).append((target, weights[k]))

    if base is not None and np.any(base != 0):  # NaN != 0 too
        if agg_name != "SUM":
            raise refuse("base_values", f"non-zero under {agg_name}: TreeEnsemble has no base values, and the base is "
                                        f"added after the {agg_name.lower()}, which no TreeEnsemble node can "
                                        "reproduce exactly (only SUM's base can be one more tree)")
        if base.size != n_targets:
            raise refuse("base_values", f"{base.size} values for {n_targets} targets (onnxruntime ignores or "
                                        "rejects them, onnx.reference broadcasts them)")
    else:
        base = None

    def children(i: int):
        key = []
        for which in ("true", "false"):
            nid = cols[f"nodes_{which}nodeids"][i]
            j = index.get((cols["nodes_treeids"][i], nid))
            if j is None:
                raise refuse(f"nodes_{which}nodeids", f"node {cols['nodes_nodeids'][i]} of tree "
                                                      f"{cols['nodes_treeids'][i]}: {which} child {nid} does not exist")
            key.append(("l" if modes[j] == "LEAF" else "n", j))
        return tuple(key)

    walks, most, always = [], 1, set()
    for tid in tree_ids:
        root = nodes_of[tid]
        order, _ = _walk(("l" if modes[root] == "LEAF" else "n", root), children, refuse,
                         "nodes_truenodeids/nodes_falsenodeids")
        k, voted = 1, None  # voted: the targets every leaf of the tree votes for
        for kind, i in order:
            if kind != "l":
                continue
            m = len(votes.get(i, ()))
            voted = {t for t, _ in votes.get(i, ())} & (voted if voted is not None else set(range(n_targets)))
            if m == 0 and agg_name in ("MIN", "MAX"):
                raise refuse("target_nodeids", f"leaf {cols['nodes_nodeids'][i]} of tree {tid} has no vote, which "
                                               f"no TreeEnsemble leaf can stand for under {agg_name}")
            if m > 1 and n_targets == 1:
                raise refuse("target_nodeids", f"leaf {cols['nodes_nodeids'][i]} of tree {tid} has {m} votes with "
                                               "n_targets 1: onnxruntime reads only the first, the schema and "
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

    scale = np.float32(1)
    if agg_name == "AVERAGE" and most > 1:
        copies = 1 << (most - 1).bit_length()
        scale = np.float32(copies)
        finite = weights[np.isfinite(weights)] if weights is not None else np.zeros(0, np.float32)
        if float(np.abs(finite.astype(np.float64)).sum()) * copies > _F32_MAX:
            raise refuse("target_weights", f"a leaf has {most} votes, so each AVERAGE tree becomes {copies} trees "
                                           f"with weights times {copies}, which could overflow float")
        walks = [(tid, order, copies) for tid, order, _ in walks]

    te = {k: [] for k in ("nodes_modes", "nodes_featureids", "nodes_splits", "nodes_truenodeids", "nodes_trueleafs",
                          "nodes_falsenodeids", "nodes_falseleafs", "nodes_missing_value_tracks_true",
                          "nodes_hitrates", "leaf_targetids", "leaf_weights", "tree_roots")}

    def add_leaf(target: int, weight) -> int:
        te["leaf_targetids"].append(int(target))
        te["leaf_weights"].append(np.float32(weight))
        return len(te["leaf_targetids"]) - 1

    def add_node(mode: int, feature: int, split, mvt_flag: int, hitrate) -> int:
        te["nodes_modes"].append(mode)
        te["nodes_featureids"].append(int(feature))
        te["nodes_splits"].append(np.float32(split))
        te["nodes_missing_value_tracks_true"].append(int(mvt_flag))
        te["nodes_hitrates"].append(np.float32(hitrate))
        for k in ("nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs"):
            te[k].append(0)
        return len(te["nodes_modes"]) - 1

    def one_leaf_tree(leaf: int) -> None:
        # a branch node whose two branches are equal leaves: the schema's one-leaf tree (both branches
        # to one leaf) is read by onnx.reference as leaf tree_roots[t] instead, which is another leaf
        # unless the two indices happen to be equal
        twin = add_leaf(te["leaf_targetids"][leaf], te["leaf_weights"][leaf])
        at = add_node(0, 0, 0.0, 0, 0)
        te["nodes_truenodeids"][at], te["nodes_falsenodeids"][at] = leaf, twin
        te["nodes_trueleafs"][at] = te["nodes_falseleafs"][at] = 1
        te["tree_roots"].append(at)

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
                    where[kind, i] = add_leaf(target, np.float32(w) * scale)
                else:
                    where[kind, i] = add_node(MODES.index(modes[i]), cols["nodes_featureids"][i], values[i],
                                              mvt[i] if mvt else 0, hitrates[i] if hitrates is not None else 0)
            root = order[0]
            if root[0] == "l":
                one_leaf_tree(where[root])
                continue
            te["tree_roots"].append(where[root])
            for kind, i in order:
                if kind == "l":
                    continue
                at = where[kind, i]
                for which, child in zip(("true", "false"), children(i)):
                    te[f"nodes_{which}nodeids"][at] = where[child]
                    te[f"nodes_{which}leafs"][at] = int(child[0] == "l")
    if base is not None:  # SUM: each base value as a last one-leaf tree
        for target, b in enumerate(base):
            if b != 0 or np.isnan(b):
                one_leaf_tree(add_leaf(target, b))

    attrs = {
        "aggregate_function": AGGREGATES.index(agg_name),
        "post_transform": codes[post_name],
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
    if hitrates is not None:
        attrs["nodes_hitrates"] = numpy_helper.from_array(np.asarray(te["nodes_hitrates"], dtype=np.float32),
                                                          "nodes_hitrates")
    return helper.make_node("TreeEnsemble", list(node.input), list(node.output), name=node.name, domain=ML,
                            doc_string=node.doc_string or None, **{k: attrs[k] for k in sorted(attrs)})
