"""One node's outputs typed by ONNX's inference in an onnx_ir graph: unknown dims filled,
known ones kept, what ONNX cannot infer left alone."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_inference import infer_node


def _value(name, shape, dtype=ir.DataType.FLOAT):
    return ir.Value(name=name, type=None if dtype is None else ir.TensorType(dtype),
                    shape=None if shape is None else ir.Shape(shape))


def _node(op, inputs, output, domain="", **attrs):
    attributes = [ir.AttrInt64s(k, v) if isinstance(v, list) else ir.AttrInt64(k, v) for k, v in attrs.items()]
    return ir.Node(domain, op, inputs, attributes=attributes, outputs=[output])


def test_an_unknown_output_shape_is_filled():
    y = _value("y", None, None)
    assert infer_node(_node("Relu", [_value("x", ["batch", 3])], y), 13)
    assert y.dtype == ir.DataType.FLOAT and [str(d) for d in y.shape.dims] == ["batch", "3"]


def test_a_reshape_with_a_constant_shape_copies_the_symbolic_dim():
    shape = _value("s", [3], ir.DataType.INT64)
    shape.const_value = ir.tensor(np.array([0, 2, -1], np.int64))
    y = _value("y", None, None)
    assert infer_node(_node("Reshape", [_value("x", ["batch", 4, 6]), shape], y), 13)
    assert y.shape.dims[0] == ir.SymbolicDim("batch") and y.shape.dims[1:] == (2, 12)


def test_known_dims_are_kept_and_unknown_ones_filled():
    y = _value("y", [None, 4])
    assert infer_node(_node("Transpose", [_value("x", [4, "n"])], y, perm=[1, 0]), 13)
    assert y.shape.dims[0] == ir.SymbolicDim("n") and y.shape.dims[1] == 4
    z = _value("z", [5, "m"])  # declared dims are never replaced, even where inference differs
    assert not infer_node(_node("Identity", [_value("x2", ["a", 7])], z), 13)
    assert z.shape.dims[0] == 5 and z.shape.dims[1] == ir.SymbolicDim("m")
    w = _value("w", [5, None])
    assert infer_node(_node("Identity", [_value("x3", ["a", 7])], w), 13)
    assert w.shape.dims == (5, 7)


def test_what_onnx_cannot_infer_is_left_alone():
    y = _value("y", None, None)
    assert not infer_node(_node("Relu", [_value("x", [2], None)], y), 13)  # input type unknown
    assert y.shape is None and y.type is None
    custom = _value("c", None, None)
    assert not infer_node(_node("Relu", [_value("x3", [2])], custom, domain="custom"), 13)
    out = _value("o", None, None)  # ONNX's inference raises: [2] and [3] do not broadcast
    assert not infer_node(_node("Add", [_value("x4", [2]), _value("x5", [3])], out), 13)
    assert out.shape is None
