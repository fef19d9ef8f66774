"""The official ONNX backend node cases with float32 inputs or outputs, converted to float16
and run in ONNX Runtime against each case's own expected outputs."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from rewriter.precision import convert_precision_proto

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases

    CASES = [c for c in collect_testcases()
             if any(v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
                    for v in list(c.model.graph.input) + list(c.model.graph.output))]

# The cases whose float16 result ONNX Runtime loads but cannot run: its CPU ScatterND and
# ScatterElements kernels have no float16 reduction ("MLFloat16 data type is not supported with
# ScatterND/ScatterElements opset ... when reduction is ..."). Every other run-time error fails.
RUNTIME_LACKS_HALF_REDUCTION = frozenset({
    "test_scatter_elements_with_duplicate_indices",
    "test_scatter_elements_with_reduction_mul",
    "test_scatternd_add",
    "test_scatternd_multiply",
    "test_scatternd_max",
    "test_scatternd_min",
    "test_scatternd_max_with_element_indices",
    "test_scatternd_min_with_element_indices",
})
ort.set_default_logger_severity(4)


def _session(model):
    try:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - ONNX Runtime does not load the case itself
        return None


def _value(v):
    """A case's input or output as ONNX Runtime takes and gives it; None when numpy cannot hold it."""
    if isinstance(v, list):
        items = [_value(x) for x in v]
        return None if any(x is None for x in items) else items
    if isinstance(v, onnx.TensorProto):
        v = onnx.numpy_helper.to_array(v)
    v = np.asarray(v)  # the cases give some scalars as numpy scalars, which ONNX Runtime refuses
    return v if v.dtype.type.__module__ == "numpy" else None  # float8, int4, ...: ml_dtypes


def _close(expected, got) -> bool:
    if isinstance(expected, list) or isinstance(got, list):  # sequences: element by element
        return isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got) \
            and all(_close(e, g) for e, g in zip(expected, got))
    e = np.asarray(expected)
    g = np.asarray(got)
    if e.dtype.kind != "f":
        return np.array_equal(e, g)
    e64, g64 = e.astype(np.float64), g.astype(np.float64)
    if e64.shape != g64.shape or not np.array_equal(np.isnan(e64), np.isnan(g64)):
        return False
    finite = np.isfinite(e64) & np.isfinite(g64)
    infinite = ~finite & ~np.isnan(e64)  # an infinity on either side: the same on both
    if not np.array_equal(e64[infinite], g64[infinite]):
        return False
    norm = np.linalg.norm(e64[finite])
    return np.linalg.norm(g64[finite] - e64[finite]) <= 1e-2 * (norm if norm else 1.0)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_backend_case_converts_and_matches_expected_outputs(case):
    source = _session(case.model)
    if source is None:
        pytest.skip("ONNX Runtime does not load the float32 case")
    inputs, outputs = [[_value(v) for v in vs] for vs in case.data_sets[0]]
    if any(v is None for v in inputs + outputs):
        pytest.skip("the case gives a tensor of a type numpy cannot hold (float8, int4, ...)")
    feeds = {i.name: v for i, v in zip(case.model.graph.input, inputs)}
    try:
        own = source.run(None, feeds)
    except Exception:  # noqa: BLE001 - ONNX Runtime's own float32 run fails (not the conversion)
        own = None
    if own is None or not all(_close(e, g) for e, g in zip(outputs, own)):
        pytest.skip("ONNX Runtime's float32 run of the case does not give its expected outputs")
    result, report = convert_precision_proto(case.model, "float16")
    onnx.checker.check_model(result)
    try:
        session = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        # only a missing CPU float16 kernel is allowed (no runtime targeted: no kernel rule)
        assert "Could not find an implementation" in str(e), str(e)
        pytest.skip("ONNX Runtime's CPU EP has no float16 kernel for an op (convert with --target for it)")
    if case.name in RUNTIME_LACKS_HALF_REDUCTION:
        with pytest.raises(Exception, match="MLFloat16 data type is not supported"):
            session.run(None, feeds)  # when ONNX Runtime gains the kernel, compare the case instead
        pytest.skip("ONNX Runtime's CPU EP has no float16 ScatterND/ScatterElements reduction")
    got = session.run(None, feeds)
    mismatched = [o.name for o, e, g in zip(case.model.graph.output, outputs, got) if not _close(e, g)]
    assert not mismatched, (mismatched, report.summary_lines())


def test_the_pinned_runtime_gaps_are_cases_of_this_onnx():
    assert len(RUNTIME_LACKS_HALF_REDUCTION) == 8
    assert RUNTIME_LACKS_HALF_REDUCTION <= {c.name for c in CASES}


def test_the_comparison_compares_sequences_and_infinities():
    a = np.array([1.0, 2.0], np.float32)
    assert _close([a, a], [a, a.astype(np.float16)])
    assert not _close([a, a], [a, a + 1])
    assert not _close([a, a], [a])
    assert not _close([a], a)
    assert not _close(np.array([np.inf, 1.0]), np.array([1e4, 1.0]))
    assert not _close(np.array([7e4, 1.0]), np.array([np.inf, 1.0]))
    assert _close(np.array([-np.inf, np.nan]), np.array([-np.inf, np.nan], np.float16))
