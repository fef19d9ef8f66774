"""The official ONNX backend node tests of EVERY op, converted to opsets 7, 11, 13, 17, 18 and
the latest, each converted model run on the case's own inputs and compared with the case's
own expected outputs (its rtol/atol).

Per case and target (cases whose source opset is the target are skipped):

- the conversion succeeds: the result must pass the checker and reproduce the case's
  expected outputs (ONNX Runtime, graph optimizations off, where it runs the converted
  model; onnx.reference otherwise). When the runtime cannot reproduce the ORIGINAL model's
  expected outputs either (a runtime's own deviation), the converted model must give what
  the original gives on that runtime. Non-deterministic ops: shapes and types only.
- the conversion is refused: allowed only when the case is not expressible at the target,
  decided from onnx.defs by ``tests/convert/support/expressible.py`` (independent of the
  converter). A refusal of an expressible case is a failure unless every blocker's
  (op, step) is in :data:`KNOWN_GAPS` (with its reason).

Inputs that the target schema lacks (taken as an attribute there: Reduce* axes, Squeeze axes,
Split's split, Pad's pads, Clip's min/max, TopK's K, ...; or absent: Pad's axes, Slice's steps,
Dropout's training_mode, ...) are turned into initializers holding the case's values for that
target: a graph input cannot become an attribute or be folded away, so without this every such
case would be trivially inexpressible.

The counts per target (tried, succeeded, refused-and-inexpressible, refused-but-expressible,
of which known gaps) are printed in the terminal summary (tests/convert/conftest.py).
Set REWRITER_STRICT_GAPS=1 to also fail on KNOWN_GAPS entries no case needs any more.
"""

from __future__ import annotations

import collections
import os
import warnings

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import onnx.reference
import pytest
from onnx import numpy_helper

from rewriter.convert import convert_model
from rewriter.convert.planner import ConversionBlocked
from rewriter.errors import RewriterError
from tests.convert.support.expressible import absent_at_target, default_opset, schema_at, why_inexpressible
from tests.oracle import _backend_cases

LATEST = onnx.defs.onnx_opset_version()
TARGETS = (7, 11, 13, 17, 18, LATEST)

# (op, step) -> why the converter refuses an expressible case today. step as in the blocker
# ("18 -> 17", "expand", ...). Every entry is a gap an adapter should close.
KNOWN_GAPS: dict[tuple[str, str], str] = {  # generated from a run, then reviewed
    ('Greater', '9 -> 7'): "Greater-7 compares floats only; the int64 comparison in FlexAttention's score_mod (whose Range also needs a Loop below 11) cannot be made exact with a cast",  # to [7]
    ('Loop', '11 -> 1'): "Loop-1 restricts what loop-carried values may do in ways the model's body cannot be checked against; no conversion below opset 11",  # 8 case-target(s), to [7]
    ('Slice', '10 -> 1'): "starts input 'slice_start' is not a constant, so it cannot become the starts attribute needed below opset 10",  # 1 case-target(s), to [7]
    ('Where', 'expand'): "Where exists only from opset 9 and ONNX defines no function body for it",  # 1 case-target(s), to [7]
}

# (case name, target) -> a known defect (wrong result, invalid output, crash), with its reason.
# The test fails on any defect not listed here.
KNOWN_DEFECTS: dict[tuple[str, int], str] = {
}

# Filled by the tests, printed by tests/convert/conftest.py.
RESULTS: dict[int, collections.Counter] = {}
GAPS_SEEN: dict[int, collections.Counter] = {}


def _cases() -> list:
    return [c for c in _backend_cases()
            if c.kind == "node" and c.data_sets and "_expanded" not in c.name
            and len(c.model.graph.node) == 1 and default_opset(c.model) is not None]


CASES = _cases()


def test_every_op_has_cases():
    ops = {c.model.graph.node[0].op_type for c in CASES if c.model.graph.node[0].domain in ("", "ai.onnx")}
    assert len(ops) >= 170, len(ops)
    assert len(CASES) >= 1300


# ------------------------------------------------------------------ helpers

def _prepare(case, target):
    """The case's model with the inputs the target takes as attributes turned into
    initializers; the feeds left; the expected outputs."""
    model = case.model
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: _value(v) for vi, v in zip(model.graph.input, inputs)}
    expected = [_value(v) for v in expected]
    node = model.graph.node[0]
    source = default_opset(model)
    frozen = set()
    if node.domain in ("", "ai.onnx"):
        for index, _formal in absent_at_target(node.op_type, source, target):
            if index < len(node.input) and node.input[index] in feeds:
                frozen.add(node.input[index])
    if frozen:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        for name in sorted(frozen):
            copy.graph.initializer.append(numpy_helper.from_array(np.asarray(feeds.pop(name)), name))
        keep = [vi for vi in copy.graph.input if vi.name not in frozen]
        del copy.graph.input[:]
        copy.graph.input.extend(keep)
        model = copy
    return model, feeds, list(expected)


def _value(v):
    """A data set value as a runtime takes it: arrays (some cases store TensorProtos), lists
    for sequences, None for an empty optional."""
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, onnx.SequenceProto):
        return [_value(x) for x in numpy_helper.to_list(v)]
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return v if v is None else np.asarray(v)


def _lookups(model):
    graph = model.graph
    types = {vi.name: vi.type for vi in [*graph.input, *graph.output, *graph.value_info]}
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for init in graph.initializer:
        if init.name not in types:
            types[init.name] = onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims))
    return types.get, consts.get


def _deterministic(node) -> bool:
    if node.domain not in ("", "ai.onnx"):
        return True
    s = schema_at(node.op_type, 10**6, deprecated_ok=True)
    return s is None or s.node_determinism != onnx.defs.OpSchema.NodeDeterminism.NonDeterministic


def _ort_run(model, feeds):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _ref_run(model, feeds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        names = {i.name for i in model.graph.input}
        return list(onnx.reference.ReferenceEvaluator(model).run(None, {k: v for k, v in feeds.items() if k in names}))


def _runtimes(model):
    return (("ort", _ort_run), ("reference", _ref_run)) if default_opset(model) >= 7 else (("reference", _ref_run),)


def _run(model, feeds):
    """(runtime name, outputs) from the first runtime that runs ``model``; (None, error) if none."""
    error = None
    for name, fn in _runtimes(model):
        try:
            return name, fn(model, feeds)
        except Exception as e:  # noqa: BLE001  (this runtime lacks a kernel/type: try the next)
            error = e
    return None, error


def _as_float(a):
    a = np.asarray(a)
    if a.dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
                   ml_dtypes.float8_e5m2fnuz) or a.dtype.kind == "V":
        return a.astype(np.float32)
    return a


def _mismatch(got, want, rtol, atol, exact_values=True) -> str | None:
    """None when ``got`` matches ``want`` (arrays, sequences, optionals), else what differs."""
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"sequence of {len(want)} expected, got {type(got).__name__}"
        for g, w in zip(got, want):
            why = _mismatch(g, w, rtol, atol, exact_values)
            if why:
                return why
        return None
    if want is None:
        return None if got is None or (isinstance(got, list) and not got) else "None expected"
    want = np.asarray(want)
    if got is None:
        return "got None"
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape} != expected {want.shape}"
    if got.dtype != want.dtype and not (got.dtype.kind in "OUS" and want.dtype.kind in "OUS"):
        return f"dtype {got.dtype} != expected {want.dtype}"
    if not exact_values:
        return None
    if want.dtype == object or got.dtype == object:
        return None if np.array_equal(got.astype(str), want.astype(str)) else "values differ"
    g, w = _as_float(got), _as_float(want)
    if w.dtype.kind in "fc" or g.dtype.kind in "fc":
        try:
            np.testing.assert_allclose(g.astype(np.complex128) if w.dtype.kind == "c" else g.astype(np.float64),
                                       w.astype(np.complex128) if w.dtype.kind == "c" else w.astype(np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            return " ".join(str(e).split())[:300]
        return None
    return None if np.array_equal(g, w) else "values differ"


def _outputs_mismatch(got, want, rtol, atol, exact_values) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} outputs, {len(want)} expected"
    for i, (g, w) in enumerate(zip(got, want)):
        why = _mismatch(g, w, rtol, atol, exact_values)
        if why:
            return f"output {i}: {why}"
    return None


UNVERIFIED = "unverified"  # neither runtime runs the original nor the converted model


# Ops whose exact decomposition sums in another order (DFT/STFT as MatMul or Conv with constant
# matrices): their atol is at least this times max|expected| (test_dft_inverse expects exact zeros
# that only float32 FFT arithmetic gives; the float64 inverse is 1.4e-6 off them, ONNX Runtime 1.9e-5).
REORDERED_SUMS = {"DFT": 1e-6, "STFT": 1e-6}


def _check_numerics(case, original, converted, feeds, expected) -> str | None:
    """None when the converted model computes what the case expects (see the module doc)."""
    exact = _deterministic(original.graph.node[0])
    if original.graph.node[0].op_type in REORDERED_SUMS:
        scale = REORDERED_SUMS[original.graph.node[0].op_type] * max(float(np.abs(e).max()) for e in expected)
        case = type("Loosened", (), {"rtol": case.rtol, "atol": max(case.atol, scale), "name": case.name})()
    rt, got = _run(converted, feeds)
    if rt is None:
        # Neither runtime runs it: allowed only when neither runs the original either.
        rt0, _ = _run(original, feeds)
        return UNVERIFIED if rt0 is None else f"no runtime runs the converted model ({str(got)[:200]})"
    why = _outputs_mismatch(got, expected, case.rtol, case.atol, exact)
    if why is None:
        return None
    for name, fn in _runtimes(converted):  # the runtime itself may not reproduce the case
        try:
            base = fn(original, feeds)
            if name != rt:
                got = fn(converted, feeds)
        except Exception:  # noqa: BLE001
            continue
        if _outputs_mismatch(base, expected, case.rtol, case.atol, exact) is None:
            return f"{name}: {_outputs_mismatch(got, expected, case.rtol, case.atol, exact)}"
        if _outputs_mismatch(got, base, case.rtol, case.atol, exact) is None:
            return None  # the runtime deviates from the case alike on both models
    return f"{rt}: {why}"


# ------------------------------------------------------------------ the test

def _classify(case, target) -> tuple[str, str, object]:
    """(outcome, detail, key) for one case and target."""
    model, feeds, expected = _prepare(case, target)
    node = model.graph.node[0]
    source = default_opset(model)
    types, consts = _lookups(model)
    why_not = why_inexpressible(node, source, target, types, consts)
    try:
        converted, _ = convert_model(model, target)
    except ConversionBlocked as e:
        unexplained = [b for b in e.blockers if not (b.node and b.op and b.step and b.reason.strip() and b.works)]
        if not e.blockers or unexplained:
            return "defect: a refusal that names no node or reason", str(e)[:300], None
        if why_not is not None:
            return "refused-inexpressible", why_not, None
        keys = sorted({(b.op, b.step) for b in e.blockers})
        if all(k in KNOWN_GAPS for k in keys):
            return "refused-expressible (known gap)", str(e)[:300], keys
        return "refused-expressible", str(e)[:400], keys
    except RewriterError as e:
        if "not valid" in str(e):  # the converter's own gate caught an invalid result: the plan missed it
            return "defect: invalid result (caught by the converter)", str(e)[:400], None
        if why_not is not None:
            return "refused-inexpressible", why_not, None
        keys = [(node.op_type, "error")]
        if all(k in KNOWN_GAPS for k in keys):
            return "refused-expressible (known gap)", str(e)[:300], keys
        return "refused-expressible", str(e)[:400], keys
    except Exception as e:  # noqa: BLE001  (a crash is a defect)
        return "defect: crashed", f"{type(e).__name__}: {str(e)[:300]}", None
    if default_opset(converted) != target:
        return "defect: wrong opset", str(default_opset(converted)), None
    try:
        onnx.checker.check_model(converted, full_check=True)
    except Exception as e:  # noqa: BLE001
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception:  # noqa: BLE001  (the input itself fails strict inference)
            try:
                onnx.checker.check_model(converted)
            except Exception as e2:  # noqa: BLE001
                return "defect: invalid result", str(e2)[:300], None
        else:
            return "defect: invalid result", " ".join(str(e).split())[:300], None
    why = _check_numerics(case, model, converted, feeds, expected)
    if why == UNVERIFIED:
        return "succeeded (no runtime runs it: valid, outputs unchecked)", "", None
    if why is not None:
        return "defect: wrong result", why, None
    if why_not is not None:
        return "succeeded (oracle said inexpressible)", why_not, None
    return "succeeded", "", None


@pytest.mark.parametrize("target", TARGETS)
def test_backend_cases_convert_or_are_inexpressible(target):
    counts = RESULTS[target] = collections.Counter()
    gaps = GAPS_SEEN[target] = collections.Counter()
    problems = []
    for case in CASES:
        if default_opset(case.model) == target:
            continue
        outcome, detail, keys = _classify(case, target)
        counts["tried"] += 1
        counts[outcome] += 1
        if outcome.startswith("refused-expressible (known gap)"):
            for k in keys:
                gaps[k] += 1
            continue
        if outcome.startswith("refused-expressible") or outcome.startswith("defect"):
            known = KNOWN_DEFECTS.get((case.name, target))
            if known is not None:
                counts["known defect"] += 1
                continue
            problems.append(f"{case.name} -> {target}: {outcome}: {detail}"
                            + (f" [gap keys {keys}]" if keys else ""))
    assert not problems, f"{len(problems)} problem(s) converting to {target}:\n" + "\n".join(problems[:60])


def test_known_gaps_are_listed_with_reasons():
    for key, reason in KNOWN_GAPS.items():
        assert isinstance(key, tuple) and len(key) == 2 and reason.strip(), key
    for key, reason in KNOWN_DEFECTS.items():
        assert reason.strip(), key


@pytest.mark.skipif(not os.environ.get("REWRITER_STRICT_GAPS"), reason="REWRITER_STRICT_GAPS not set")
def test_no_stale_known_gaps():
    if len(GAPS_SEEN) != len(TARGETS):
        pytest.skip("needs every target's run in this session")
    seen = set().union(*GAPS_SEEN.values())
    stale = sorted(set(KNOWN_GAPS) - seen)
    assert not stale, f"KNOWN_GAPS entries no case needs any more (remove them): {stale}"
