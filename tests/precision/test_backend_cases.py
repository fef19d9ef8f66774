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

# cases whose float16 result ONNX Runtime cannot run although it loads it (its own limits:
# reductions in ScatterND/ScatterElements, training Dropout, the window ops' scalar inputs as the
# cases give them), or that cannot be fed as given: checked for validity only
ort.set_default_logger_severity(4)


def _session(model):
    try:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - ONNX Runtime does not load the case itself
        return None


def _close(expected, got) -> bool:
    if isinstance(expected, list) or isinstance(got, list):
        return True  # sequences: not compared here
    e = np.asarray(expected)
    g = np.asarray(got)
    if e.dtype.kind != "f":
        return np.array_equal(e, g)
    e64, g64 = e.astype(np.float64), g.astype(np.float64)
    if not np.array_equal(np.isnan(e64), np.isnan(g64)):
        return False
    finite = np.isfinite(e64) & np.isfinite(g64)
    norm = np.linalg.norm(e64[finite])
    return np.linalg.norm((g64 - e64)[finite]) <= 1e-2 * (norm if norm else 1.0)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_backend_case_converts_and_matches_expected_outputs(case):
    source = _session(case.model)
    if source is None:
        pytest.skip("ONNX Runtime does not load the float32 case")
    inputs, outputs = case.data_sets[0]
    feeds = {i.name: v for i, v in zip(case.model.graph.input, inputs)}
    try:
        own = source.run(None, feeds)
    except Exception:  # noqa: BLE001
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
    try:
        got = session.run(None, feeds)
    except Exception:  # noqa: BLE001 - a kernel limit at run time (see above)
        pytest.skip("ONNX Runtime cannot run the float16 result on the case's inputs")
    mismatched = [o.name for o, e, g in zip(case.model.graph.output, outputs, got) if not _close(e, g)]
    assert not mismatched, (mismatched, report.summary_lines())
