"""Reading a value as a constant: an initializer (not a graph input), or a Constant node's value.

Inside functions there are no initializers and onnx_ir leaves a Constant node's output
without ``const_value``: the rewrites read the node's attribute instead.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["constant_array", "add_constant", "const_ints", "named_dims"]



def constant_array(value: ir.Value | None, max_size: int = 1 << 16) -> np.ndarray | None:
    """The value of ``value`` when it is a known constant of at most ``max_size`` elements:
    onnx_ir's ``get_const_tensor``, except that a graph input (an overridable initializer) and a
    malformed Constant node are not constants."""
    if value is None or value.is_graph_input():
        return None
    try:
        tensor = ir.convenience.get_const_tensor(value)
    except ValueError:  # a Constant node with several attributes or outputs
        return None
    if tensor is None or tensor.size > max_size:
        return None
    return tensor.numpy()


def add_constant(graph, anchor: ir.Node, array: np.ndarray, hint: str) -> ir.Value:
    """A new constant holding ``array``: an initializer named after ``hint`` (made unique) in a
    graph, a Constant node inserted before ``anchor`` in a function."""
    tensor = ir.tensor(array)
    if isinstance(graph, ir.Graph):
        name, i = hint, 0
        while name in graph.initializers:
            i += 1
            name = f"{hint}_{i}"
        value = ir.Value(name=name, type=ir.TensorType(tensor.dtype), shape=tensor.shape, const_value=tensor)
        graph.register_initializer(value)
        return value
    node = ir.node("Constant", [], attributes={"value": tensor})
    graph.insert_before(anchor, node)
    out = node.outputs[0]
    out.const_value, out.dtype, out.shape = tensor, tensor.dtype, tensor.shape
    return out


def const_ints(value: ir.Value | None) -> list[int] | None:
    """A short constant 1-D int64/int32 vector (axes, starts, a shape) as a list of ints."""
    array = constant_array(value, max_size=64)
    if array is None or array.dtype not in (np.int64, np.int32) or array.ndim != 1:
        return None
    return [int(v) for v in array]


def named_dims(value: ir.Value | None) -> tuple | None:
    """The dims of ``value`` as ints or ``("sym", name)`` (equal names are equal sizes); None
    when the rank or an unnamed dim is unknown."""
    if value is None or value.shape is None:
        return None
    dims = []
    for d in value.shape.dims:
        if isinstance(d, int):
            dims.append(d)
        elif isinstance(d, ir.SymbolicDim) and d.value:
            dims.append(("sym", d.value))
        else:
            return None
    return tuple(dims)
