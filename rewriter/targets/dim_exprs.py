"""Dim expressions read from ``Shape``: which node reads one dim, a lower bound of an integer
expression of dims, and when a division of one is exact on TVM's dims (its dims floor where ONNX
truncates; :mod:`rewriter.targets.dim_scalars` writes such expressions on scalars)."""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.graph import traversal
from rewriter.graph.attributes import attribute_int
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.restriction_lookups import constant_array

__all__ = ["exact_division", "gathers_a_dim", "lowest", "one_dim_shape"]


def exact_division(node: onnx.NodeProto, scope: traversal.Scope) -> bool:
    """``node`` (a Div) divides a dim expression that cannot be negative by a positive int64
    constant: truncation (ONNX) and floor division (TVM's on dims) agree (the resampler's output
    length, (160 N + 440) / 441)."""
    divisor = constant_array(node.input[1], scope) if len(node.input) == 2 else None
    if divisor is None or divisor.size != 1 or divisor.dtype != np.int64 or divisor.item() <= 0:
        return False
    low = lowest(node.input[0], scope)
    return low is not None and low >= 0


def lowest(name: str, scope: traversal.Scope, depth: int = 0) -> int | None:
    """A lower bound of the int64 dim expression ``name`` (a dim is at least 0), or None."""
    value = constant_array(name, scope)
    if value is not None:
        return int(value.reshape(-1)[0]) if value.size == 1 and value.dtype == np.int64 else None
    kind, node, where = traversal.definition(name, scope)
    if kind != "node" or where is not scope or depth > 32 or not is_default_domain(node.domain):
        return None
    if node.op_type == "Gather" and gathers_a_dim(node, scope) or one_dim_shape(node) is not None:
        return 0
    if node.op_type in ("Squeeze", "Unsqueeze") or node.op_type == "Cast" and attribute_int(node, "to") == onnx.TensorProto.INT64:
        return lowest(node.input[0], scope, depth + 1)
    if node.op_type not in ("Add", "Sub", "Mul", "Div") or len(node.input) != 2:
        return None
    a = lowest(node.input[0], scope, depth + 1)
    if a is None:
        return None
    if node.op_type == "Sub":  # minus a constant only (a dim has no upper bound)
        c = constant_array(node.input[1], scope)
        return a - int(c.reshape(-1)[0]) if c is not None and c.size == 1 and c.dtype == np.int64 else None
    if node.op_type == "Div":
        return a // int(constant_array(node.input[1], scope).item()) if a >= 0 and exact_division(node, scope) else None
    b = lowest(node.input[1], scope, depth + 1)
    if b is None:
        return None
    return a + b if node.op_type == "Add" else (a * b if a >= 0 and b >= 0 else None)


def one_dim_shape(node: onnx.NodeProto) -> int | None:
    """k for a Shape with start k >= 0 and end k + 1 (one dim), else None."""
    if node.op_type != "Shape" or not is_default_domain(node.domain):
        return None
    attrs = {a.name: a.i for a in node.attribute}
    start, end = attrs.get("start"), attrs.get("end")
    return start if start is not None and end is not None and start >= 0 and end == start + 1 else None


def gathers_a_dim(node: onnx.NodeProto, scope: traversal.Scope) -> bool:
    """``node`` (a Gather) reads one dim of a Shape (without start / end) by a constant index."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    kind, shape, _ = traversal.definition(node.input[0], scope)
    if axis != 0 or kind != "node" or shape.op_type != "Shape" or shape.attribute:
        return False
    index = constant_array(node.input[1], scope)
    return index is not None and index.size == 1 and index.ndim <= 1
