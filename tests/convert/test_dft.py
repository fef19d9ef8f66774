"""DFT across opset 20 (axis attribute, default 1 <-> optional scalar input, default -2)."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import TensorProto, assert_valid, cases, convert_model, helper, model, np, refused, run
from tests.convert.support.moves_util import constantized

F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = np.random.default_rng(0).normal(size=[2, 5, 6, 1]).astype(np.float32)


def _close(expected, got):
    """FFT results: the runtimes sum in different orders, so the tolerance follows the magnitude."""
    for e, g in zip(expected, got):
        e, g = np.asarray(e), np.asarray(g)
        assert e.shape == g.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(e).max())))


def _converted(m, target, feeds, expected=None):
    result, _ = convert_model(m, target)
    assert_valid(result)
    _close(run(m, feeds) if expected is None else expected, run(result, feeds))
    return result


@pytest.mark.parametrize("axis", [None, 1, 2, -2])
def test_axis_attribute_up_and_back(axis):
    attrs = {} if axis is None else {"axis": axis}
    m = model([helper.make_node("DFT", ["x"], ["y"], name="dft", **attrs)], 17, [("x", F, [2, 5, 6, 1])],
              [("y", F, None)])
    up = _converted(m, 20, {"x": X})
    assert len(up.graph.node[0].input) == 3  # the default 1 is written out: DFT-20's default is -2
    down = _converted(up, 17, {"x": X}, expected=run(m, {"x": X}))
    assert list(down.graph.node[0].input) == ["x"]


def test_absent_axis_input_down_is_minus_two():
    m = model([helper.make_node("DFT", ["x"], ["y"], name="dft")], 20, [("x", F, [2, 5, 6, 1])], [("y", F, None)])
    down = _converted(m, 17, {"x": X})
    assert down.graph.node[0].attribute[0].i == -2


def test_computed_axis_refused():
    m = model([helper.make_node("DFT", ["x", "", "a"], ["y"], name="dft")], 20,
              [("x", F, [2, 5, 6, 1]), ("a", I64, [])], [("y", F, None)])
    refused(m, 19, "'dft'", "DFT 20 -> 17", "axis input 'a' is not a constant")


@pytest.mark.parametrize("case", [c for c in cases("DFT") if len(c.model.graph.input) > 1], ids=lambda c: c.name)
def test_backend_cases_to_17(case):
    k = constantized(case)
    inputs, expected = k.data_sets[0]
    feeds = {i.name: np.asarray(v) for i, v in zip(k.model.graph.input, inputs)}
    source = next(o.version for o in k.model.opset_import if o.domain == "")
    for target in {17, 20} - {source}:
        _converted(k.model, target, feeds, expected=[np.asarray(e) for e in expected])
