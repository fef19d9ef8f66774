"""Round trips of the official backend node tests: down and back up again.

- ReduceProd (the first op the converter covered): every case down to 13, 11 and 1 and back
  to 18, both directions reproducing the case's outputs.
- Every case that converts down to opset 13 (see test_backend.py) converts back up to its own
  opset, and the round-tripped model still reproduces the case's expected outputs: the
  upward adapters undo what the downward ones did.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from rewriter.convert import convert_model
from rewriter.errors import RewriterError
from tests.convert import test_backend as backend
from tests.oracle import assert_valid, backend_cases, run

CASES = backend_cases("ReduceProd")
ROUND_TRIP: collections.Counter = collections.Counter()


def _with_constant_axes(case):
    """The case's model with its axes graph input turned into an initializer of the test's value."""
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


def test_the_reduceprod_cases_are_there():
    assert len(CASES) >= 9
    assert {"test_reduce_prod_empty_set", "test_reduce_prod_negative_axes_keepdims_random"} <= {c.name for c in CASES}


@pytest.mark.parametrize("target", [13, 11, 1])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reduceprod_case_down_and_back(case, target):
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


def test_every_case_that_goes_down_to_13_comes_back_up():
    problems = []
    for case in backend.CASES:
        source = backend.default_opset(case.model)
        if source <= 13:
            continue
        model, feeds, expected = backend._prepare(case, 13)
        try:
            down, _ = convert_model(model, 13)
        except RewriterError:
            continue  # judged in test_backend.py
        except Exception:  # noqa: BLE001  (a crash is test_backend.py's to report)
            continue
        ROUND_TRIP["down to 13"] += 1
        if (case.name, 13) in backend.KNOWN_DEFECTS:
            continue
        try:
            back, _ = convert_model(down, source)
        except RewriterError as e:
            problems.append(f"{case.name}: 13 -> {source} refused: {str(e)[:300]}")
            continue
        ROUND_TRIP["back up"] += 1
        why = backend._check_numerics(case, model, back, feeds, list(expected))
        if why is not None:
            problems.append(f"{case.name}: 13 -> {source}: {why}")
    assert ROUND_TRIP["down to 13"] > 300
    assert not problems, f"{len(problems)} round trip(s) failed:\n" + "\n".join(problems[:40])
