"""Tree ensembles as tensor computations: the tree-traversal formulation (all trees at once, one
level per step: gather each row's current node's feature, threshold and children, compare, move),
then the leaves' weights added tree after tree in the kernel's order.

Why traversal, not the GEMM formulation: GEMM (one matrix product for all splits, one for the
paths) grows with leaves x nodes per tree and sums path indicators in floating point, and cannot
express ``missing_value_tracks_true``, per-node modes or DAG-shaped trees; traversal costs
depth x (5..9) nodes whatever the tree sizes, handles every mode, NaN track and shared child
exactly, and picks the leaf by the very comparisons the kernel makes.
"""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering.emit import BOOL, Emitter, negative_zeros
from rewriter.convert.lowering.ml_tree_tables import MODES, Forest

__all__ = ["leaf_indices", "sums", "extremes", "presence"]

_COMPARE = {"BRANCH_LEQ": "LessOrEqual", "BRANCH_LT": "Less", "BRANCH_GTE": "GreaterOrEqual",
            "BRANCH_GT": "Greater", "BRANCH_EQ": "Equal"}


def _compare(e: Emitter, mode: str, x: str, t: str) -> str:
    if mode == "BRANCH_NEQ":  # x != t: true for NaN, as in C++
        return e.op("Not", [e.op("Equal", [x, t])])
    return e.op(_COMPARE[mode], [x, t])


def _step(e: Emitter, f: Forest, x: str, values: str, at, nan_possible: bool) -> str:
    """The next node of each (row, tree): ``values`` are the features read at nodes ``at`` (a
    constant index array for the roots, else an [N, T] tensor)."""
    def table(arr, hint):
        if isinstance(at, np.ndarray):
            return e.const(arr[at], hint=hint)
        return e.op("Gather", [e.const(arr, hint=hint), at])

    t = table(f.threshold, "thresholds")
    used = sorted({int(m) for m in f.mode[f.mode >= 0]})
    if len(used) <= 1:
        cond = _compare(e, MODES[used[0]] if used else "BRANCH_LEQ", values, t)
    else:
        codes = table(f.mode, "modes")
        cond = None  # exactly one mode holds at a node (onnxruntime has no boolean Where)
        for m in used:
            is_m = e.op("Equal", [codes, e.const(np.int64(m), hint="mode")])
            c = e.op("And", [is_m, _compare(e, MODES[m], values, t)])
            cond = c if cond is None else e.op("Or", [cond, c])
    if nan_possible and f.track.any():
        cond = e.op("Or", [cond, e.op("And", [e.op("IsNaN", [values]), table(f.track, "tracks")])])
    return e.op("Where", [cond, table(f.true_child, "true_children"), table(f.false_child, "false_children")])


def leaf_indices(e: Emitter, f: Forest, x: str, nan_possible: bool) -> str:
    """[N, T] int64: the leaf each row reaches in each tree (``x``: [N, F] in the comparison type)."""
    roots = f.roots
    values = e.op("Gather", [x, e.const(f.feature[roots], hint="root_features")], axis=1)
    at = _step(e, f, x, values, roots, nan_possible)
    for _ in range(1, max(f.depth, 1)):
        feats = e.op("Gather", [e.const(f.feature, hint="features"), at])
        at = _step(e, f, x, e.op("GatherElements", [x, feats], axis=1), at, nan_possible)
    return at


def _slots(f: Forest, n: int, dtype) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per slot s: ([M, n] weights, [M, n] present), slot s holding each leaf's s-th weight per
    target (a leaf may name a target more than once: the kernel adds them in turn)."""
    m = len(f.mode)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for leaf, entries in f.weights.items():
        count: dict[int, int] = {}
        for target, w in entries:
            s = count.get(target, 0)
            count[target] = s + 1
            while len(out) <= s:
                out.append((np.zeros((m, n), dtype), np.zeros((m, n), bool)))
            out[s][0][leaf, target], out[s][1][leaf, target] = w, True
    return out or [(np.zeros((m, n), dtype), np.zeros((m, n), bool))]


def _per_tree(e: Emitter, table: np.ndarray, leaves: str, trees: int, hint: str) -> list[str]:
    """The rows of ``table`` ([M] or [M, n]) at each tree's leaf: T tensors [N, 1] or [N, 1, n]."""
    return e.columns(e.op("Gather", [e.const(table, hint=hint), leaves]), 1, trees)


def sums(e: Emitter, f: Forest, leaves: str, n: int, dtype) -> str:
    """Per target, 0 + the leaves' weights tree after tree (entries of one leaf in order): [N, n]."""
    zero = e.const(np.zeros((), dtype), hint="zero")
    if n == 1:
        return e.sequential_sum(_per_tree(e, f.first.astype(dtype), leaves, f.n_trees, "leaf_values"), zero)
    slots = [_per_tree(e, w, leaves, f.n_trees, "leaf_weights") for w, _ in _slots(f, n, dtype)]
    parts = [slot[t] for t in range(f.n_trees) for slot in slots]
    return e.squeeze(e.sequential_sum(parts, zero), [1])


def extremes(e: Emitter, f: Forest, leaves: str, n: int, dtype, smallest: bool) -> tuple[str, str | None]:
    """MIN or MAX over the weights reached, in the kernel's order: ``(!has || w < score) ? w : score``;
    returns (scores [N, n], has [N, n] bool, None with one target: every tree scores)."""
    better = "Less" if smallest else "Greater"
    if n == 1:
        parts = _per_tree(e, f.first.astype(dtype), leaves, f.n_trees, "leaf_values")
        signed = negative_zeros(f.first)
        acc = parts[0]
        for p in parts[1:]:
            acc = e.select(e.op(better, [p, acc]), p, acc, a_signed=signed, dtype=dtype)
        return acc, None
    signed = negative_zeros([w for entries in f.weights.values() for _, w in entries])
    slots = [(_per_tree(e, w, leaves, f.n_trees, "leaf_weights"), _per_tree(e, h, leaves, f.n_trees, "leaf_has"))
             for w, h in _slots(f, n, dtype)]
    acc, has = None, None
    for t in range(f.n_trees):
        for ws, hs in slots:
            w, present = ws[t], hs[t]
            if acc is None:
                zero = e.const(np.zeros((), dtype), hint="zero")
                acc, has = e.select(present, w, zero, a_signed=signed, b_signed=False, dtype=dtype), present
                continue
            take = e.op("And", [present, e.op("Or", [e.op("Not", [has]), e.op(better, [w, acc])])])
            acc, has = e.select(take, w, acc, a_signed=signed, dtype=dtype), e.op("Or", [has, present])
    return e.squeeze(acc, [1]), e.squeeze(has, [1])


def presence(e: Emitter, f: Forest, leaves: str, n: int) -> tuple[str | None, np.ndarray]:
    """Whether some reached leaf weighs each target: (an [N, n] bool tensor, or None when known
    statically, and the static answer per target: 1 always, 0 never, -1 depends on the row)."""
    has = np.zeros((len(f.mode), n), bool)
    for leaf, entries in f.weights.items():
        for target, _ in entries:
            has[leaf, target] = True
    tree_of = np.zeros(len(f.mode), np.int64)
    leaves_of = [[] for _ in range(f.n_trees)]
    _assign_trees(f, tree_of, leaves_of)
    always = np.zeros(n, bool)
    for ls in leaves_of:
        if ls:
            always |= has[ls].all(axis=0)
    never = ~has.any(axis=0)
    static = np.where(always, 1, np.where(never, 0, -1))
    if (static >= 0).all():
        return None, static
    reached = e.cast(e.op("Gather", [e.const(has, hint="leaf_has"), leaves]), 6)  # int32: ReduceMax takes no bool
    any_tree = e.reduce("ReduceMax", reached, [1], keepdims=0)
    return e.cast(any_tree, BOOL), static


def _assign_trees(f: Forest, tree_of: np.ndarray, leaves_of: list) -> None:
    is_leaf = f.mode < 0
    for t, root in enumerate(f.roots):
        stack, seen = [int(root)], set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            tree_of[node] = t
            if is_leaf[node]:
                leaves_of[t].append(node)
            else:
                stack += [int(f.true_child[node]), int(f.false_child[node])]
