"""Constant across the steps that added its attribute forms: sparse_value (11) and
value_float(s)/value_int(s)/value_string(s) (12). Going down, the newer forms are written
as the ``value`` tensor they stand for (exact); going up nothing changes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.convert.registry import register

__all__: list[str] = []

_FORMS = {
    "value_float": lambda a: np.array(a.f, dtype=np.float32),
    "value_floats": lambda a: np.array(list(a.floats), dtype=np.float32),
    "value_int": lambda a: np.array(a.i, dtype=np.int64),
    "value_ints": lambda a: np.array(list(a.ints), dtype=np.int64),
    "value_string": lambda a: np.array(a.s, dtype=object),
    "value_strings": lambda a: np.array(list(a.strings), dtype=object),
}


def _as_value(node, ctx, attr: onnx.AttributeProto, tensor: onnx.TensorProto) -> None:
    tensor.name = ""
    del node.attribute[:]
    node.attribute.append(onnx.helper.make_attribute("value", tensor))
    ctx.record(f"Constant {attr.name} -> value")


@register("Constant", 12, 11, kind="new feature")
def constant_12_11(node, ctx) -> None:
    """value_float(s)/value_int(s)/value_string(s) become the ``value`` tensor."""
    for attr in node.attribute:
        if attr.name in _FORMS:
            if attr.ref_attr_name:
                ctx.block(f"{attr.name} comes from the calling node's attribute '{attr.ref_attr_name}', "
                          f"which Constant accepts only as value_* from opset 12")
            _as_value(node, ctx, attr, numpy_helper.from_array(_FORMS[attr.name](attr)))
            return


@register("Constant", 11, 9, kind="new feature")
def constant_11_9(node, ctx) -> None:
    """A sparse_value becomes the dense ``value`` tensor it stands for."""
    for attr in node.attribute:
        if attr.name == "sparse_value":
            if attr.ref_attr_name:
                ctx.block(f"sparse_value comes from the calling node's attribute '{attr.ref_attr_name}'")
            sparse = attr.sparse_tensor
            values = numpy_helper.to_array(sparse.values)
            indices = numpy_helper.to_array(sparse.indices)
            dense = np.zeros(int(np.prod(sparse.dims)), dtype=values.dtype)
            if indices.ndim == 2:  # one row of coordinates per value
                flat = np.ravel_multi_index(tuple(indices.T), tuple(sparse.dims)) if indices.size else indices
            else:
                flat = indices
            dense[np.asarray(flat, dtype=np.int64)] = values
            _as_value(node, ctx, attr, numpy_helper.from_array(dense.reshape(tuple(sparse.dims))))
            return


@register("Constant", 9, 11, kind="new feature")
@register("Constant", 11, 12, kind="new feature")
def _constant_up(node, ctx) -> None:
    """Newer Constant versions accept every older form: nothing to do."""


_CONSTANT_1_TYPES = {onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE}


@register("Constant", 9, 1, kind="rewrite")
def constant_9_1(node, ctx) -> None:
    """Constant-1 holds only float16/float/double: in a graph, another type becomes an
    initializer of the same name (exact; initializers take every type)."""
    attr = next((a for a in node.attribute if a.name == "value"), None)
    if attr is None or attr.ref_attr_name:
        ctx.block("a Constant whose value comes from the calling node's attribute cannot be checked "
                  "against Constant-1's types (float16, float, double)")
    if attr.t.data_type in _CONSTANT_1_TYPES:
        return
    if ctx.scope.is_function:
        ctx.block(f"Constant-1 holds only float16, float and double, and a function body cannot hold "
                  f"an initializer for this {onnx.helper.tensor_dtype_to_string(attr.t.data_type)} value")
    tensor = onnx.TensorProto()
    tensor.CopyFrom(attr.t)
    tensor.name = node.output[0]
    ctx.scope.body.initializer.append(tensor)
    ctx.remove()
    ctx.record("Constant -> initializer (type not in Constant-1)")


@register("Constant", 1, 9, kind="type-only")
def constant_1_9(node, ctx) -> None:
    """Constant-9 allows every type Constant-1 did."""
