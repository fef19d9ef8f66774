"""The official ONNX backend node tests of Einsum converted to opsets 7, 9 and 11 (where Einsum
does not exist): each conversion the oracle calls expressible succeeds and reproduces the case's
own expected outputs; each refusal is one the oracle calls inexpressible."""

from __future__ import annotations

import numpy as np
import pytest

import rewriter
from rewriter.convert import convert_model
from tests.convert.support.einsum_util import oracle
from tests.oracle import assert_valid, backend_cases, run

CASES = backend_cases("Einsum")


def test_the_cases_are_there():
    names = {c.name for c in CASES}
    assert {"test_einsum_batch_diagonal", "test_einsum_batch_matmul", "test_einsum_inner_prod", "test_einsum_sum",
            "test_einsum_transpose", "test_einsum_scalar"} <= names, names


@pytest.mark.parametrize("target", [7, 9, 11])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case(case, target):
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs)}
    why = oracle(case.model, target)
    try:
        result, report = convert_model(case.model, target)
    except rewriter.RewriterError as e:
        assert why is not None, f"refused but expressible: {e}"
        assert "bfloat16" in case.name  # the only cases without an exact route below 12
        return
    assert why is None, why
    assert_valid(result)
    assert "Einsum" not in [n.op_type for n in result.graph.node]
    assert report.decomposed["Einsum"] == 1
    got = run(result, feeds)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        e, g = np.asarray(e), np.asarray(g)
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)
