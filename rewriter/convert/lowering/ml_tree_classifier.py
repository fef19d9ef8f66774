"""``ai.onnx.ml`` TreeEnsembleClassifier: the traversal and sums of :mod:`ml_tree_walk`, then ONNX
Runtime's ``TreeAggregatorClassifier::FinalizeScores`` (``tree_ensemble_aggregator.h``):

- three classes or more: base values added (a class gets a score from its base value), the label
  is the first class of highest score among those with a score;
- two classes: the kernel's binary rules, row by row on whether each class got a score from some
  leaf: with two base values a scored second class becomes ``b1 + s0`` and the first its negation;
  the label compares the positive score with 0.5 (all weights >= 0, one class weighted) or 0, and
  one scored column becomes two as ``[1 - s, s]``, ``[-s, s]`` or the logistic pair;
- scores written as ``has ? score : 0`` after ``post_transform``'s scalar form.
"""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering import ml_post
from rewriter.convert.lowering.emit import F32, F64, I64, Emitter, negative_zeros
from rewriter.convert.lowering.ml_tree_ops import NODE_ATTRS, ORDER, features, to_float, transform_name, typed
from rewriter.convert.lowering.ml_tree_tables import read_forest
from rewriter.convert.lowering.ml_tree_walk import leaf_indices, presence, sums
from rewriter.convert.lowering.registry import lowering

__all__ = []

INT32 = 6


def _scored_argmax(e: Emitter, cols: list[str], has: list[str]) -> str:
    """get_max_weight: the first scored column, then any scored one strictly greater; -1 if none."""
    best, index = None, None
    minus_one = e.const(np.int64(-1), hint="minus_one")
    for j, (v, h) in enumerate(zip(cols, has)):
        j_t = e.const(np.int64(j), hint="index")
        if best is None:
            best, index = v, e.op("Where", [h, j_t, minus_one])
            continue
        take = e.op("And", [h, e.op("Or", [e.op("Equal", [index, minus_one]), e.op("Greater", [v, best])])])
        best, index = e.op("Where", [take, v, best]), e.op("Where", [take, j_t, index])
    return index


def _bool_const(e: Emitter, values) -> str:
    return e.const(np.asarray(values, bool), hint="scored")


def _multiclass(ctx, scores: str, has, static, base: np.ndarray, n: int, dtype, labels: np.ndarray) -> tuple:
    e = ctx.emit
    if len(base) > n:
        ctx.block(f"{len(base)} base values for {n} classes (onnxruntime writes past the scores)")
    padded = np.zeros(n, dtype)
    padded[:len(base)] = base
    from_base = np.arange(n) < len(base)
    bvec = e.const(padded, hint="base_values")
    added = e.op("Add", [scores, bvec])
    if has is None:  # static: classes always / never scored
        scored = (static == 1) | from_base
        values = added if (static == 1).all() else e.op("Where", [_bool_const(e, static == 1), added, bvec])
        has = None if scored.all() else _bool_const(e, scored)
    else:
        values = e.op("Where", [has, added, bvec])
        has = e.op("Or", [has, _bool_const(e, from_base)]) if from_base.any() else has
    cols = e.columns(values, 1, n)
    if has is None:
        index = e.first_argmax(cols)
    else:
        hs = e.columns(e.op("Expand", [has, e.op("Shape", [values])]), 1, n)
        index = _scored_argmax(e, cols, hs)
    label = e.op("Gather", [e.const(labels, hint="labels"), e.squeeze(index, [1])])
    shown = values if has is None else e.select(has, values, e.const(np.zeros((), dtype), hint="zero"),
                                                a_signed=negative_zeros(base), b_signed=False, dtype=dtype)
    return label, to_float(e, shown, dtype)


def _weights_facts(ctx) -> tuple[bool, bool]:
    """(binary_case: one class id among all entries, weights_are_all_positive: none < 0)."""
    ids = set(int(i) for i in ctx.attrs.get("class_ids", []))
    t = ctx.tensor("class_weights_as_tensor")
    weights = t.reshape(-1) if t is not None else ctx.floats("class_weights")
    return len(ids) == 1, not bool((weights < 0).any())


def _binary(ctx, scores: str, has, static, base: np.ndarray, dtype, labels: np.ndarray, strings: bool, how: str):
    e = ctx.emit
    if len(base) > 2:
        ctx.block(f"{len(base)} base values for two classes")
    binary_case, all_positive = _weights_facts(ctx)
    zero = e.const(np.zeros((), dtype), hint="zero")
    s0, s1 = e.columns(scores, 1, 2)
    if has is None:
        h0, h1 = _bool_const(e, static[0] == 1), _bool_const(e, static[1] == 1)
    else:
        h0, h1 = e.columns(has, 1, 2)
    b = [e.const(np.asarray(v, dtype), hint="base_value") for v in base]
    if len(base) == 2:
        lifted = e.op("Add", [b[1], s0])
        p1 = e.op("Where", [h1, lifted, e.op("Add", [s1, b[1]])])
        p0 = e.select(h1, e.op("Neg", [lifted]), e.op("Add", [s0, b[0]]), dtype=dtype)
    else:
        p0, p1 = (e.op("Add", [s0, b[0]]) if len(base) == 1 else s0), s1
    pos = e.op("Where", [h1, p1, e.op("Where", [h0, p0, zero])])
    cut = 0.5 if binary_case and all_positive else 0.0
    positive = e.op("Greater", [pos, e.const(np.asarray(cut, dtype), hint="cut")])
    if strings or binary_case:
        yes, no = labels[1], labels[0]
    else:
        yes, no = np.int64(1), np.int64(0)
    label = e.op("Where", [e.squeeze(positive, [1]), e.const(np.asarray(yes, dtype=labels.dtype), hint="label"),
                           e.const(np.asarray(no, dtype=labels.dtype), hint="label")])
    s = e.select(h0, p0, zero, b_signed=False, dtype=dtype)  # p0 is -0.0 where b1 + s0 is 0
    pair = e.concat([s, e.op("Where", [h1, p1, zero])], 1)
    two = ml_post.transform(e, to_float(e, pair, dtype), 2, how, mlas=False)
    one_possible = len(base) < 2 and static[1] != 1
    if not one_possible:
        return label, two
    if how == "PROBIT" or not binary_case and len(base) == 1:
        ctx.block("two classes whose second may get no score: onnxruntime then writes one probability column "
                  "of two (the other is left unwritten)")
    minus_s = e.select(h0, e.op("Neg", [p0]), zero, b_signed=False, dtype=dtype)
    if binary_case and all_positive and how == "LOGISTIC":  # onnxruntime 1.32: [1 - L(s), L(s)] (measured)
        p = ml_post.logistic(e, to_float(e, s, dtype))
        one = e.concat([e.op("Sub", [e.const(np.float32(1), hint="one"), p]), p], 1)
    elif binary_case and all_positive:
        one = to_float(e, e.concat([e.op("Sub", [e.const(np.asarray(1, dtype), hint="one"), s]), s], 1), dtype)
    elif how == "LOGISTIC":
        one = e.concat([ml_post.logistic(e, to_float(e, minus_s, dtype)),
                        ml_post.logistic(e, to_float(e, s, dtype))], 1)
    else:
        one = to_float(e, e.concat([minus_s, s], 1), dtype)
    return label, e.select(h1, two, one)


@lowering("TreeEnsembleClassifier", exactness=ORDER)
def tree_classifier(ctx) -> None:
    ctx.known(*NODE_ATTRS, "class_treeids", "class_nodeids", "class_ids", "class_weights", "class_weights_as_tensor",
              "classlabels_int64s", "classlabels_strings")
    elem = ctx.input_elem({F32: "float", F64: "double", I64: "int64", INT32: "int32"})
    dtype = np.float64 if elem == F64 else np.float32
    strings = ctx.strings("classlabels_strings")
    labels = np.asarray(strings, dtype=object) if strings else ctx.ints("classlabels_int64s")
    n = len(labels)
    if n < 2:
        ctx.block(f"{n} class label(s): the one-score classifier path is not lowered")
    forest = read_forest(ctx.attrs, "class", n, typed(ctx, "nodes_values", dtype), typed(ctx, "class_weights", dtype))
    base, how = typed(ctx, "base_values", dtype), transform_name(ctx)
    e = ctx.emit
    leaves = leaf_indices(e, forest, features(ctx, elem, dtype, forest), elem in (F32, F64))
    scores = sums(e, forest, leaves, n, dtype)
    has, static = presence(e, forest, leaves, n)
    if n > 2:
        label, probabilities = _multiclass(ctx, scores, has, static, base, n, dtype, labels)
        probabilities = ml_post.transform(e, probabilities, n, how, mlas=False)
    else:
        label, probabilities = _binary(ctx, scores, has, static, base, dtype, labels, bool(strings), how)
    ctx.exactness = ORDER if how == "NONE" else f"{ORDER}; {how}: {ml_post.TOLERANCE}"
    if ctx.out(0):
        e.identity(label, ctx.out(0))
    if ctx.out(1):
        e.identity(probabilities, ctx.out(1))
