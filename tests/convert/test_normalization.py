"""MeanVarianceNormalization 9 <-> 13, and the missing-default-axes defect (full_check)."""

from __future__ import annotations

import onnx
import pytest

from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, helper, model, np, refused,
                                        run_backend_case)

X = np.random.default_rng(0).normal(size=[2, 3, 4, 5]).astype(np.float32)


def _mvn(opset, elem=TensorProto.FLOAT, **attrs):
    return model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn", **attrs)], opset,
                 [("x", elem, [2, 3, 4, 5])], [("y", elem, [2, 3, 4, 5])], infer=False)


@pytest.mark.parametrize("source,target", [(9, 13), (9, 15), (9, 18), (9, LATEST), (13, 9), (LATEST, 9)])
@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1, 2]])
def test_converts_and_passes_full_check(source, target, axes):
    """Regression: without axes the result used to fail check_model(full_check=True) (function
    body inference: onnx does not bind @axes to the default); the adapters write [0, 2, 3]."""
    m = _mvn(source, **({} if axes is None else {"axes": axes}))
    result, _ = converts(m, target, {"x": X})  # assert_valid runs check_model(full_check=True)
    onnx.checker.check_model(result, full_check=True)
    assert list(result.graph.node[0].attribute[0].ints) == (axes or [0, 2, 3])


@pytest.mark.parametrize("target", [15, 18, LATEST])
def test_from_13_up_passes_full_check(target):
    """Regression: no schema step between 13 and 15+, so the registry normalizer writes the axes."""
    result, _ = converts(_mvn(13), target, {"x": X})
    onnx.checker.check_model(result, full_check=True)
    assert list(result.graph.node[0].attribute[0].ints) == [0, 2, 3]


def test_bfloat16_is_refused_below_13():
    refused(_mvn(13, elem=TensorProto.BFLOAT16, axes=[0, 2, 3]), 9, "'mvn'", "bfloat16", "13 -> 9")


@pytest.mark.parametrize("case", cases("MeanVarianceNormalization"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)


def _gn(opset, scale, bias, const=True, x_shape=(2, 4, 3)):
    groups = 2
    inits = ([helper.make_tensor("s", TensorProto.FLOAT, [len(scale)], scale),
              helper.make_tensor("b", TensorProto.FLOAT, [len(bias)], bias)] if const else [])
    inputs = [("x", TensorProto.FLOAT, list(x_shape))] + ([] if const else [("s", TensorProto.FLOAT, [len(scale)]),
                                                                           ("b", TensorProto.FLOAT, [len(bias)])])
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn", num_groups=groups)
    return model([node], opset, inputs, [("y", TensorProto.FLOAT, list(x_shape))], initializers=inits)


GX = np.random.default_rng(0).normal(size=[2, 4, 3]).astype(np.float32)


@pytest.mark.parametrize("const,x_shape", [(True, (2, 4, 3)), (False, (2, 4, 3)), (False, (2, "c", 3))])
def test_group_norm_per_group_goes_up(const, x_shape):
    m = _gn(18, [1.5, -2.0], [0.5, 0.25], const, x_shape)
    feeds = {"x": GX} if const else {"x": GX, "s": np.array([1.5, -2.0], np.float32),
                                     "b": np.array([0.5, 0.25], np.float32)}
    from tests.convert.support.feature_util import reference
    result, _ = converts(m, 21, feeds, expected=reference(m, feeds), rtol=1e-5)
    assert [n.op_type for n in result.graph.node][-1] == "GroupNormalization"


@pytest.mark.parametrize("target", [18, 20])
def test_group_norm_21_to_a_deprecated_18_is_expanded(target):
    """GroupNormalization-18 is deprecated (the checker refuses it): going there, the node is
    expanded into GroupNormalization-21's function body instead."""
    m = _gn(21, [1.0, 2.0, 0.5, 1.5], [0.0, 0.1, -0.2, 0.3])
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)}
    result, report = converts(m, target, feeds, rtol=1e-5)
    assert report.expanded["GroupNormalization"] == 1
    assert "GroupNormalization" not in {n.op_type for n in result.graph.node}
