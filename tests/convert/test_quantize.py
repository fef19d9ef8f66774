"""QuantizeLinear / DequantizeLinear across 13 (axis), 19 (float8, saturate), 21 (block_size,
output_dtype), 23 (scale type, precision, output_dtype)."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import (TensorProto, cases, converts, helper, model, np, refused,
                                        run_backend_case)

SRC = 25  # ONNX Runtime runs QuantizeLinear up to 25
X = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)


def _q(opset, scale_shape=(), zero_point=TensorProto.UINT8, **attrs):
    scale = np.full(scale_shape, 0.05, dtype=np.float32)
    inits = [helper.make_tensor("s", TensorProto.FLOAT, list(scale_shape), scale.flatten().tolist())]
    names = ["x", "s"]
    out_type = attrs.get("output_dtype") or zero_point or TensorProto.UINT8
    if zero_point:
        inits.append(helper.make_tensor("z", zero_point, list(scale_shape), np.full(scale_shape, 3).flatten().tolist()))
        names.append("z")
    q = helper.make_node("QuantizeLinear", names, ["q"], name="quant", **attrs)
    dq = helper.make_node("DequantizeLinear", ["q", *names[1:]] if zero_point else ["q", "s"], ["y"], name="dequant",
                          **{k: v for k, v in attrs.items() if k in ("axis",)})
    return model([q, dq], opset, [("x", TensorProto.FLOAT, [2, 3, 4])],
                 [("q", out_type, [2, 3, 4]), ("y", TensorProto.FLOAT, [2, 3, 4])], initializers=inits)


@pytest.mark.parametrize("target", [10, 13, 19, 21, 23])
@pytest.mark.parametrize("zero_point", [TensorProto.UINT8, TensorProto.INT8, None])
def test_per_tensor_round_trips(target, zero_point):
    m = _q(SRC, zero_point=zero_point, saturate=1, block_size=0, precision=0)
    result, report = converts(m, target, {"x": X})
    assert not report.version_converter_called


def test_output_dtype_without_zero_point_becomes_a_zero_zero_point():
    node_attrs = {"output_dtype": TensorProto.INT8}
    m = _q(SRC, zero_point=None, **node_attrs)
    result, _ = converts(m, 19, {"x": X})
    assert len(result.graph.node[0].input) == 3


def test_per_axis_goes_down_to_13_not_10():
    m = _q(SRC, scale_shape=(3,), axis=1)
    converts(m, 13, {"x": X})
    refused(m, 10, "'quant'", "13 -> 10", "per-axis quantization exists only from opset 13")


@pytest.mark.parametrize("zero_point", [TensorProto.UINT8, TensorProto.INT8, None])
@pytest.mark.parametrize("axis", [1, -1, 0])
@pytest.mark.parametrize("const", [True, False])
def test_per_axis_dequantize_below_13_is_cast_sub_mul(zero_point, axis, const):
    rng = np.random.default_rng(3)
    dims = [2, 3, 4]
    c = dims[axis]
    dtype = helper.tensor_dtype_to_np_dtype(zero_point or TensorProto.UINT8)
    x = rng.integers(0, 100, size=dims).astype(dtype)
    scale = rng.uniform(0.01, 0.1, size=[c]).astype(np.float32)
    zp = rng.integers(0, 20, size=[c]).astype(dtype)
    names = ["x", "s"] + (["z"] if zero_point else [])
    values = {"s": scale, "z": zp}
    graph_inputs = [("x", zero_point or TensorProto.UINT8, dims)]
    inits = []
    for n in names[1:]:
        t = TensorProto.FLOAT if n == "s" else zero_point
        if const:
            inits.append(helper.make_tensor(n, t, [c], values[n].tolist()))
        else:
            graph_inputs.append((n, t, [c]))
    node = helper.make_node("DequantizeLinear", names, ["y"], name="dq", axis=axis)
    m = model([node], 13, graph_inputs, [("y", TensorProto.FLOAT, dims)], initializers=inits)
    feeds = {"x": x} if const else {"x": x, **{n: values[n] for n in names[1:]}}
    result, _ = converts(m, 10, feeds)
    assert result.graph.node[-1].op_type == "Mul" and result.graph.node[-1].name == "dq"


def test_refusals():
    refused(_q(SRC, block_size=2, scale_shape=(2, 3, 2), axis=2), 19, "'quant'", "21 -> 19", "block_size=2")
    refused(_q(SRC, zero_point=TensorProto.FLOAT8E4M3FN, saturate=0), 18, "'quant'", "tensor(float8e4m3fn)")
    refused(_q(SRC, precision=TensorProto.FLOAT16), 21, "'quant'", "23 -> 21", "precision=float16")


@pytest.mark.parametrize("case", cases("QuantizeLinear", "DequantizeLinear"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
