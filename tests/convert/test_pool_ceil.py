"""ceil_mode=1 going below opset 10 (where it does not exist), when it changes the output size:
floor with the end padding that gives the same windows, for MaxPool and for an AveragePool that
does not count pads; an AveragePool that counts pads stays refused.

Oracle: ONNX Runtime on the original (opset 10+) and on the result (7-9), bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model
from rewriter.convert.planner import ConversionBlocked
from tests.oracle import assert_valid, run

F = TensorProto.FLOAT


def _pool(op, shape, opset=12, **attrs):
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="pool", ceil_mode=1, **attrs)], "g",
                              [helper.make_tensor_value_info("x", F, shape)],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return onnx.shape_inference.infer_shapes(model)


CASES = [  # (op, input shape, attributes)
    ("MaxPool", [1, 2, 14, 14], dict(kernel_shape=[3, 3], strides=[2, 2])),  # squeezenet's
    ("MaxPool", [1, 1, 7, 9], dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 0, 1])),
    ("MaxPool", [1, 1, 10], dict(kernel_shape=[3], strides=[3], auto_pad="VALID")),
    ("AveragePool", [1, 2, 14, 14], dict(kernel_shape=[3, 3], strides=[2, 2])),
    ("AveragePool", [1, 1, 7, 9], dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 0, 1])),
]


@pytest.mark.parametrize("target", [7, 8, 9])
@pytest.mark.parametrize("op, shape, attrs", CASES)
def test_ceil_mode_as_end_padding(op, shape, attrs, target):
    model = _pool(op, shape, **attrs)
    converted, report = convert_model(model, target)
    assert_valid(converted)
    assert report.changes[f"{op} ceil_mode=1 -> floor with more end padding"] == 1
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) - 3  # all negative: pads ignored
    want, got = run(model, {"x": x})[0], run(converted, {"x": x})[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_an_average_that_counts_pads_is_refused():
    model = _pool("AveragePool", [1, 1, 14, 14], kernel_shape=[3, 3], strides=[2, 2], count_include_pad=1)
    with pytest.raises(ConversionBlocked, match="'pool'.*ceil_mode=1 exists only from opset 10"):
        convert_model(model, 9)
