"""``ai.onnx.ml`` SVMClassifier as ONNX Runtime's kernel computes it (``svmclassifier.cc``).

With support vectors (libsvm's one-against-one): the kernel values [N, V]
(:mod:`ml_svm_kernel`); per pair of classes i < j, in the kernel's order, the products of the
coefficients with the kernel values of class i's vectors then class j's (float products, summed
left to right in double: a CumSum in double), plus rho; a vote for i when that sum is > 0, else for
j; the label is the first class of most votes (for a runtime that computes no double, the sums are
float-float pairs: :mod:`ml_svm_sums`). The scores are the pair sums as float, after the
batched post_transform (two classes: [-s, s] under NONE, [1 - s, s] under the others); with prob_a
and prob_b, libsvm's pairwise coupling (:mod:`ml_svm_prob`) gives the class probabilities first.
Without support vectors (liblinear's form): X times the coefficients plus rho[0], the kernel's
label rules, the batched post_transform."""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering import ml_post, ml_svm_prob
from rewriter.convert.lowering.avoid import DOUBLE, avoids
from rewriter.convert.lowering.emit import F32, F64, I64, STR
from rewriter.convert.lowering.ml_svm_kernel import SvmKernel, kernel_values, svm_input
from rewriter.convert.lowering.ml_svm_sums import FLOAT_FLOAT, float_float_sums
from rewriter.convert.lowering.registry import lowering

__all__ = []

INT32 = 6
SUMS = "pair sums: float products added in double in the kernel's order (bit-identical where the runtime " \
       "computes double)"


def _pairs(k: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(k - 1) for j in range(i + 1, k)]


def _pair_tables(coef: np.ndarray, per_class: np.ndarray, pow2: bool = False):
    """For each pair (i, j): the kernel-value indices and coefficients it sums, in order, after one
    leading unused slot (the kernel's sum starts at +0): [C, L] indices, coefficients and mask
    (``pow2``: L a power of two, unused slots after)."""
    start = np.concatenate([[0], np.cumsum(per_class)[:-1]]).astype(np.int64)
    rows = []
    for i, j in _pairs(len(per_class)):
        ii = np.arange(start[i], start[i] + per_class[i])
        jj = np.arange(start[j], start[j] + per_class[j])
        rows.append((np.concatenate([ii, jj]), np.concatenate([coef[j - 1, ii], coef[i, jj]])))
    width = 1 + max(len(r[0]) for r in rows)
    if pow2:
        width = 1 << (width - 1).bit_length()
    index = np.zeros((len(rows), width), np.int64)
    weight = np.zeros((len(rows), width), np.float32)
    mask = np.zeros((len(rows), width), bool)
    for c, (idx, w) in enumerate(rows):
        index[c, 1:1 + len(idx)], weight[c, 1:1 + len(idx)], mask[c, 1:1 + len(idx)] = idx, w, True
    return index, weight, mask


def _pair_sums(e, values: str, coef: np.ndarray, per_class: np.ndarray, rho: np.ndarray) -> str:
    """[N, C] double: per pair, 0 + products in order (float, then double) + rho; float, summed as
    float-float pairs (:mod:`ml_svm_sums`), when the runtime computes no double."""
    no_double = avoids(DOUBLE)
    index, weight, mask = _pair_tables(coef, per_class, pow2=no_double)
    gathered = e.op("Gather", [values, e.const(index, hint="pair_index")], axis=1)
    products = e.op("Where", [e.const(mask, hint="pair_mask"),
                              e.op("Mul", [gathered, e.const(weight, hint="pair_coefficients")]),
                              e.const(np.float32(0), hint="zero")])
    if no_double:
        return float_float_sums(e, products, index.shape[1], rho)
    sums = e.op("CumSum", [e.cast(products, F64), e.const(np.array(2, np.int64), hint="axis")])
    total = e.op("Gather", [sums, e.const(np.array(-1, np.int64), hint="last")], axis=2)
    total = e.op("Add", [total, e.const(np.float64(0), hint="zero_d")])  # a -0.0 sum is +0.0 in the kernel
    return e.op("Add", [total, e.const(rho.astype(np.float64), hint="rho")])


def _votes(e, sums: str, k: int) -> str:
    """[N, k] float vote counts: pair (i, j) votes for i where its sum is > 0, else for j."""
    pairs = _pairs(k)
    to_i, to_j = np.zeros((len(pairs), k), np.float32), np.zeros((len(pairs), k), np.float32)
    for c, (i, j) in enumerate(pairs):
        to_i[c, i], to_j[c, j] = 1, 1
    zero = np.float32(0) if avoids(DOUBLE) else np.float64(0)
    positive = e.op("Greater", [sums, e.const(zero, hint="zero_d")])
    pos = e.cast(positive, F32)
    neg = e.cast(e.op("Not", [positive]), F32)
    return e.op("Add", [e.op("MatMul", [pos, e.const(to_i, hint="votes_i")]),
                        e.op("MatMul", [neg, e.const(to_j, hint="votes_j")])])


def _labels(ctx) -> tuple[np.ndarray, bool]:
    strings, ints = ctx.strings("classlabels_strings"), ctx.ints("classlabels_ints")
    if strings:
        return np.array(strings, dtype=object), True
    return ints.astype(np.int64), False


def _write_label(ctx, index: str, labels: np.ndarray, strings: bool) -> None:
    out_elem = ctx.output(0).elem
    if out_elem is not None and out_elem != (STR if strings else I64):
        ctx.block("the label output's type does not match the class labels")
    e = ctx.emit
    e.op("Gather", [e.const(labels, hint="labels"), e.squeeze(index, [1])], out=ctx.out(0))


def _svc(ctx, x: str, coef, vectors, per_class, labels, strings, how) -> None:
    e, k = ctx.emit, len(labels)
    count = int(per_class.sum())
    rho, prob_a, prob_b = ctx.floats("rho"), ctx.floats("prob_a"), ctx.floats("prob_b")
    pairs = k * (k - 1) // 2
    if len(vectors) % count or len(coef) < (k - 1) * count or len(rho) < pairs:
        ctx.block(f"{len(vectors)} support vector values, {len(coef)} coefficients and {len(rho)} rho do not fit "
                  f"{count} vectors of {k} classes (onnxruntime refuses the node)")
    if len(prob_a) and (len(prob_a) < pairs or len(prob_b) < pairs):
        ctx.block(f"prob_a/prob_b need {pairs} values for {k} classes")
    kernel = SvmKernel(ctx)
    ctx.exactness = f"{kernel.exactness}; {FLOAT_FLOAT if avoids(DOUBLE) else SUMS}"
    x = svm_input(ctx, x, len(vectors) // count)
    values = kernel_values(e, kernel, x, vectors.reshape(count, -1))
    sums = _pair_sums(e, values, coef[:(k - 1) * count].reshape(k - 1, count), per_class, rho[:pairs])
    if ctx.out(0):
        _write_label(ctx, e.first_argmax(e.columns(_votes(e, sums, k), 1, k)), labels, strings)
    if not ctx.out(1):
        return
    scores = e.cast(sums, F32)
    if len(prob_a):
        probs = ml_svm_prob.coupling(e, scores, prob_a[:pairs], prob_b[:pairs], k)
        ctx.exactness += f"; probabilities: {ml_post.TOLERANCE}"
        ml_post.transform(e, probs, k, how, mlas=True, out=ctx.out(1))
    elif k > 2:
        if how not in ("NONE",) and not (how == "LOGISTIC" or (how == "SOFTMAX" and pairs >= 5)):
            ctx.exactness += f"; {how}: {ml_post.TOLERANCE}"
        ml_post.transform(e, scores, pairs, how, mlas=True, out=ctx.out(1))
    elif how == "PROBIT":
        ctx.block("two classes, no prob_a/prob_b and PROBIT: onnxruntime leaves the second score column unwritten")
    elif how == "NONE":
        e.concat([e.op("Neg", [scores]), scores], 1, out=ctx.out(1))
    else:  # onnxruntime 1.32 takes its scalar logistic first under LOGISTIC (measured), no other transform
        p = ml_post.logistic(e, scores) if how == "LOGISTIC" else scores
        if how == "LOGISTIC":
            ctx.exactness += f"; LOGISTIC: {ml_post.TOLERANCE}"
        e.concat([e.op("Sub", [e.const(np.float32(1), hint="one"), p]), p], 1, out=ctx.out(1))


def _liblinear(ctx, x: str, coef, labels, strings, how) -> None:
    """No support vectors: scores = X coef^T + rho[0] through the LINEAR kernel's Gemm."""
    e, k = ctx.emit, len(labels)
    rho = ctx.floats("rho")
    if not len(rho) or len(coef) % k:
        ctx.block(f"{len(coef)} coefficients for {k} classes and {len(rho)} rho (onnxruntime reads rho[0])")
    kernel = SvmKernel(ctx, linear=True)
    ctx.exactness = kernel.exactness
    x = svm_input(ctx, x, len(coef) // k)
    scores = kernel_values(e, kernel, x, coef.reshape(k, -1), float(rho[0]))
    if ctx.out(0):
        index = e.first_argmax(e.columns(scores, 1, k))
        if k == 2 and not len(ctx.floats("prob_a")):  # ChooseClass's binary rules on the top score
            top = e.op("GatherElements", [scores, index], axis=1)  # std::max_element's value
            positive = bool((coef >= 0).all())
            rule = e.op("GreaterOrEqual", [top, e.const(np.float32(0.5), hint="half")]) if positive else \
                e.op("Greater", [top, e.const(np.float32(0), hint="zero")])
            index = e.op("Where", [rule, e.const(np.array(1, np.int64), hint="index"), index])
        _write_label(ctx, index, labels, strings)
    if ctx.out(1):
        if how not in ("NONE", "LOGISTIC") and not (how == "SOFTMAX" and k >= 5):
            ctx.exactness += f"; {how}: {ml_post.TOLERANCE}"
        ml_post.transform(e, scores, k, how if k > 1 or how == "PROBIT" else "NONE", mlas=True, out=ctx.out(1))


@lowering("SVMClassifier", exactness=f"{SUMS}")
def svm_classifier(ctx) -> None:
    """See the module's docstring; the input (float, double, int32, int64) is cast to float first."""
    ctx.known("classlabels_ints", "classlabels_strings", "coefficients", "kernel_params", "kernel_type",
              "post_transform", "prob_a", "prob_b", "rho", "support_vectors", "vectors_per_class")
    elem = ctx.input_elem({F32: "float", F64: "double", I64: "int64", INT32: "int32"})
    labels, strings = _labels(ctx)
    how = ctx.attr("post_transform", "NONE")
    if how not in ml_post.TRANSFORMS:
        how = "PROBIT"  # onnxruntime's MakeTransform: any other name is PROBIT
    coef, per_class = ctx.floats("coefficients"), ctx.ints("vectors_per_class")
    if not len(labels) or not len(coef):
        ctx.block("no class labels or no coefficients (onnxruntime refuses the node)")
    if len(ctx.floats("prob_a")) != len(ctx.floats("prob_b")):
        ctx.block("prob_a and prob_b differ in length (onnxruntime refuses the node)")
    e = ctx.emit
    x = ctx.node.input[0] if elem == F32 else e.cast(ctx.node.input[0], F32)
    if per_class.sum() > 0:
        if len(per_class) != len(labels) or (per_class < 0).any() or len(labels) < 2:
            ctx.block(f"vectors_per_class has {len(per_class)} entries for {len(labels)} class labels")
        _svc(ctx, x, coef, ctx.floats("support_vectors"), per_class, labels, strings, how)
    else:
        _liblinear(ctx, x, coef, labels, strings, how)
