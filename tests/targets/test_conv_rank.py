"""``ConvInteger`` / ``rank_4`` (rewriter/targets/conv_rank.py, LiteRT's ``rewrite_forms``): a 1-D
ConvInteger (piper_tashkeel's quantized convolutions, written by the QLinearConv "integer" form) is
refused by LiteRT as a custom op; written as a 2-D one over a unit axis it gives ONNX Runtime's int32
sums (the oracle: ONNX Runtime's run of the model as it was), and LiteRT runs it where its venv is."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from rewriter.convert.for_target import convert_for
from rewriter.targets.conv_rank import conv_integer_rank_4
from tests.convert.quant_models import ort_run, quant_model

RNG = np.random.default_rng(7)
X = RNG.integers(0, 256, (2, 8, 24)).astype(np.uint8)


def _conv1d(opset=13, group=1, **attrs):
    w = RNG.integers(-127, 128, (16, 8 // group, 3)).astype(np.int8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], name="conv", group=group, **attrs)
    out = ort_run(quant_model([node], [helper.make_tensor_value_info("x", T.UINT8, [2, 8, 24])],
                              [helper.make_tensor_value_info("y", T.INT32, None)],
                              [("w", w), ("xz", np.uint8(128))], opset=opset), {"x": X})
    return quant_model([node], [helper.make_tensor_value_info("x", T.UINT8, [2, 8, 24])],
                       [helper.make_tensor_value_info("y", T.INT32, list(out.shape))],
                       [("w", w), ("xz", np.uint8(128))], opset=opset)


@pytest.mark.parametrize("opset,attrs", [
    (13, {"pads": [1, 1]}),
    (13, {"pads": [2, 0], "strides": [2], "dilations": [2], "group": 2}),
    (11, {"pads": [0, 1], "strides": [3]}),  # Unsqueeze / Squeeze with axes attributes
    (13, {"auto_pad": "SAME_UPPER"}),
])
def test_a_1d_conv_integer_is_written_as_2d(opset, attrs):
    model = _conv1d(opset, **attrs)
    want = ort_run(model, {"x": X})
    notes = conv_integer_rank_4(model, "R 1.0")
    assert len(notes) == 1 and "'conv'" in notes[0]
    assert [n.op_type for n in model.graph.node] == ["Unsqueeze", "ConvInteger", "Squeeze"]
    assert "w" not in {t.name for t in model.graph.initializer}  # the 1-D weight nothing reads
    onnx.checker.check_model(model, full_check=True)
    np.testing.assert_array_equal(ort_run(model, {"x": X}), want)


def test_what_is_left():
    fed = _conv1d()
    fed.graph.node.insert(0, helper.make_node("Identity", ["w"], ["w_fed"]))
    fed.graph.node[1].input[1] = "w_fed"
    assert conv_integer_rank_4(fed, "R 1.0") == []  # a weight no initializer holds
    shared = _conv1d()
    shared.graph.node.append(helper.make_node("Cast", ["w"], ["w_float"], to=T.FLOAT))
    shared.graph.output.append(helper.make_tensor_value_info("w_float", T.FLOAT, [16, 8, 3]))
    assert len(conv_integer_rank_4(shared, "R 1.0")) == 1
    assert "w" in {t.name for t in shared.graph.initializer}  # still read by the Cast
    x2 = RNG.integers(0, 256, (1, 8, 6, 6)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"])
    two_d = quant_model([node], [helper.make_tensor_value_info("x", T.UINT8, list(x2.shape))],
                        [helper.make_tensor_value_info("y", T.INT32, [1, 4, 4, 4])],
                        [("w", RNG.integers(-127, 128, (4, 8, 3, 3)).astype(np.int8))], opset=13)
    assert conv_integer_rank_4(two_d, "R 1.0") == []


def test_only_litert_rewrites_it():
    result, _ = convert_for(_conv1d(pads=[1, 1]), runtime="tract==0.23")
    assert [n.op_type for n in result.graph.node] == ["ConvInteger"]
    result, report = convert_for(_conv1d(pads=[1, 1]), runtime="litert==2.6")
    assert [n.op_type for n in result.graph.node] == ["Unsqueeze", "ConvInteger", "Squeeze"]
    assert any("1-D ConvInteger" in n for n in report.target_notes)


def test_litert_runs_the_2d_form():
    from tests.targets.runtime_runs import run_in

    model = _conv1d(pads=[1, 1])
    want = ort_run(model, {"x": X})
    assert not run_in("litert", "2.6", model, {"x": X})["ok"]  # ONNX_CONVINTEGER
    result, _ = convert_for(model, runtime="litert==2.6")
    got = run_in("litert", "2.6", result, {"x": X})
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0].reshape(want.shape), want)
