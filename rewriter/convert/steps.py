"""How each (op, adjacent schema step) of the default domain is converted: the classification.

Every step between two adjacent schema versions in ``onnx.defs`` is one of:

- ``own``: an adapter in ``rewriter.convert.adapters`` (the registry) handles it;
- ``type-only``: the two schemas are identical apart from the types they allow (read from
  ``onnx.defs``) and the step is not listed in :data:`MEANING_CHANGED`: the node is kept
  when every type it uses is allowed at the destination;
- ``onnx``: onnx's own converter has an adapter for it that is known to be correct
  (:data:`ONNX_CORRECT`), used for the whole node;
- ``blocked``: none of these; the reason is :data:`IMPOSSIBLE`'s entry when there is one.

:func:`step_kind` decides; a test compares the classification with ``onnx.defs``.
"""

from __future__ import annotations

from rewriter.convert import registry
from rewriter.convert.type_only import same_signature

__all__ = ["MEANING_CHANGED", "ONNX_CORRECT", "IMPOSSIBLE", "step_kind", "step_reason", "all_steps"]

# Steps whose signature did not change but whose meaning did: never kept as they are.
# Keyed (op, lower version, higher version); both directions.
MEANING_CHANGED: dict[tuple[str, int, int], str] = {
    # opset 11 allowed negative axes: going down they must be normalized with the rank
    **{(op, lo, 11): "opset 11 allowed negative axes" for op, lo in [
        ("ArgMax", 1), ("ArgMin", 1), ("Compress", 9), ("Concat", 4), ("Flatten", 9), ("Gather", 1),
        ("Hardmax", 1), ("LogSoftmax", 1), ("Softmax", 1), ("ReduceL1", 1), ("ReduceL2", 1),
        ("ReduceLogSum", 1), ("ReduceLogSumExp", 1), ("ReduceMax", 1), ("ReduceMean", 1),
        ("ReduceMin", 1), ("ReduceProd", 1), ("ReduceSum", 1), ("ReduceSumSquare", 1),
        ("Squeeze", 1), ("Unsqueeze", 1), ("Split", 2), ("OneHot", 9), ("Scatter", 9),
        ("Slice", 10),
    ]},
    ("Pad", 18, 19): "Pad-19 added mode 'wrap'",
    ("Resize", 18, 19): "Resize-19 added coordinate_transformation_mode 'half_pixel_symmetric'",
    ("Loop", 1, 11): "Loop-11 reworded what the body's loop-carried values may do",
    ("If", 1, 11): "If-11 let the branches' outputs differ in shape",
    **{(op, lo, 8): "opset 8 let the variadic op broadcast" for op, lo in
       [("Max", 6), ("Min", 6), ("Sum", 6), ("Mean", 6)]},
}

# The schema steps onnx.version_converter has an adapter for (read from onnx's
# version_converter/convert.h), less those known to compute something else or to emit an
# invalid model: "compatible" adapters going down across a step that added a feature
# (AveragePool dilations, Dropout/BatchNormalization training inputs, ...) or grew an enum (Pad
# 19 wrap, Resize 19 half_pixel_symmetric), Softmax/LogSoftmax
# 13->12 (keeps a non-last axis), Hardmax across 13, the Reduce* 18->17 and ReduceSum 13->12 axes
# adapters (leave noop_with_empty_axes behind), Scan 8->9 (drops the batch axis into an invalid
# model). Used only for steps without an own adapter.
_ONNX_STEPS: dict[str, list[tuple[int, int]]] = {
    "Abs": [(1, 6), (6, 1), (6, 13)],
    "Acos": [(7, 22), (22, 7)],
    "Acosh": [(9, 22), (22, 9)],
    "Add": [(1, 6), (6, 1), (6, 7), (7, 6), (7, 13), (13, 14)],
    "ArgMax": [(1, 11), (11, 1), (11, 12), (12, 11), (12, 13)],
    "ArgMin": [(1, 11), (11, 1), (11, 12), (12, 11), (12, 13)],
    "Asin": [(7, 22), (22, 7)],
    "Asinh": [(9, 22), (22, 9)],
    "Atan": [(7, 22), (22, 7)],
    "Atanh": [(9, 22), (22, 9)],
    "Attention": [(23, 24), (24, 23), (24, 25), (25, 24)],
    "AveragePool": [(1, 7), (7, 1), (7, 10), (10, 11), (11, 10), (11, 19), (19, 22), (22, 19)],
    "BatchNormalization": [(1, 6), (6, 1), (6, 7), (7, 6), (7, 9), (9, 14), (14, 15)],
    "Bernoulli": [(15, 22), (22, 15)],
    "Cast": [(6, 9), (9, 6), (9, 13), (13, 19), (19, 13), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "CastLike": [(15, 19), (19, 15), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Ceil": [(1, 6), (6, 13)],
    "Celu": [(12, 28), (28, 12)],
    "Clip": [(1, 6), (6, 11), (11, 12), (12, 11), (12, 13)],
    "Compress": [(9, 11)],
    "Concat": [(1, 4), (4, 1), (4, 11), (11, 4), (11, 13)],
    "Constant": [(1, 9), (9, 1), (9, 11), (11, 12), (12, 13), (13, 12), (13, 19), (19, 13), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "ConstantOfShape": [(9, 20), (20, 21), (21, 20), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Conv": [(1, 11), (11, 1), (11, 22), (22, 11)],
    "ConvTranspose": [(1, 11), (11, 1), (11, 22), (22, 11)],
    "Cos": [(7, 22), (22, 7)],
    "Cosh": [(9, 22), (22, 9)],
    "CumSum": [(11, 14)],
    "DFT": [(17, 20), (20, 17)],
    "DeformConv": [(19, 22), (22, 19)],
    "DepthToSpace": [(1, 11), (11, 13)],
    "DequantizeLinear": [(10, 13), (13, 19), (19, 13), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Det": [(11, 22), (22, 11)],
    "Div": [(1, 6), (6, 1), (6, 7), (7, 6), (7, 13), (13, 14)],
    "Dropout": [(1, 6), (6, 7), (7, 6), (7, 10), (10, 12), (12, 13), (13, 22), (22, 13)],
    "Elu": [(1, 6), (6, 22), (22, 6)],
    "Equal": [(7, 11), (11, 7), (11, 13), (13, 19), (19, 13)],
    "Erf": [(9, 13)],
    "Exp": [(1, 6), (6, 13)],
    "Expand": [(8, 13)],
    "EyeLike": [(9, 22), (22, 9)],
    "Flatten": [(1, 9), (9, 1), (9, 11), (11, 9), (11, 13), (13, 21), (21, 13), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Floor": [(1, 6), (6, 13)],
    "GRU": [(7, 14), (14, 7), (14, 22), (22, 14)],
    "Gather": [(1, 11), (11, 13)],
    "GatherElements": [(11, 13)],
    "GatherND": [(11, 12), (12, 13)],
    "Gemm": [(1, 6), (6, 1), (6, 7), (7, 6), (7, 9), (9, 7), (9, 11), (11, 13)],
    "GlobalAveragePool": [(1, 22), (22, 1)],
    "GlobalLpPool": [(2, 22), (22, 2)],
    "GlobalMaxPool": [(1, 22)],
    "Greater": [(7, 9), (9, 7), (9, 13)],
    "GreaterOrEqual": [(12, 16), (16, 12)],
    "GridSample": [(16, 20), (20, 22), (22, 20)],
    "GroupNormalization": [(18, 21)],
    "HardSigmoid": [(1, 6), (6, 22), (22, 6)],
    "HardSwish": [(14, 22), (22, 14)],
    "Hardmax": [(1, 11)],
    "Identity": [(1, 13), (13, 14), (14, 16), (16, 19), (19, 16), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "If": [(1, 11), (11, 13), (13, 16), (16, 19), (19, 16), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "InstanceNormalization": [(1, 6), (6, 22), (22, 6)],
    "IsInf": [(10, 20), (20, 10)],
    "IsNaN": [(9, 13), (13, 20), (20, 13)],
    "LRN": [(1, 13)],
    "LSTM": [(7, 14), (14, 7), (14, 22), (22, 14)],
    "LeakyRelu": [(1, 6), (6, 16), (16, 6)],
    "Less": [(7, 9), (9, 7), (9, 13)],
    "LessOrEqual": [(12, 16), (16, 12)],
    "Log": [(1, 6), (6, 13)],
    "LogSoftmax": [(1, 11), (11, 1), (11, 13)],
    "Loop": [(1, 11), (11, 13), (13, 16), (16, 19), (19, 16), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "LpNormalization": [(1, 22), (22, 1)],
    "LpPool": [(2, 11), (11, 18), (18, 22), (22, 18)],
    "MatMul": [(1, 9), (9, 1), (9, 13)],
    "Max": [(1, 6), (6, 8), (8, 6), (8, 12), (12, 8), (12, 13)],
    "MaxPool": [(1, 8), (8, 1), (8, 10), (10, 11), (11, 10), (11, 12), (12, 11), (12, 22), (22, 12)],
    "MaxRoiPool": [(1, 22), (22, 1)],
    "MaxUnpool": [(9, 11), (11, 22), (22, 11)],
    "Mean": [(1, 6), (6, 8), (8, 6), (8, 13)],
    "MeanVarianceNormalization": [(9, 13)],
    "Min": [(1, 6), (6, 8), (8, 6), (8, 12), (12, 8), (12, 13)],
    "Mish": [(18, 22), (22, 18)],
    "Mod": [(10, 13)],
    "Mul": [(1, 6), (6, 1), (6, 7), (7, 6), (7, 13), (13, 14)],
    "Multinomial": [(7, 22), (22, 7)],
    "Neg": [(1, 6), (6, 1), (6, 13)],
    "NegativeLogLikelihoodLoss": [(12, 13), (13, 22), (22, 13)],
    "NonMaxSuppression": [(10, 11)],
    "NonZero": [(9, 13)],
    "OneHot": [(9, 11)],
    "OptionalGetElement": [(15, 18)],
    "OptionalHasElement": [(15, 18)],
    "PRelu": [(1, 6), (6, 7), (7, 6), (7, 9), (9, 7), (9, 16), (16, 9)],
    "Pad": [(2, 11), (11, 13), (13, 18), (18, 19), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Pow": [(1, 7), (7, 1), (7, 12), (12, 13), (13, 15)],
    "QLinearMatMul": [(10, 21), (21, 10)],
    "QuantizeLinear": [(10, 13), (13, 19), (19, 13), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "RNN": [(7, 14), (14, 7), (14, 22), (22, 14)],
    "RandomNormal": [(1, 22), (22, 1)],
    "RandomNormalLike": [(1, 22), (22, 1)],
    "RandomUniform": [(1, 22), (22, 1)],
    "RandomUniformLike": [(1, 22), (22, 1)],
    "Range": [(11, 27), (27, 11)],
    "Reciprocal": [(1, 6), (6, 13)],
    "ReduceL1": [(1, 11), (11, 1), (11, 13), (13, 18)],
    "ReduceL2": [(1, 11), (11, 1), (11, 13), (13, 18)],
    "ReduceLogSum": [(1, 11), (11, 1), (11, 13), (13, 18)],
    "ReduceLogSumExp": [(1, 11), (11, 1), (11, 13), (13, 18)],
    "ReduceMax": [(1, 11), (11, 1), (11, 12), (12, 11), (12, 13), (13, 18), (18, 20), (20, 18)],
    "ReduceMean": [(1, 11), (11, 1), (11, 13), (13, 18)],
    "ReduceMin": [(1, 11), (11, 1), (11, 12), (12, 11), (12, 13), (13, 18), (18, 20), (20, 18)],
    "ReduceProd": [(1, 11), (11, 1), (11, 13), (13, 18)],
    "ReduceSum": [(1, 11), (11, 1), (11, 13)],
    "ReduceSumSquare": [(1, 11), (11, 1), (11, 13), (13, 18)],
    "Relu": [(1, 6), (6, 13), (13, 14)],
    "Reshape": [(1, 5), (5, 1), (5, 13), (13, 14), (14, 19), (19, 14), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Resize": [(10, 11), (11, 13), (13, 18), (18, 13), (18, 19)],
    "RoiAlign": [(10, 16), (16, 22), (22, 16)],
    "Round": [(11, 22), (22, 11)],
    "Scan": [(9, 11), (11, 16), (16, 11), (16, 19), (19, 16), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Scatter": [(9, 11)],
    "ScatterElements": [(11, 13), (13, 16), (16, 13), (16, 18), (18, 16)],
    "ScatterND": [(11, 13), (13, 16), (16, 13), (16, 18), (18, 16)],
    "Selu": [(1, 6), (6, 22), (22, 6)],
    "Shape": [(1, 13), (13, 15), (15, 19), (19, 15), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Sigmoid": [(1, 6), (6, 13)],
    "Sign": [(9, 13)],
    "Sin": [(7, 22), (22, 7)],
    "Sinh": [(9, 22), (22, 9)],
    "Size": [(1, 13), (13, 19), (19, 13), (19, 21), (21, 19), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Slice": [(1, 10), (10, 11), (11, 13)],
    "Softmax": [(1, 11), (11, 1), (11, 13)],
    "SoftmaxCrossEntropyLoss": [(12, 13)],
    "Softplus": [(1, 22), (22, 1)],
    "Softsign": [(1, 22), (22, 1)],
    "SpaceToDepth": [(1, 13)],
    "Split": [(2, 11), (11, 13), (13, 11), (13, 18)],
    "SplitToSequence": [(11, 24), (24, 11)],
    "Sqrt": [(1, 6), (6, 13)],
    "Squeeze": [(1, 11), (11, 13), (13, 11), (13, 21), (21, 13), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Sub": [(1, 6), (6, 1), (6, 7), (7, 6), (7, 13), (13, 14)],
    "Sum": [(1, 6), (6, 8), (8, 6), (8, 13)],
    "Tan": [(7, 22), (22, 7)],
    "Tanh": [(1, 6), (6, 13)],
    "ThresholdedRelu": [(10, 22), (22, 10)],
    "Tile": [(6, 13)],
    "TopK": [(1, 10), (10, 11), (11, 24), (24, 11)],
    "Transpose": [(1, 13), (13, 21), (21, 13), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Unsqueeze": [(1, 11), (11, 1), (11, 13), (13, 11), (13, 21), (21, 13), (21, 23), (23, 21), (23, 24), (24, 23), (24, 25), (25, 24)],
    "Upsample": [(1, 7), (7, 9), (9, 7), (9, 10)],
    "Where": [(9, 16), (16, 9)],
}
ONNX_CORRECT: set[tuple[str, int, int]] = {(op, a, b) for op, steps in _ONNX_STEPS.items() for a, b in steps}

# Steps of MEANING_CHANGED where onnx's adapter handles the change (not a "compatible" no-op).
_ONNX_MEANING_OK = {(op, 8, 6) for op in ("Max", "Min", "Sum", "Mean")}

# Steps no conversion can take, with the reason; keyed (op, from, to).
IMPOSSIBLE: dict[tuple[str, int, int], str] = {
    ("Scan", 9, 8): "Scan-8 scans along a batch axis and has no per-input scan axes or directions; "
                    "onnx's adapter for this step emits an invalid model",
}


def step_kind(op: str, a: int, b: int) -> str:
    """'own', 'type-only', 'onnx' or 'blocked' for the step of ``op`` from schema ``a`` to ``b``."""
    if registry.lookup(op, a, b) is not None:
        return "own"
    lo, hi = sorted((a, b))
    # a meaning change only matters going down: an older node cannot use what the newer schema added
    if ((op, lo, hi) not in MEANING_CHANGED or b > a) and same_signature(op, a, b):
        return "type-only"
    if (op, a, b) in ONNX_CORRECT and ((op, lo, hi) not in MEANING_CHANGED or (op, a, b) in _ONNX_MEANING_OK):
        return "onnx"
    return "blocked"


def step_reason(op: str, a: int, b: int) -> str:
    """Why a step is blocked, in words."""
    lo, hi = sorted((a, b))
    if (op, a, b) in IMPOSSIBLE:
        return IMPOSSIBLE[(op, a, b)]
    if (op, lo, hi) in MEANING_CHANGED:
        return f"{MEANING_CHANGED[(op, lo, hi)]}, and rewriter has no adapter for this step yet"
    return f"the schema changed between versions {lo} and {hi} and rewriter has no adapter for this step yet"


def all_steps() -> list[tuple[str, int, int]]:
    """Every adjacent schema step of every default-domain op, both directions."""
    steps = []
    for op in registry.all_ops():
        versions = registry.schema_versions(op)
        for a, b in zip(versions, versions[1:]):
            steps += [(op, a, b), (op, b, a)]
    return steps
