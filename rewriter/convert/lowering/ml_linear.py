"""``ai.onnx.ml`` LinearRegressor and LinearClassifier as a Gemm (the call ONNX Runtime's kernels
make: X * coefficients^T + intercepts through the same Gemm routine, so ONNX Runtime computes the
same bits; other runtimes sum the products in their own order) followed by the kernels' labels and
``post_transform`` (``linearregressor.cc``, ``linearclassifier.cc``, ``ml_common.h``)."""

from __future__ import annotations

import numpy as np

from rewriter.convert.lowering import ml_post
from rewriter.convert.lowering.emit import F32, F64, I64, STR
from rewriter.convert.lowering.registry import lowering

__all__ = []

INT32 = 6
GEMM = ("Gemm as onnxruntime's kernel calls it: bit-identical in onnxruntime; other runtimes sum the "
        "products in their own order (relative error ~ features x 2^-24)")


def as_rows(ctx, x: str, features: int, needs: str) -> str:
    """X as [N, features] (rank 1 is one row), as ONNX Runtime's ML kernels read it: rank 0 and rank
    > 2 are refused, and a last dim other than ``features`` (``needs`` says what the model needs)."""
    info = ctx.input(0)
    if info.rank is not None and info.rank > 2:
        ctx.block(f"input rank {info.rank}: onnxruntime's kernel reads rank 1 or 2")
    if info.rank == 0:
        ctx.block("a rank-0 input (onnxruntime refuses it)")
    width = info.dim(-1)
    if width is not None and info.rank in (1, 2) and width != features:
        ctx.block(f"{needs}, the input has {width}")
    if info.rank != 2:
        x = ctx.emit.op("Reshape", [x, ctx.emit.ints([-1, features])])
    return x


def _scores(ctx, x: str, coef: np.ndarray, intercepts: np.ndarray | None, rows: int) -> str:
    """X (reshaped to [N, F] unless rank 2) times coef^T plus intercepts: [N, rows]."""
    e = ctx.emit
    features = len(coef) // rows
    x = as_rows(ctx, x, features, f"{len(coef)} coefficients for {rows} row(s) need {features} features")
    inputs = [x, e.const(coef.reshape(rows, features), hint="coefficients")]
    if intercepts is not None:
        inputs.append(e.const(intercepts, hint="intercepts"))
    return e.op("Gemm", inputs, transB=1)


def _transform_name(ctx) -> str:
    how = ctx.attr("post_transform", "NONE")
    if how not in ml_post.TRANSFORMS:
        ctx.block(f"post_transform {how!r} is none of {', '.join(ml_post.TRANSFORMS)}")
    return how


def _exactness(how: str, batched_exact: bool) -> str:
    if how == "NONE" or batched_exact:
        return GEMM
    return f"{GEMM}; {how}: {ml_post.TOLERANCE}"


@lowering("LinearRegressor", exactness=GEMM)
def linear_regressor(ctx) -> None:
    """Y = post_transform(X * coefficients^T + intercepts); intercepts only when there is one per
    target; with one target only PROBIT applies (the kernel ignores the other transforms)."""
    ctx.known("coefficients", "intercepts", "targets", "post_transform")
    ctx.input_elem({F32: "float"})
    targets = int(ctx.attr("targets", 1))  # the schema's default, which onnxruntime reads
    coef, intercepts = ctx.floats("coefficients"), ctx.floats("intercepts")
    if targets < 1 or not len(coef) or len(coef) % targets:
        ctx.block(f"{len(coef)} coefficients do not split into {targets} target(s)")
    how = _transform_name(ctx)
    scores = _scores(ctx, ctx.node.input[0], coef, intercepts if len(intercepts) == targets else None, targets)
    e, y = ctx.emit, ctx.node.output[0]
    if targets == 1:
        how = "PROBIT" if how == "PROBIT" else "NONE"
    ctx.exactness = _exactness(how, how == "LOGISTIC" or (how == "SOFTMAX" and targets >= 5))
    ml_post.transform(e, scores, targets, how, mlas=True, out=y)


def _labels(ctx) -> tuple[np.ndarray, bool]:
    strings, ints = ctx.strings("classlabels_strings"), ctx.ints("classlabels_ints")
    if strings:
        return np.array(strings, dtype=object), True
    return ints, False


def _binary_label(ctx, scores: str, labels: np.ndarray, strings: bool, out: str) -> None:
    e = ctx.emit
    if len(labels) == 2:
        pos, neg = labels[1], labels[0]
    else:
        pos, neg = ("1", "0") if strings else (1, 0)
    dtype = object if strings else np.int64
    flat = e.op("Reshape", [scores, e.ints([-1])])
    e.op("Where", [e.op("Greater", [flat, e.const(np.float32(0), hint="zero")]),
                   e.const(np.array(pos, dtype=dtype), hint="positive"),
                   e.const(np.array(neg, dtype=dtype), hint="negative")], out=out)


@lowering("LinearClassifier", exactness=GEMM)
def linear_classifier(ctx) -> None:
    """Scores as LinearRegressor's (the input cast to float first); the label is the first class
    of highest raw score (one class: score > 0 picks the second label); probabilities by the
    kernel's batched post_transform, or for one class and two labels [1 - p, p] with p the score's
    logistic under LOGISTIC and the raw score under every other transform (as onnxruntime 1.32
    writes them)."""
    ctx.known("coefficients", "intercepts", "classlabels_ints", "classlabels_strings", "multi_class",
              "post_transform")
    elem = ctx.input_elem({F32: "float", F64: "double", I64: "int64", INT32: "int32"})
    coef, intercepts = ctx.floats("coefficients"), ctx.floats("intercepts")
    classes = len(intercepts)
    if classes < 1 or not len(coef) or len(coef) % classes:
        ctx.block(f"{len(coef)} coefficients and {classes} intercepts: the kernel's class count is the "
                  "intercept count, which must divide the coefficients")
    labels, strings = _labels(ctx)
    if classes > 1 and len(labels) < classes:
        ctx.block(f"{classes} classes but {len(labels)} class labels (onnxruntime reads past the end)")
    how = _transform_name(ctx)
    two_columns = classes == 1 and len(labels) == 2
    if two_columns and how == "PROBIT" and ctx.used(1):
        ctx.block("one class, two labels and PROBIT: onnxruntime leaves the second probability column unwritten")
    e = ctx.emit
    x = ctx.node.input[0] if elem == F32 else e.cast(ctx.node.input[0], F32)
    scores = _scores(ctx, x, coef, intercepts, classes)
    if ctx.out(0):
        out_elem = ctx.output(0).elem
        if out_elem is not None and out_elem != (STR if strings else I64):
            ctx.block("the label output's type does not match the class labels")
        if classes == 1:
            _binary_label(ctx, scores, labels, strings, ctx.out(0))
        else:
            index = e.squeeze(e.first_argmax(e.columns(scores, 1, classes)), [1])
            e.op("Gather", [e.const(labels[:classes] if strings else labels[:classes].astype(np.int64),
                                    hint="labels"), index], out=ctx.out(0))
    ctx.exactness = _exactness(how, classes > 1 and (how == "LOGISTIC" or (how == "SOFTMAX" and classes >= 5)))
    if not ctx.out(1):
        return
    if classes > 1:
        ml_post.transform(e, scores, classes, how, mlas=True, out=ctx.out(1))
    elif two_columns:  # onnxruntime 1.32 applies its scalar logistic first (measured), no other transform
        p = ml_post.logistic(e, scores) if how == "LOGISTIC" else scores
        e.concat([e.op("Sub", [e.const(np.float32(1), hint="one"), p]), p], 1, out=ctx.out(1))
        ctx.exactness = _exactness("LOGISTIC" if how == "LOGISTIC" else "NONE", False)
    else:
        ml_post.transform(e, scores, 1, "PROBIT" if how == "PROBIT" else "NONE", mlas=True, out=ctx.out(1))
        ctx.exactness = _exactness("PROBIT" if how == "PROBIT" else "NONE", False)
