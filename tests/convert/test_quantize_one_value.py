"""QuantizeLinear / DequantizeLinear with a scale of one value below opset 13: per tensor, whatever
``axis`` says (ONNX's reference and ONNX Runtime take a 1-element scale as per tensor), so the
axis goes and the scale and zero point become the scalars opset 10 takes. onnxruntime.quantization
writes such nodes for biases: a [1] scale, an int32 rank-1 x and the default axis 1 (or axis=1)."""

from __future__ import annotations

import pytest

from tests.convert.support.feature_util import TensorProto, converts, helper, model, np, refused

BIAS = np.array([1, -2, 3, 400], np.int32)


def _bias_dequantize(opset, scale_shape, zero_shape, axis, scale_as_input=False):
    inits = [helper.make_tensor("b", TensorProto.INT32, [4], BIAS.tolist()),
             helper.make_tensor("z", TensorProto.INT32, list(zero_shape), [0])]
    inputs = [("x", TensorProto.FLOAT, [4])]
    if scale_as_input:
        inputs.append(("s", TensorProto.FLOAT, list(scale_shape)))
    else:
        inits.append(helper.make_tensor("s", TensorProto.FLOAT, list(scale_shape), [0.01]))
    dq = helper.make_node("DequantizeLinear", ["b", "s", "z"], ["bias"], name="bias_dq",
                          **({} if axis is None else {"axis": axis}))
    add = helper.make_node("Add", ["x", "bias"], ["y"], name="add")
    return model([dq, add], opset, inputs, [("y", TensorProto.FLOAT, [4])], initializers=inits)


X = {"x": np.linspace(-1, 1, 4, dtype=np.float32)}


@pytest.mark.parametrize("target", [10, 11])
@pytest.mark.parametrize("scale_shape, zero_shape, axis", [
    ((1,), (), None),  # what onnxruntime.quantization writes (the default axis is 1)
    ((1,), (1,), 1), ((), (), 1), ((1,), (), 0), ((), (1,), None)])
def test_a_bias_dequantize_of_one_scale_goes_below_13(target, scale_shape, zero_shape, axis):
    result, report = converts(_bias_dequantize(17, scale_shape, zero_shape, axis), target, X)
    dq = next(n for n in result.graph.node if n.op_type == "DequantizeLinear")
    assert not [a for a in dq.attribute if a.name == "axis"]
    dims = {t.name: list(t.dims) for t in result.graph.initializer}
    assert dims[dq.input[1]] == [] and dims[dq.input[2]] == []
    assert report.own["DequantizeLinear"] == 1


def test_a_scale_of_one_value_that_is_no_constant_is_reshaped_to_a_scalar():
    m = _bias_dequantize(13, (1,), (), None, scale_as_input=True)
    result, _ = converts(m, 10, {**X, "s": np.array([0.25], np.float32)})
    ops = [n.op_type for n in result.graph.node]
    assert ops[:2] == ["Reshape", "DequantizeLinear"]


def test_a_quantize_of_one_scale_on_a_rank_1_input_goes_below_13():
    inits = [helper.make_tensor("s", TensorProto.FLOAT, [1], [0.05]),
             helper.make_tensor("z", TensorProto.UINT8, [1], [7])]
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant", axis=1)
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dequant", axis=1)
    m = model([q, dq], 13, [("x", TensorProto.FLOAT, [4])],
              [("q", TensorProto.UINT8, [4]), ("y", TensorProto.FLOAT, [4])], initializers=inits)
    result, _ = converts(m, 10, X)
    assert [len(n.attribute) for n in result.graph.node] == [0, 0]


def test_a_longer_scale_with_an_axis_out_of_range_is_still_refused():
    inits = [helper.make_tensor("b", TensorProto.INT32, [4], BIAS.tolist()),
             helper.make_tensor("s", TensorProto.FLOAT, [4], [0.01] * 4)]
    dq = helper.make_node("DequantizeLinear", ["b", "s"], ["y"], name="per_axis", axis=1)
    m = model([dq], 13, [], [("y", TensorProto.FLOAT, [4])], initializers=inits, infer=False)
    refused(m, 11, "'per_axis'", "axis 1 is out of range for rank 1")
