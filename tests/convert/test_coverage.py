"""Coverage of the converter, derived from onnx.defs (issue 8).

- Every (op, adjacent schema step, both directions) of the default domain is classified by
  ``steps.step_kind``: an own adapter, a type-only step (re-proved here independently: the
  two schemas differ only in the types they allow), an onnx adapter known correct
  (``steps.ONNX_CORRECT``), or blocked with a reason: an ``steps.IMPOSSIBLE`` entry, or an
  entry of :data:`PENDING_BLOCKED` below (reviewed: steps nobody has an adapter for yet,
  each with what changed in the schema).
- A schema version onnx.defs has that :data:`SCHEMA_VERSIONS` (a reviewed snapshot,
  generated once from onnx 1.23.2 and committed here) lacks fails: a new version of an op
  must be looked at and classified before the converter claims to handle it.
- ``registry.KINDS`` holds known kinds only; every own adapter key is an adjacent step of a
  real schema (both directions registered); IMPOSSIBLE/MEANING_CHANGED/ONNX_CORRECT keys are
  real steps.

PENDING_BLOCKED entries that an adapter now covers are listed in the terminal summary
(tests/convert/conftest.py); with REWRITER_STRICT_GAPS=1 they fail.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.defs
import pytest

from rewriter.convert import registry, steps

KNOWN_KINDS = {"attribute<->input", "new feature", "meaning change", "type-only", "rewrite"}

# Reviewed snapshot: every default-domain op and the since_versions of its schemas
# (deprecated ones included), from onnx 1.23.2 (opset 28).
SCHEMA_VERSIONS: dict[str, tuple[int, ...]] = {
    "Abs": (1, 6, 13), "Acos": (7, 22), "Acosh": (9, 22), "Add": (1, 6, 7, 13, 14), "AffineGrid": (20,),
    "And": (1, 7), "ArgMax": (1, 11, 12, 13), "ArgMin": (1, 11, 12, 13), "Asin": (7, 22), "Asinh": (9, 22),
    "Atan": (7, 22), "Atanh": (9, 22), "Attention": (23, 24, 25), "AveragePool": (1, 7, 10, 11, 19, 22),
    "BatchNormalization": (1, 6, 7, 9, 14, 15), "Bernoulli": (15, 22), "BitCast": (26,),
    "BitShift": (11, 28), "BitwiseAnd": (18,), "BitwiseNot": (18,), "BitwiseOr": (18,),
    "BitwiseXor": (18,), "BlackmanWindow": (17,), "Cast": (1, 6, 9, 13, 19, 21, 23, 24, 25, 28),
    "CastLike": (15, 19, 21, 23, 24, 25), "CausalConvWithState": (27,), "Ceil": (1, 6, 13),
    "Celu": (12, 28), "CenterCropPad": (18,), "Clip": (1, 6, 11, 12, 13), "Col2Im": (18,),
    "Compress": (9, 11, 28), "Concat": (1, 4, 11, 13), "ConcatFromSequence": (11,),
    "Constant": (1, 9, 11, 12, 13, 19, 21, 23, 24, 25), "ConstantOfShape": (9, 20, 21, 23, 24, 25),
    "Conv": (1, 11, 22), "ConvInteger": (10,), "ConvTranspose": (1, 11, 22), "Cos": (7, 22),
    "Cosh": (9, 22), "CumProd": (26,), "CumSum": (11, 14), "DFT": (17, 20), "DeformConv": (19, 22),
    "DepthToSpace": (1, 11, 13, 28), "DequantizeLinear": (10, 13, 19, 21, 23, 24, 25, 28), "Det": (11, 22),
    "Div": (1, 6, 7, 13, 14), "Dropout": (1, 6, 7, 10, 12, 13, 22), "DynamicQuantizeLinear": (11,),
    "Einsum": (12, 28), "Elu": (1, 6, 22), "Equal": (1, 7, 11, 13, 19), "Erf": (9, 13), "Exp": (1, 6, 13),
    "Expand": (8, 13), "EyeLike": (9, 22), "Flatten": (1, 9, 11, 13, 21, 23, 24, 25), "Floor": (1, 6, 13),
    "GRU": (1, 3, 7, 14, 22), "Gather": (1, 11, 13), "GatherElements": (11, 13), "GatherND": (11, 12, 13),
    "Gelu": (20,), "Gemm": (1, 6, 7, 9, 11, 13), "GlobalAveragePool": (1, 22), "GlobalLpPool": (1, 2, 22),
    "GlobalMaxPool": (1, 22), "Greater": (1, 7, 9, 13), "GreaterOrEqual": (12, 16),
    "GridSample": (16, 20, 22), "GroupNormalization": (18, 21), "HammingWindow": (17,),
    "HannWindow": (17,), "HardSigmoid": (1, 6, 22), "HardSwish": (14, 22), "Hardmax": (1, 11, 13),
    "Identity": (1, 13, 14, 16, 19, 21, 23, 24, 25), "If": (1, 11, 13, 16, 19, 21, 23, 24, 25),
    "ImageDecoder": (20,), "InstanceNormalization": (1, 6, 22), "IsInf": (10, 20), "IsNaN": (9, 13, 20),
    "LRN": (1, 13), "LSTM": (1, 7, 14, 22), "LayerNormalization": (17,), "LeakyRelu": (1, 6, 16),
    "Less": (1, 7, 9, 13), "LessOrEqual": (12, 16), "LinearAttention": (27,), "Log": (1, 6, 13),
    "LogSoftmax": (1, 11, 13), "Loop": (1, 11, 13, 16, 19, 21, 23, 24, 25), "LpNormalization": (1, 22),
    "LpPool": (1, 2, 11, 18, 22), "MatMul": (1, 9, 13), "MatMulInteger": (10,), "Max": (1, 6, 8, 12, 13),
    "MaxPool": (1, 8, 10, 11, 12, 22), "MaxRoiPool": (1, 22), "MaxUnpool": (9, 11, 22),
    "Mean": (1, 6, 8, 13), "MeanVarianceNormalization": (9, 13), "MelWeightMatrix": (17,),
    "Min": (1, 6, 8, 12, 13), "Mish": (18, 22), "Mod": (10, 13, 28), "Mul": (1, 6, 7, 13, 14),
    "Multinomial": (7, 22), "Neg": (1, 6, 13), "NegativeLogLikelihoodLoss": (12, 13, 22),
    "NonMaxSuppression": (10, 11), "NonZero": (9, 13), "Not": (1,), "OneHot": (9, 11, 28),
    "Optional": (15, 28), "OptionalGetElement": (15, 18, 28), "OptionalHasElement": (15, 18, 28),
    "Or": (1, 7), "PRelu": (1, 6, 7, 9, 16), "Pad": (1, 2, 11, 13, 18, 19, 21, 23, 24, 25),
    "Pow": (1, 7, 12, 13, 15), "QLinearConv": (10,), "QLinearMatMul": (10, 21),
    "QuantizeLinear": (10, 13, 19, 21, 23, 24, 25, 28), "RMSNormalization": (23,), "RNN": (1, 7, 14, 22),
    "RandomNormal": (1, 22), "RandomNormalLike": (1, 22), "RandomUniform": (1, 22),
    "RandomUniformLike": (1, 22), "Range": (11, 27), "Reciprocal": (1, 6, 13), "ReduceL1": (1, 11, 13, 18),
    "ReduceL2": (1, 11, 13, 18), "ReduceLogSum": (1, 11, 13, 18, 28),
    "ReduceLogSumExp": (1, 11, 13, 18, 28), "ReduceMax": (1, 11, 12, 13, 18, 20),
    "ReduceMean": (1, 11, 13, 18), "ReduceMin": (1, 11, 12, 13, 18, 20), "ReduceProd": (1, 11, 13, 18),
    "ReduceSum": (1, 11, 13), "ReduceSumSquare": (1, 11, 13, 18), "RegexFullMatch": (20,),
    "Relu": (1, 6, 13, 14), "Reshape": (1, 5, 13, 14, 19, 21, 23, 24, 25), "Resize": (10, 11, 13, 18, 19),
    "ReverseSequence": (10, 28), "RoiAlign": (10, 16, 22), "RotaryEmbedding": (23,), "Round": (11, 22),
    "STFT": (17,), "Scan": (8, 9, 11, 16, 19, 21, 23, 24, 25), "Scatter": (9, 11),
    "ScatterElements": (11, 13, 16, 18), "ScatterND": (11, 13, 16, 18), "Selu": (1, 6, 22),
    "SequenceAt": (11,), "SequenceConstruct": (11,), "SequenceEmpty": (11,), "SequenceErase": (11,),
    "SequenceInsert": (11,), "SequenceLength": (11,), "SequenceMap": (17,),
    "Shape": (1, 13, 15, 19, 21, 23, 24, 25), "Shrink": (9,), "Sigmoid": (1, 6, 13), "Sign": (9, 13),
    "Sin": (7, 22), "Sinh": (9, 22), "Size": (1, 13, 19, 21, 23, 24, 25), "Slice": (1, 10, 11, 13),
    "Softmax": (1, 11, 13), "SoftmaxCrossEntropyLoss": (12, 13), "Softplus": (1, 22), "Softsign": (1, 22),
    "SpaceToDepth": (1, 13, 28), "Split": (1, 2, 11, 13, 18), "SplitToSequence": (11, 24),
    "Sqrt": (1, 6, 13), "Squeeze": (1, 11, 13, 21, 23, 24, 25), "StringConcat": (20,),
    "StringNormalizer": (10,), "StringSplit": (20,), "Sub": (1, 6, 7, 13, 14), "Sum": (1, 6, 8, 13),
    "SwiGLU": (28,), "Swish": (24,), "Tan": (7, 22), "Tanh": (1, 6, 13), "TensorScatter": (24,),
    "TfIdfVectorizer": (9,), "ThresholdedRelu": (10, 22), "Tile": (1, 6, 13), "TopK": (1, 10, 11, 24),
    "Transpose": (1, 13, 21, 23, 24, 25), "Trilu": (14,), "Unique": (11, 28),
    "Unsqueeze": (1, 11, 13, 21, 23, 24, 25), "Upsample": (1, 7, 9, 10), "Where": (9, 16), "Xor": (1, 7),
}

# Steps step_kind calls "blocked" today and that are not in steps.IMPOSSIBLE: no adapter yet.
# The reason says what the higher version changed relative to the lower one (generated with
# schema_diff below, then reviewed); "same signature" ones changed meaning only.
PENDING_BLOCKED: dict[tuple[str, int, int], str] = {
}


# Filled by the tests, printed by tests/convert/conftest.py.
STALE: list = []


def schema_diff(op: str, lo: int, hi: int) -> str:
    """What schema ``hi`` of ``op`` changed relative to ``lo`` (inputs, outputs, attributes)."""
    a, b = onnx.defs.get_schema(op, lo, ""), onnx.defs.get_schema(op, hi, "")
    out = []
    ai, bi = [p.name for p in a.inputs], [p.name for p in b.inputs]
    if ai != bi:
        added = [n for n in bi if n not in ai]; gone = [n for n in ai if n not in bi]
        if added: out.append("inputs added: " + ", ".join(added))
        if gone: out.append("inputs removed: " + ", ".join(gone))
        if not added and not gone: out.append("inputs reordered")
    ao, bo = [p.name for p in a.outputs], [p.name for p in b.outputs]
    if ao != bo:
        out.append(f"outputs {ao} -> {bo}")
    aa, ba = set(a.attributes), set(b.attributes)
    if ba - aa: out.append("attributes added: " + ", ".join(sorted(ba - aa)))
    if aa - ba: out.append("attributes removed: " + ", ".join(sorted(aa - ba)))
    for n in sorted(aa & ba):
        x, y = a.attributes[n], b.attributes[n]
        if x.type != y.type: out.append(f"attribute {n} type changed")
        elif x.required != y.required: out.append(f"attribute {n} required changed")
        elif x.default_value.SerializeToString() != y.default_value.SerializeToString(): out.append(f"attribute {n} default changed")
    for which, pa, pb in (("input", a.inputs, b.inputs), ("output", a.outputs, b.outputs)):
        for p, q in zip(pa, pb):
            if p.name == q.name and (p.option != q.option or p.is_homogeneous != q.is_homogeneous or p.min_arity != q.min_arity):
                out.append(f"{which} {p.name} arity/optionality changed")
    if (a.min_input, a.max_input, a.min_output, a.max_output) != (b.min_input, b.max_input, b.min_output, b.max_output) and not out:
        out.append("input/output counts changed")
    if not out:
        out.append("same signature (meaning changed)")
    return "; ".join(out)


def _versions_now() -> dict[str, tuple[int, ...]]:
    found: dict[str, set[int]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "":
            found.setdefault(s.name, set()).add(s.since_version)
    return {op: tuple(sorted(v)) for op, v in found.items()}


def _steps() -> list[tuple[str, int, int]]:
    out = []
    for op, versions in sorted(_versions_now().items()):
        for a, b in zip(versions, versions[1:]):
            out += [(op, a, b), (op, b, a)]
    return out


def _adjacent(op: str, a: int, b: int) -> bool:
    versions = _versions_now().get(op, ())
    return a in versions and b in versions and abs(versions.index(a) - versions.index(b)) == 1


def test_every_schema_version_is_in_the_reviewed_snapshot():
    now = _versions_now()
    new = {op: sorted(set(v) - set(SCHEMA_VERSIONS.get(op, ()))) for op, v in now.items()}
    new = {op: v for op, v in new.items() if v}
    assert not new, (f"onnx.defs has schema versions nobody classified: {new}. Classify every new step "
                     f"(adapter, type-only, steps.IMPOSSIBLE, ...) then add them to SCHEMA_VERSIONS")
    gone = {op: sorted(set(v) - set(now.get(op, ()))) for op, v in SCHEMA_VERSIONS.items()}
    gone = {op: v for op, v in gone.items() if v}
    assert not gone, f"schema versions in the snapshot that onnx.defs no longer has: {gone}"


def test_all_steps_matches_the_schemas():
    assert sorted(steps.all_steps()) == sorted(_steps())


def test_every_step_is_classified():
    unclassified, bad_kind = [], []
    for op, a, b in _steps():
        kind = steps.step_kind(op, a, b)
        if kind not in ("own", "type-only", "onnx", "blocked"):
            bad_kind.append((op, a, b, kind))
        elif kind == "blocked" and (op, a, b) not in steps.IMPOSSIBLE and (op, a, b) not in PENDING_BLOCKED:
            unclassified.append((op, a, b, schema_diff(op, *sorted((a, b)))))
        elif kind == "blocked":
            assert steps.step_reason(op, a, b).strip()
    assert not bad_kind, bad_kind
    assert not unclassified, ("blocked steps with no reviewed reason (add an adapter, a steps.IMPOSSIBLE "
                              "entry, or a PENDING_BLOCKED entry):\n" + "\n".join(map(str, unclassified)))


def test_pending_blocked_entries_are_real_steps():
    for op, a, b in PENDING_BLOCKED:
        assert _adjacent(op, a, b), (op, a, b)
        assert PENDING_BLOCKED[(op, a, b)].strip()
    STALE[:] = sorted(k for k in PENDING_BLOCKED if steps.step_kind(*k) != "blocked")


@pytest.mark.skipif(not os.environ.get("REWRITER_STRICT_GAPS"), reason="REWRITER_STRICT_GAPS not set")
def test_no_stale_pending_blocked():
    stale = sorted(k for k in PENDING_BLOCKED if steps.step_kind(*k) != "blocked")
    assert not stale, f"PENDING_BLOCKED entries that are classified now (remove them): {stale}"


def _signature(op: str, version: int) -> tuple:
    """A schema without its types (type parameters renamed by first use): written here,
    independently of rewriter.convert.type_only."""
    s = onnx.defs.get_schema(op, version, "")
    params = {c.type_param_str for c in s.type_constraints}
    renamed: dict[str, str] = {}

    def formal(p):
        t = renamed.setdefault(p.type_str, f"T{len(renamed)}") if p.type_str in params else p.type_str
        return (p.name, t, int(p.option), p.is_homogeneous, p.min_arity)

    attrs = sorted((n, int(a.type), a.required, a.default_value.SerializeToString()) for n, a in s.attributes.items())
    return (tuple(map(formal, s.inputs)), tuple(map(formal, s.outputs)), s.min_input, s.max_input,
            s.min_output, s.max_output, tuple(attrs))


def test_type_only_steps_differ_only_in_types():
    wrong = []
    for op, a, b in _steps():
        if steps.step_kind(op, a, b) == "type-only":
            if _signature(op, a) != _signature(op, b):
                wrong.append((op, a, b, schema_diff(op, *sorted((a, b)))))
            lo, hi = sorted((a, b))
            assert (op, lo, hi) not in steps.MEANING_CHANGED, (op, a, b)
    assert not wrong, wrong


def test_registry_kinds_are_known():
    registry.lookup("Abs", 1, 6)  # loads every adapter module
    unknown = {key: kind for key, kind in registry.KINDS.items() if kind not in KNOWN_KINDS}
    assert not unknown, unknown
    assert set(registry.KINDS) == set(registry.ADAPTERS)


def test_every_own_adapter_is_an_adjacent_step_of_a_real_schema():
    registry.lookup("Abs", 1, 6)
    not_steps = [key for key in registry.ADAPTERS if not _adjacent(*key)]
    assert not not_steps, f"adapters registered for steps that are not adjacent schema versions: {not_steps}"
    one_way = sorted(key for key in registry.ADAPTERS if (key[0], key[2], key[1]) not in registry.ADAPTERS)
    assert not one_way, f"adapters registered in one direction only (register both): {one_way}"


def test_the_classification_tables_name_real_steps():
    for op, a, b in steps.IMPOSSIBLE:
        assert _adjacent(op, a, b), ("IMPOSSIBLE", op, a, b)
    for op, lo, hi in steps.MEANING_CHANGED:
        assert lo < hi and _adjacent(op, lo, hi), ("MEANING_CHANGED", op, lo, hi)
    for op, a, b in steps.ONNX_CORRECT:
        assert _adjacent(op, a, b), ("ONNX_CORRECT", op, a, b)


def test_the_snapshot_is_what_the_engine_walks():
    for op in ("Add", "ReduceProd", "Softmax", "Resize", "SpaceToDepth"):
        assert tuple(registry.schema_versions(op)) == SCHEMA_VERSIONS[op]


# ---------------------------------------------------------------- the expressibility oracle itself

def _oracle_case(op, opset, target, attrs=None, inputs=("x",), outputs=("y",), elem=onnx.TensorProto.FLOAT,
                 shape=(2, 3, 4), consts=None):
    from tests.convert.support.expressible import why_inexpressible

    node = onnx.helper.make_node(op, list(inputs), list(outputs), **(attrs or {}))
    types = {n: onnx.helper.make_tensor_type_proto(elem, list(shape)) for n in [*inputs, *outputs] if n}
    values = consts or {}
    for name, value in values.items():
        types[name] = onnx.helper.make_tensor_type_proto(onnx.TensorProto.INT64, list(value.shape))
    return why_inexpressible(node, opset, target, types.get, values.get)


@pytest.mark.parametrize("label, args, expressible", [
    ("reduce axes constant 18->13", ("ReduceMean", 18, 13, None, ("x", "a")), True),
    ("reduce axes computed 18->13", ("ReduceMean", 18, 13, None, ("x", "a"), ("y",), 1, (2, 3, 4), {}), False),
    ("bfloat16 Add 14->11", ("Add", 14, 11, None, ("x", "z"), ("y",), onnx.TensorProto.BFLOAT16), False),
    ("int8 Add 14->13", ("Add", 14, 13, None, ("x", "z"), ("y",), onnx.TensorProto.INT8), False),
    ("LayerNormalization 17->13 through its body", ("LayerNormalization", 17, 13, {"axis": -1}, ("x", "s")), True),
    ("Gelu 20->13 through its body", ("Gelu", 20, 13, None), True),
    ("Pad wrap 19->18", ("Pad", 19, 18, {"mode": "wrap"}, ("x", "p")), False),
    ("Pad reflect 19->18", ("Pad", 19, 18, {"mode": "reflect"}, ("x", "p")), True),
    ("Resize half_pixel 11->10", ("Resize", 11, 10, {"coordinate_transformation_mode": "half_pixel"},
                                  ("x", "", "sc")), False),
    ("Resize asymmetric 11->10", ("Resize", 11, 10, {"coordinate_transformation_mode": "asymmetric"},
                                  ("x", "", "sc")), True),
    ("GridSample 5-D 20->16", ("GridSample", 20, 16, None, ("x", "g"), ("y",), 1, (1, 1, 2, 2, 2)), False),
    ("Scatter 9->11 as ScatterElements", ("Scatter", 9, 11, None, ("x", "i", "u"), ("y",), 1, (2, 3, 4),
                                          {"i": np.zeros((2, 3, 4), np.int64)}), True),
    ("Upsample 9->11 (no body)", ("Upsample", 9, 11, {"mode": "nearest"}, ("x", "sc")), False),
    ("Trilu 14->13 (no body)", ("Trilu", 14, 13, None), False),
    ("Softmax axis 1 13->11 (meaning change, rewritable)", ("Softmax", 13, 11, {"axis": 1}), True),
])
def test_the_expressibility_oracle(label, args, expressible):
    op, opset, target, attrs, *rest = args
    inputs = rest[0] if rest else ("x",)
    kwargs = {}
    if len(rest) > 1:
        kwargs.update(outputs=rest[1])
    if len(rest) > 2:
        kwargs.update(elem=rest[2])
    if len(rest) > 3:
        kwargs.update(shape=rest[3])
    consts = rest[4] if len(rest) > 4 else {n: np.array([1], np.int64) for n in inputs[1:] if n in ("a", "p")}
    why = _oracle_case(op, opset, target, attrs, inputs, consts=consts, **kwargs)
    assert (why is None) == expressible, why
