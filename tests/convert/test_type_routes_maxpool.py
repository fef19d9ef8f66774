"""MaxPool on int8/uint8 below 12 (QOperator quantization leaves a CNN's MaxPool on uint8): through
float32 where every window holds an element of x, compared with ONNX Runtime; refused otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from tests.convert.support.feature_util import TensorProto, converts, helper, model, refused

RNG = np.random.default_rng(7)


def _maxpool(elem, dims=(1, 2, 7, 7), outputs=("y",), **attrs):
    attrs = {"kernel_shape": [3, 3], **attrs}
    node = helper.make_node("MaxPool", ["x"], list(outputs), name="pool", **attrs)
    outs = [("y", elem, None)] + ([("i", TensorProto.INT64, None)] if len(outputs) > 1 else [])
    m = model([node], 12, [("x", elem, list(dims))], outs, infer=False)
    import onnx

    return onnx.shape_inference.infer_shapes(m)


def _x(elem, dims=(1, 2, 7, 7)):
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, size=dims).astype(dtype)
    x.flat[:4] = [info.min, info.max, info.min, info.max]  # the extremes, as the type holds them
    return x


@pytest.mark.parametrize("elem", [TensorProto.UINT8, TensorProto.INT8])
@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 2]}, {"pads": [1, 1, 1, 1], "strides": [2, 2]},
                                   {"pads": [2, 0, 1, 2]}, {"auto_pad": "VALID"}])
@pytest.mark.parametrize("target", [11, 10])
def test_an_8_bit_maxpool_goes_below_12_through_float(elem, attrs, target):
    result, report = converts(_maxpool(elem, **attrs), target, {"x": _x(elem)})
    assert [n.op_type for n in result.graph.node] == ["Cast", "MaxPool", "Cast"]
    assert result.graph.node[-1].name == "pool"
    assert report.changes["MaxPool on 8-bit integers -> through float"] == 1


def test_a_float_maxpool_is_kept():
    result, _ = converts(_maxpool(TensorProto.FLOAT), 11, {"x": RNG.standard_normal((1, 2, 7, 7)).astype(np.float32)})
    assert [n.op_type for n in result.graph.node] == ["MaxPool"]


@pytest.mark.parametrize("attrs, fragment", [
    ({"ceil_mode": 1}, "floor mode"), ({"dilations": [2, 2]}, "dilations of 1"),
    ({"pads": [3, 0, 0, 0]}, "pads smaller than the kernel"), ({"auto_pad": "SAME_UPPER"}, "explicit pads")])
def test_where_a_window_may_be_padding_only_it_is_refused(attrs, fragment):
    refused(_maxpool(TensorProto.UINT8, **attrs), 11, "'pool'", "12 -> 11", "through float", fragment)


def test_indices_are_refused():
    refused(_maxpool(TensorProto.UINT8, outputs=("y", "i")), 11, "'pool'", "no Indices output")
