"""Ops newer than the target, expanded into their ONNX function bodies: compared with the
official backend cases' own expected outputs."""

from __future__ import annotations

import numpy as np
import pytest

from rewriter.convert import convert_model
from tests.oracle import assert_valid, backend_cases, run

# (op, target): the body's shape arithmetic is folded (RMSNormalization's axes come from
# Range(axis, Size(Shape(X)))), bodies with subgraphs (AffineGrid's If) are converted too,
# a deprecated schema at the target (GroupNormalization 18) is replaced by the body.
CASES = [(op, target, case) for op, target in [("RMSNormalization", 13), ("LayerNormalization", 11),
                                                ("Gelu", 13), ("AffineGrid", 17), ("GroupNormalization", 18),
                                                ("HardSwish", 13), ("Mish", 13)]
         for case in backend_cases(op)[:4] if "3d" not in case.name]
# (AffineGrid's 3-D cases are refused: the body's 2-D branch, not taken for them, splits a 5-wide
# size into 4 outputs, which no static Split-13 can express.)


@pytest.mark.parametrize("op,target,case", CASES, ids=lambda v: getattr(v, "name", str(v)))
def test_expanded_op_computes_the_expected_outputs(op, target, case):
    result, report = convert_model(case.model, target)
    assert_valid(result)
    assert report.expanded[op] >= 1
    assert op not in {n.op_type for n in result.graph.node}
    names = [n.name for n in result.graph.node if n.name]
    assert len(names) == len(set(names))
    inputs, expected = case.data_sets[0]
    feeds = {i.name: np.asarray(v) for i, v in zip(case.model.graph.input, inputs)}
    for got, want in zip(run(result, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5))
