"""The official ONNX backend node tests of the ops rewriter keeps as they are (type-only
steps, compat.TYPE_ONLY_OPS) and of the Softmax family it guards, converted to other opsets:
every conversion that succeeds computes what the original computes."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import pytest

from rewriter.convert import type_only as compat
from rewriter.convert import convert_model
from rewriter.errors import RewriterError
from tests.oracle import backend_cases

OPS = sorted(set(compat.TYPE_ONLY_OPS) | {"Softmax", "LogSoftmax", "Hardmax"})
CASES = [c for op in OPS for c in backend_cases(op)]

TARGETS = (7, 11, 13, 18, onnx.defs.onnx_opset_version())


def _run_both(original, converted, feeds):
    """Outputs of both models from one runtime: ONNX Runtime when it takes both, else onnx.reference."""
    import onnxruntime as ort

    try:
        return [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
                for m in (original, converted)]
    except Exception:  # ORT lacks a kernel for some op version or type: the reference has them all
        return [[np.asarray(o) for o in onnx.reference.ReferenceEvaluator(m).run(None, feeds)]
                for m in (original, converted)]


def test_there_are_cases():
    assert len(CASES) > 200


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case_converts_or_is_refused(case):
    model = case.model
    source = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    inputs, _ = case.data_sets[0]
    feeds = {i.name: np.asarray(v) for i, v in zip(model.graph.input, inputs)}
    converted_any = False
    for target in sorted(set(TARGETS) - {source}):
        try:
            converted, _ = convert_model(model, target)
        except RewriterError:
            continue  # refused with a message: allowed (the version converter lacks many steps)
        converted_any = True
        try:
            expected, got = _run_both(model, converted, feeds)
        except Exception:
            pytest.skip("no runtime runs this model")  # e.g. sequence-typed feeds
        for e, g in zip(expected, got):
            if isinstance(e, list) or np.asarray(e).dtype == object:
                continue
            e, g = np.asarray(e), np.asarray(g)
            assert e.shape == g.shape and e.dtype == g.dtype, (target, e.shape, g.shape)
            if e.dtype.kind in "fc":
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=f"to {target}")
            else:
                np.testing.assert_array_equal(g, e, err_msg=f"to {target}")
    if not converted_any:
        pytest.skip("every target refused")
