"""The official ONNX backend node tests for ReduceProd, converted down and back up."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from rewriter.convert import convert_model
from tests.oracle import assert_valid, backend_cases, run

CASES = backend_cases("ReduceProd")


def _with_constant_axes(case):
    """The case's model with its axes graph input turned into an initializer of the test's value.

    Below opset 18 axes must be constant; the backend tests feed them as a graph input.
    """
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    names = [i.name for i in model.graph.input]
    feeds = dict(zip(names, inputs))
    if "axes" in feeds:
        model.graph.initializer.append(numpy_helper.from_array(np.asarray(feeds.pop("axes")), "axes"))
        keep = [i for i in model.graph.input if i.name != "axes"]
        del model.graph.input[:]
        model.graph.input.extend(keep)
    return model, feeds, outputs


def test_the_backend_cases_are_there():
    assert len(CASES) >= 9
    assert {"test_reduce_prod_empty_set", "test_reduce_prod_negative_axes_keepdims_random"} <= {c.name for c in CASES}


@pytest.mark.parametrize("target", [13, 11, 1])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case_down_and_back(case, target):
    model, feeds, expected = _with_constant_axes(case)
    down, _ = convert_model(model, target)
    assert_valid(down)
    assert down.opset_import[0].version == target
    back, _ = convert_model(down, 18)
    assert_valid(back)
    for converted in (down, back):
        for got, want in zip(run(converted, feeds), expected):
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
            assert got.shape == want.shape
