"""Constant values in scope: initializers (not graph inputs) and Constant nodes.

Reading a tensor's data is the caller's business (external data lives beside the model
file): every lookup takes a ``read_tensor`` callback, ``TensorProto -> numpy array``, such
as :func:`rewriter.io.tensor_reader`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from rewriter.graph.traversal import Scope, definition
from rewriter.graph.schemas import is_default_domain

__all__ = ["TensorReader", "constant_value", "constant_node_value"]

TensorReader = Callable[[onnx.TensorProto], np.ndarray]


def constant_node_value(node: onnx.NodeProto, read_tensor: TensorReader) -> np.ndarray | None:
    """The value a Constant node produces, or None when it comes from a function attribute."""
    for attr in node.attribute:
        if attr.ref_attr_name:  # value = @param inside a function: known only at the call site
            return None
        if attr.name == "value":
            return read_tensor(attr.t)
        if attr.name == "value_ints":
            return np.array(list(attr.ints), dtype=np.int64)
        if attr.name == "value_int":
            return np.array(attr.i, dtype=np.int64)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), dtype=np.float32)
        if attr.name == "value_float":
            return np.array(attr.f, dtype=np.float32)
    return None


def constant_value(name: str, scope: Scope, read_tensor: TensorReader) -> np.ndarray | None:
    """The value of ``name`` as seen from ``scope`` when it is a constant, else None.

    A constant is an initializer that is not also an input of its graph, or the output
    of a Constant node, in ``scope`` or an enclosing one; the nearest definition wins.
    """
    kind, thing, _ = definition(name, scope)
    if kind == "node" and thing.op_type == "Constant" and is_default_domain(thing.domain):
        return constant_node_value(thing, read_tensor)
    if kind == "initializer":
        return read_tensor(thing)
    return None
