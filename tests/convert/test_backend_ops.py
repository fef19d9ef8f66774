"""Round trips of the official backend node tests: down and back up again.

- ReduceProd (the first op the converter covered): every case down to 13, 11 and 1 and back
  to 18, both directions reproducing the case's outputs.
- Every case that converts down to opset 13 (see test_backend.py) converts back up to its own
  opset, and the round-tripped model still reproduces the case's expected outputs: the
  upward adapters undo what the downward ones did.
- The ``*_expanded`` backend cases (the op replaced by its function body: real multi-node
  graphs, with If/Loop/sequences) converted to 11, 13, 18 and the latest: valid, the case's
  outputs, or a refusal that the per-node oracle (expressible.why_model_inexpressible) allows
  or that test_backend.KNOWN_GAPS / EXPANDED_GAPS lists.
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
from rewriter.convert.planner import ConversionBlocked
from tests.convert.support.expressible import why_model_inexpressible
from tests.oracle import _backend_cases, assert_valid, backend_cases, run

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
        if why is not None and why != backend.UNVERIFIED:
            problems.append(f"{case.name}: 13 -> {source}: {why}")
    assert ROUND_TRIP["down to 13"] > 300
    assert not problems, f"{len(problems)} round trip(s) failed:\n" + "\n".join(problems[:40])


# (op, step) -> why (the converter's reason), for refusals seen only in the expanded cases.
EXPANDED_GAPS: dict[tuple[str, str], str] = {  # beyond test_backend.KNOWN_GAPS
}
EXPANDED: dict[int, collections.Counter] = {}


def _expanded_cases():
    return [c for c in _backend_cases() if c.kind == "node" and c.data_sets and c.name.endswith("_expanded")
            and backend.default_opset(c.model) is not None]


@pytest.mark.parametrize("target", [11, 13, 18, backend.LATEST])
def test_expanded_backend_cases(target):
    counts = EXPANDED[target] = collections.Counter()
    problems = []
    for case in _expanded_cases():
        model = case.model
        if backend.default_opset(model) == target:
            continue
        counts["tried"] += 1
        inputs, expected = case.data_sets[0]
        feeds = {vi.name: backend._value(v) for vi, v in zip(model.graph.input, inputs)}
        expected = [backend._value(v) for v in expected]
        try:
            converted, _ = convert_model(model, target)
        except ConversionBlocked as e:
            if why_model_inexpressible(model, target) is not None:
                counts["refused-inexpressible"] += 1
                continue
            keys = {(b.op, b.step) for b in e.blockers}
            if all(k in backend.KNOWN_GAPS or k in EXPANDED_GAPS for k in keys):
                counts["refused-expressible (known gap)"] += 1
                continue
            problems.append(f"{case.name} -> {target}: refused though expressible: {str(e)[:300]} {sorted(keys)}")
            continue
        except RewriterError as e:
            if why_model_inexpressible(model, target) is not None and "not valid" not in str(e):
                counts["refused-inexpressible"] += 1
                continue
            problems.append(f"{case.name} -> {target}: {str(e)[:300]}")
            continue
        try:
            onnx.checker.check_model(converted, full_check=True)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{case.name} -> {target}: invalid result: {str(e)[:300]}")
            continue
        why = backend._check_numerics(case, model, converted, feeds, expected)
        if why is not None and why != backend.UNVERIFIED:
            problems.append(f"{case.name} -> {target}: {why}")
            continue
        counts["succeeded"] += 1
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])


# Older opsets between the main targets, where most schema steps are: 8, 9, 10.
INTERMEDIATE_GAPS: dict[tuple[str, str], str] = {  # beyond test_backend.KNOWN_GAPS
    ('QuantizeLinear', '13 -> 10'): "per-axis QuantizeLinear at opset 10: the rewrite needs Round (from 11); "
                                    "rounding half to even from Floor/Mod/Where is not done",
    ('Scan', '9 -> 8'): "Scan-8 scans along a batch axis and has no per-input scan axes or directions; "
                        "rewriter does not add a batch axis going down",
    ('Concat', '11 -> 4'): "negative axis -1 cannot be converted below opset 11 because the rank of X is unknown",  # 6 case-target(s), to [10]
    ('Slice', '11 -> 10'): "axes input 'axes' is not a constant, so negative values cannot be ruled out below opset 11",  # 7 case-target(s), to [10]
    ('Squeeze', '11 -> 1'): "negative axes [-2] cannot be converted below opset 11 because the rank of X is unknown",  # 48 case-target(s), to [9, 10]
    ('Unsqueeze', '11 -> 1'): "negative axes [-2] cannot be converted below opset 11 because the rank of X is unknown",  # 26 case-target(s), to [9, 10]
}
INTERMEDIATE: dict[int, collections.Counter] = {}


@pytest.mark.parametrize("target", [8, 9, 10])
def test_backend_cases_at_older_intermediate_opsets(target):
    """test_backend.py's check (convert, compare with the case's outputs, refusals judged by the
    oracle) at the opsets between 7 and 11."""
    counts = INTERMEDIATE[target] = collections.Counter()
    problems = []
    for case in backend.CASES:
        if backend.default_opset(case.model) == target:
            continue
        outcome, detail, keys = backend._classify(case, target)
        counts["tried"] += 1
        if outcome == "refused-expressible" and keys and all(k in INTERMEDIATE_GAPS or k in backend.KNOWN_GAPS for k in keys):
            outcome = "refused-expressible (known gap)"
        counts[outcome] += 1
        if outcome.startswith("refused-expressible (known gap)"):
            continue
        if outcome.startswith("refused-expressible") or outcome.startswith("defect"):
            if (case.name, target) in backend.KNOWN_DEFECTS:
                counts["known defect"] += 1
                continue
            problems.append(f"{case.name} -> {target}: {outcome}: {detail}" + (f" [gap keys {keys}]" if keys else ""))
    assert not problems, f"{len(problems)} problem(s) converting to {target}:\n" + "\n".join(problems[:60])
