"""Scaler, Normalizer, Binarizer and Imputer lowered to standard ONNX: bit for bit what ONNX
Runtime's kernels compute, in ONNX Runtime and in onnx.reference, for every input type the kernel
takes; refusals where onnxruntime pairs attributes with another axis than broadcasting would."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto as T

from rewriter.errors import RewriterError
from rewriter.convert.lower_ops import lower_ops
from tests.convert.support.lowering_oracle import check_lowering, one_node

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TYPES = [(T.FLOAT, np.float32), (T.DOUBLE, np.float64), (T.INT64, np.int64), (T.INT32, np.int32)]
FLOATS = st.floats(-1e6, 1e6, width=32, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0, 1e-30, 3e38])


def _data(rng, dtype, shape=(6, 4)):
    x = (rng.normal(size=shape) * 10).astype(np.float32)
    if np.issubdtype(dtype, np.integer):
        return np.round(x).astype(dtype)
    x[0, 1] = np.nan
    x[1, :] = 0
    x[2, 0] = -0.0
    return x.astype(dtype)


@pytest.mark.parametrize("elem,dtype", TYPES)
@pytest.mark.parametrize("per_feature", [True, False])
def test_scaler(elem, dtype, per_feature):
    n = 4 if per_feature else 1
    model = one_node("Scaler", [("X", elem, [None, 4])], [("Y", T.FLOAT, [None, 4])],
                     scale=[1.5, 2.0, 3.0, -1.0][:n], offset=[0.1, 0.2, -0.3, 4.0][:n])
    check_lowering(model, {"X": _data(np.random.default_rng(0), dtype)})


def test_scaler_on_a_rank_one_input():
    model = one_node("Scaler", [("X", T.FLOAT, [3])], [("Y", T.FLOAT, [3])], scale=[1.5, 2.0, 3.0],
                     offset=[0.1, 0.2, -0.3])
    check_lowering(model, {"X": np.array([1, -2, 3], np.float32)})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FLOATS, min_size=3, max_size=3), st.lists(FLOATS, min_size=3, max_size=3),
       st.lists(FLOATS | st.just(float("nan")), min_size=6, max_size=6))
def test_scaler_any_values(scale, offset, x):
    model = one_node("Scaler", [("X", T.FLOAT, [None, 3])], [("Y", T.FLOAT, [None, 3])], scale=scale, offset=offset)
    check_lowering(model, {"X": np.array(x, np.float32).reshape(2, 3)})


def test_scaler_refuses_per_feature_values_on_an_unknown_rank():
    model = one_node("Scaler", [("X", T.FLOAT, None)], [("Y", T.FLOAT, None)], scale=[1.0, 2.0], offset=[0.0, 1.0])
    with pytest.raises(RewriterError, match="rank is unknown"):
        lower_ops(model)


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("elem,dtype", TYPES)
def test_normalizer(norm, elem, dtype):
    model = one_node("Normalizer", [("X", elem, [None, 4])], [("Y", T.FLOAT, [None, 4])], norm=norm)
    check_lowering(model, {"X": _data(np.random.default_rng(1), dtype)})


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer_rank_one_and_one_feature(norm):
    model = one_node("Normalizer", [("X", T.FLOAT, [5])], [("Y", T.FLOAT, [5])], norm=norm)
    check_lowering(model, {"X": np.array([3, -4, 0, 1e-20, 2], np.float32)})
    model = one_node("Normalizer", [("X", T.FLOAT, [None, 1])], [("Y", T.FLOAT, [None, 1])], norm=norm)
    check_lowering(model, {"X": np.array([[3], [-4], [0], [np.nan]], np.float32)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["MAX", "L1", "L2"]), st.lists(FLOATS | st.just(float("nan")), min_size=15, max_size=15))
def test_normalizer_any_values(norm, x):
    """Sums left to right, the kernel's order: bit-identical even where rounding depends on it."""
    model = one_node("Normalizer", [("X", T.FLOAT, [None, 5])], [("Y", T.FLOAT, [None, 5])], norm=norm)
    check_lowering(model, {"X": np.array(x, np.float32).reshape(3, 5)})


def test_normalizer_refuses_a_dynamic_width():
    model = one_node("Normalizer", [("X", T.FLOAT, [None, "w"])], [("Y", T.FLOAT, [None, "w"])], norm="L2")
    with pytest.raises(RewriterError, match="last dimension is not static"):
        lower_ops(model)


@pytest.mark.parametrize("threshold", [0.0, 0.5, -1.0])
def test_binarizer(threshold):
    model = one_node("Binarizer", [("X", T.FLOAT, [None, 4])], [("Y", T.FLOAT, [None, 4])], threshold=threshold)
    x = np.nan_to_num(_data(np.random.default_rng(2), np.float32))
    x[3, :] = [threshold, np.nextafter(np.float32(threshold), np.float32(9)), -np.inf, np.inf]
    check_lowering(model, {"X": x})


def test_binarizer_refuses_types_onnxruntime_has_no_kernel_for():
    model = one_node("Binarizer", [("X", T.DOUBLE, [None, 4])], [("Y", T.DOUBLE, [None, 4])])
    with pytest.raises(RewriterError, match="not one ONNX Runtime's kernel takes"):
        lower_ops(model)


@pytest.mark.parametrize("replaced", [float("nan"), 0.0, 2.5])
@pytest.mark.parametrize("values", [[1.0, 2.0, 3.0, 4.0], [7.0], [1.0, 2.0]])
def test_imputer_float(replaced, values):
    model = one_node("Imputer", [("X", T.FLOAT, [None, 4])], [("Y", T.FLOAT, [None, 4])],
                     imputed_value_floats=values, replaced_value_float=replaced)
    x = _data(np.random.default_rng(3), np.float32)
    x[4, :] = [2.5, np.nan, 0.0, -0.0]
    check_lowering(model, {"X": x})


@pytest.mark.parametrize("values", [[10, 20, 30, 40], [-1]])
def test_imputer_int64(values):
    model = one_node("Imputer", [("X", T.INT64, [None, 4])], [("Y", T.INT64, [None, 4])],
                     imputed_value_int64s=values, replaced_value_int64=3)
    check_lowering(model, {"X": np.array([[3, 1, 3, 0], [2, 3, 3, 3]], np.int64)})


def test_imputer_refuses_both_value_lists():
    model = one_node("Imputer", [("X", T.FLOAT, [None, 2])], [("Y", T.FLOAT, [None, 2])],
                     imputed_value_floats=[1.0], imputed_value_int64s=[1])
    with pytest.raises(RewriterError, match="exactly one of"):
        lower_ops(model)


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_signed_zeros_are_kept(norm):
    """A row whose norm is 0 is copied, -0.0 included (onnxruntime's Where alone would write +0.0)."""
    model = one_node("Normalizer", [("X", T.FLOAT, [None, 3])], [("Y", T.FLOAT, [None, 3])], norm=norm)
    x = np.array([[0.0, -0.0, 0.0], [1e-30, -0.0, -1e-30], [-0.0, -0.0, -0.0], [2.0, -0.0, 0.0]], np.float32)
    check_lowering(model, {"X": x})


def test_imputed_negative_zero():
    model = one_node("Imputer", [("X", T.FLOAT, [None, 2])], [("Y", T.FLOAT, [None, 2])],
                     imputed_value_floats=[-0.0, 1.0], replaced_value_float=float("nan"))
    check_lowering(model, {"X": np.array([[np.nan, np.nan], [-0.0, 0.0]], np.float32)})
