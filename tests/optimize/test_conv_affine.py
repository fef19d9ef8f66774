"""Add of a per-channel constant after a bias-less Conv/ConvTranspose folded into its bias, Mul
of one after a Conv into its weights and bias: the result compared with ONNX Runtime on the
original, then each condition one by one."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.optimize.conv_affine import FoldChannelAffineIntoConvPass
from tests.optimize.common import ops, optimize_and_compare, run_pass

F = onnx.TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _model(bias_shape=(1, 4, 1, 1), *, op="Conv", swap=False, conv_bias=False, extra_reader=False,
           bias_is_input=False, group=1, conv_out_is_output=False, after="Add", weights_are_input=False):
    # 4 output channels: Conv W is [4, C_in / group, 3, 3], ConvTranspose W [C_in, 4 / group, 3, 3]
    in_channels = 3 if group == 1 else 4
    w_shape = (4, in_channels // group, 3, 3) if op == "Conv" else (in_channels, 4 // group, 3, 3)
    inits = [nh.from_array(RNG.standard_normal(w_shape).astype(np.float32), "w"),
             nh.from_array(RNG.standard_normal(bias_shape).astype(np.float32), "b")]
    conv_inputs = ["x", "w"]
    if conv_bias:
        inits.append(nh.from_array(RNG.standard_normal(4).astype(np.float32), "cb"))
        conv_inputs.append("cb")
    nodes = [h.make_node(op, conv_inputs, ["c"], pads=[1, 1, 1, 1], group=group),
             h.make_node(after, ["b", "c"] if swap else ["c", "b"], ["y"])]
    outputs = [h.make_tensor_value_info("y", F, list(np.broadcast_shapes((1, 4, 5, 5), bias_shape)))]
    if extra_reader:
        nodes.append(h.make_node("Relu", ["c"], ["r"]))
        outputs.append(h.make_tensor_value_info("r", F, [1, 4, 5, 5]))
    if conv_out_is_output:
        outputs.append(h.make_tensor_value_info("c", F, [1, 4, 5, 5]))
    inputs = [h.make_tensor_value_info("x", F, [1, in_channels, 5, 5])]
    if bias_is_input:
        inputs.append(h.make_tensor_value_info("b", F, list(bias_shape)))
    if weights_are_input:
        inputs.append(h.make_tensor_value_info("w", F, list(w_shape)))
    graph = h.make_graph(nodes, "g", inputs, outputs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def test_a_per_channel_add_becomes_the_conv_bias():
    for shape in ((1, 4, 1, 1), (4, 1, 1), (1,), ()):
        for swap in (False, True):
            result, _ = optimize_and_compare(_model(shape, swap=swap))
            assert ops(result) == ["Conv"], (shape, swap)
            assert len(result.graph.node[0].input) == 3
            assert [o.name for o in result.graph.output] == ["y"]


def test_conv_transpose_with_groups_takes_the_bias_too():
    result, _ = optimize_and_compare(_model((1, 4, 1, 1), op="ConvTranspose", group=2))
    assert ops(result) == ["ConvTranspose"]
    result, _ = optimize_and_compare(_model((1, 4, 1, 1), op="ConvTranspose"))
    assert ops(result) == ["ConvTranspose"]


def test_what_is_not_a_per_channel_constant_after_a_bias_less_conv_stays():
    cases = {"conv has a bias": dict(conv_bias=True),
             "conv output read twice": dict(extra_reader=True),
             "conv output is a graph output": dict(conv_out_is_output=True),
             "bias is an overridable input": dict(bias_is_input=True),
             "bias varies along H": dict(bias_shape=(1, 4, 5, 1)),
             "bias grows the output": dict(bias_shape=(2, 4, 1, 1)),
             "bias has more dims": dict(bias_shape=(1, 1, 4, 1, 1))}
    for why, kwargs in cases.items():
        model = _model(**kwargs)
        result, modified = run_pass(model, FoldChannelAffineIntoConvPass())
        assert not modified, why
        optimize_and_compare(model)


def test_the_pass_reports_what_it_folded():
    result, modified = run_pass(_model(), FoldChannelAffineIntoConvPass())
    assert modified and [n.op_type for n in result.graph] == ["Conv"]
    again, modified = run_pass(_model(conv_bias=True), FoldChannelAffineIntoConvPass())
    assert not modified and [n.op_type for n in again.graph] == ["Conv", "Add"]


def test_a_per_channel_mul_scales_the_conv_weights_and_bias():
    for conv_bias in (False, True):
        for shape in ((1, 4, 1, 1), (4, 1, 1), ()):
            result, _ = optimize_and_compare(_model(shape, after="Mul", conv_bias=conv_bias), rtol=1e-5)
            assert ops(result) == ["Conv"], (shape, conv_bias)
    result, _ = optimize_and_compare(_model(after="Mul", swap=True, group=1))
    assert ops(result) == ["Conv"]


def test_a_mul_stays_after_a_conv_transpose_or_overridable_weights():
    for kwargs in (dict(op="ConvTranspose", group=2), dict(weights_are_input=True), dict(extra_reader=True),
                   dict(bias_shape=(1, 4, 5, 1))):
        model = _model(after="Mul", **kwargs)
        _, modified = run_pass(model, FoldChannelAffineIntoConvPass())
        assert not modified, kwargs
        optimize_and_compare(model)
