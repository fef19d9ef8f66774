"""Helpers shared by the "new optional feature", "meaning change" and type-parameter adapters
(shape, reshape, cast, softmax, pooling, batchnorm, elementwise, gemm, rnn, ...).

No adapter is registered here.
"""

from __future__ import annotations

import onnx

from rewriter.graph.attributes import attribute, remove_attribute, value_of
from rewriter.convert.type_only import step_types_allowed
from rewriter.graph import traversal

__all__ = ["attr_value", "drop_default", "check_types", "tensor_type", "no_ref"]

_MISSING = object()


def no_ref(node, ctx, name: str) -> None:
    """Block when attribute ``name`` is a reference to a calling function's attribute (its value
    is then unknown to the conversion)."""
    attr = attribute(node, name)
    if attr is not None and attr.ref_attr_name:
        ctx.block(f"{name} comes from the calling node's attribute '{attr.ref_attr_name}', whose value "
                  f"the conversion cannot see")


def attr_value(node, ctx, name: str, default=None):
    """The value of attribute ``name`` (its default when absent); blocks on a function
    attribute reference."""
    attr = attribute(node, name)
    if attr is None:
        return default
    no_ref(node, ctx, name)
    return value_of(attr, decode=True)


def drop_default(node, ctx, name: str, default, since: int, why: str = "") -> None:
    """Going down across the step that added attribute ``name``: drop it when it is absent or at
    ``default`` (``default`` may be a callable telling whether a value is harmless), else block
    naming the attribute and the first opset that has it."""
    attr = attribute(node, name)
    if attr is None:
        return
    value = attr_value(node, ctx, name)
    harmless = default(value) if callable(default) else value == default
    if not harmless:
        ctx.block(f"{name}={value!r} exists only from opset {since}{why}")
    remove_attribute(node, name)
    ctx.record(f"{node.op_type} default {name} dropped")


def check_types(node, ctx, a: int | None = None, b: int | None = None) -> None:
    """Going down: every type the node uses must be allowed by schema ``b`` (default: the step's
    destination), as for a type-only step; the node must already have schema b's signature."""
    a, b = (a, b) if a is not None else ctx.step
    reason = step_types_allowed(node, a, b, ctx.value_type)
    if reason is not None:
        ctx.block(reason)


def tensor_type(elem_type: int | None, dims) -> onnx.TypeProto | None:
    """A tensor TypeProto (None when the element type is unknown); ``dims`` None = unknown rank."""
    if not elem_type:
        return None
    return onnx.helper.make_tensor_type_proto(elem_type, None if dims is None else list(dims))


def record_type(ctx, name: str, elem_type: int | None, dims) -> None:
    t = tensor_type(elem_type, dims)
    if t is not None:
        ctx.set_type(name, t)


def consumed(ctx, name: str) -> bool:
    """Whether some node of the node's scope (or of its subgraphs) or the scope's outputs read ``name``."""
    if not name:
        return False
    body = ctx.scope.body
    outputs = [o if isinstance(o, str) else o.name for o in body.output]
    if name in outputs:
        return True
    return any(name in n.input for n in traversal.all_nodes(body))


def add_typed_constant(ctx, hint: str, value) -> str:
    """ctx.add_constant, with the constant's type recorded for the steps that follow."""
    import numpy as np

    value = np.asarray(value)
    name = ctx.add_constant(hint, value)
    record_type(ctx, name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape))
    return name
