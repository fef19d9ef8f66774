"""``ai.onnx.ml`` TreeEnsembleRegressor and TreeEnsembleClassifier lowered through the traversal of
:mod:`ml_tree_walk`, finished the way ONNX Runtime's aggregators finish (``tree_ensemble_aggregator.h``):
base values, AVERAGE's division, targets no leaf scored written as 0, the classifier's labels
(first class of highest score among the scored ones; the two-class rules of ``_set_score_binary``)
and ``post_transform`` in ``write_scores``' scalar forms. Sums, maxima and labels are computed in
the kernel's type (double for double input) and rounded to float at the end, as the kernel does."""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering import ml_post
from rewriter.convert.lowering.emit import F32, F64, Emitter, negative_zeros
from rewriter.convert.lowering.ml_tree_tables import read_forest
from rewriter.convert.lowering.ml_tree_walk import extremes, leaf_indices, presence, sums
from rewriter.convert.lowering.registry import lowering

__all__ = ["NODE_ATTRS", "ORDER", "typed", "features", "transform_name", "to_float", "masked"]

INT32 = 6
ORDER = ("exact where onnxruntime adds the trees one after the other (one thread, or at most 50 rows, or "
         "one row and at most 80 trees); with more threads it splits the trees among them and the sums "
         "differ in the last bits")
NODE_ATTRS = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_truenodeids",
              "nodes_falsenodeids", "nodes_values", "nodes_values_as_tensor", "nodes_hitrates",
              "nodes_hitrates_as_tensor", "nodes_missing_value_tracks_true", "post_transform", "base_values",
              "base_values_as_tensor")


def typed(ctx, name: str, dtype) -> np.ndarray:
    """A FLOATS attribute or its ``*_as_tensor`` twin, in the kernel's type ``dtype``."""
    t = ctx.tensor(f"{name}_as_tensor")
    if t is not None:
        if name in ctx.attrs:
            ctx.block(f"both {name} and {name}_as_tensor")
        if t.dtype != dtype:
            ctx.block(f"{name}_as_tensor is {t.dtype} for a {np.dtype(dtype)} kernel (onnxruntime cannot read it)")
        return t.reshape(-1)
    return ctx.floats(name).astype(dtype)


def features(ctx, elem: int, dtype, forest) -> str:
    """The input as [N, F] in the comparison type (integers compare as float, as in C++)."""
    e, x = ctx.emit, ctx.node.input[0]
    info = ctx.input(0)
    if info.rank is not None and info.rank > 2 or info.rank == 0:
        ctx.block(f"input rank {info.rank}: onnxruntime's kernel reads rank 1 or 2")
    width = info.dim(-1)
    if width is not None and int(forest.feature.max()) >= width:
        ctx.block(f"a node reads feature {int(forest.feature.max())} of {width}")
    if info.rank != 2:
        if width is None:
            ctx.block("neither the input's rank nor its feature count is static")
        x = e.op("Reshape", [x, e.ints([-1, width])])
    want = F64 if dtype == np.float64 else F32
    return x if elem == want else e.cast(x, want)


def transform_name(ctx) -> str:
    how = ctx.attr("post_transform", "NONE")
    if how not in ml_post.TRANSFORMS:
        ctx.block(f"post_transform {how!r} is none of {', '.join(ml_post.TRANSFORMS)}")
    return how


def to_float(e: Emitter, x: str, dtype) -> str:
    return e.cast(x, F32) if dtype == np.float64 else x


def masked(e: Emitter, v: str, has, dtype, signed: bool = False) -> str:
    """has ? v : 0 (ScoreValue's reading of a target no leaf scored); ``signed``: v may be -0.0."""
    if has is None:
        return v
    return e.select(has, v, e.const(np.zeros((), dtype), hint="zero"), a_signed=signed, b_signed=False, dtype=dtype)


@lowering("TreeEnsembleRegressor", exactness=ORDER)
def tree_regressor(ctx) -> None:
    ctx.known(*NODE_ATTRS, "n_targets", "aggregate_function", "target_treeids", "target_nodeids", "target_ids",
              "target_weights", "target_weights_as_tensor")
    elem = ctx.input_elem({F32: "float", F64: "double"})
    dtype = np.float64 if elem == F64 else np.float32
    n = int(ctx.attr("n_targets", 0))
    if n < 1:
        ctx.block("n_targets must be at least 1 (onnxruntime refuses the node)")
    forest = read_forest(ctx.attrs, "target", n, typed(ctx, "nodes_values", dtype), typed(ctx, "target_weights", dtype))
    base = typed(ctx, "base_values", dtype)
    agg, how = ctx.attr("aggregate_function", "SUM"), transform_name(ctx)
    if agg not in ("SUM", "AVERAGE", "MIN", "MAX"):
        ctx.block(f"aggregate_function {agg!r} is none of SUM, AVERAGE, MIN, MAX")
    e = ctx.emit
    leaves = leaf_indices(e, forest, features(ctx, elem, dtype, forest), elem in (F32, F64))
    has = None
    if agg in ("SUM", "AVERAGE"):
        scores = sums(e, forest, leaves, n, dtype)
        if agg == "AVERAGE":
            scores = e.op("Div", [scores, e.const(np.asarray(forest.n_trees, dtype), hint="tree_count")])
    else:
        scores, has = extremes(e, forest, leaves, n, dtype, agg == "MIN")
    if n == 1:  # FinalizeScores1: + origin; only PROBIT applies
        origin = base[0] if len(base) == 1 else 0
        y = to_float(e, e.op("Add", [scores, e.const(np.asarray(origin, dtype), hint="origin")]), dtype)
        ctx.exactness = ORDER if how != "PROBIT" else f"{ORDER}; PROBIT: {ml_post.TOLERANCE}"
        ml_post.transform(e, y, 1, "PROBIT" if how == "PROBIT" else "NONE", mlas=False, out=ctx.node.output[0])
        return
    if has is None:
        has = _static_presence(e, forest, leaves, n)
    use_base = len(base) == n
    if agg in ("MIN", "MAX"):
        scores = e.op("Add", [e.const(base if use_base else np.zeros(n, dtype), hint="base_values"), scores])
    elif use_base:
        scores = e.op("Add", [scores, e.const(base, hint="base_values")])
    signed = agg in ("MIN", "MAX") and negative_zeros(base) and negative_zeros(
        [w for entries in forest.weights.values() for _, w in entries])  # -0 + -0 is the only -0 sum
    y = to_float(e, masked(e, scores, has, dtype, signed), dtype)
    ctx.exactness = ORDER if how == "NONE" else f"{ORDER}; {how}: {ml_post.TOLERANCE}"
    ml_post.transform(e, y, n, how, mlas=False, out=ctx.node.output[0])


def _static_presence(e: Emitter, forest, leaves: str, n: int):
    has, static = presence(e, forest, leaves, n)
    if has is None and (static == 0).any():
        return e.const(static == 1, hint="scored")
    return has


@lowering("TreeEnsemble", exactness=ORDER)
def tree_ensemble(ctx) -> None:
    """``ai.onnx.ml`` 5's TreeEnsemble: rewritten to the TreeEnsembleRegressor it equals
    (:func:`rewriter.convert.adapters.ml_trees.tree_ensemble_to_regressor`: float input, no set
    membership) and lowered as one. ``post_transform`` 1 and 2 are read as onnxruntime reads them
    (LOGISTIC and SOFTMAX; the schema says the reverse)."""
    from onnx import helper

    from rewriter.convert.adapters.ml_trees import tree_ensemble_to_regressor
    from rewriter.errors import ConversionError

    elem = ctx.input_elem({F32: "float"})
    post = int(ctx.attrs.get("post_transform", 0))
    copy = helper.make_node(ctx.node.op_type, list(ctx.node.input), list(ctx.node.output), name=ctx.node.name,
                            domain=ctx.node.domain)
    copy.attribute.extend(a for a in ctx.node.attribute if a.name != "post_transform")
    try:
        regressor = tree_ensemble_to_regressor(copy, elem)
    except ConversionError as e:
        ctx.block(str(e).split(": ", 1)[-1])
    if post:
        how = {1: "LOGISTIC", 2: "SOFTMAX", 3: "SOFTMAX_ZERO", 4: "PROBIT"}.get(post)
        if how is None:
            ctx.block(f"post_transform {post} is no code of 0..4")
        regressor.attribute.extend([helper.make_attribute("post_transform", how)])
    inner = ctx.derived(regressor)
    tree_regressor(inner)
    ctx.exactness = inner.exactness
