"""Helpers shared by the "attribute <-> input move" adapters (reduce, squeeze, split, slice,
pad, clip, topk, dropout, resize): an attribute becomes a constant input going up, a constant
input becomes the attribute going down. No adapter is registered here.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.graph.attributes import attribute, remove_attribute
from rewriter.convert.type_only import step_types_allowed
from rewriter.graph.constants import constant_node_value

__all__ = ["value_of", "input_name", "set_input", "trim_inputs", "attr_to_input", "constant_input",
           "ints_input_to_attr", "check_types", "float_exact"]


def input_name(node: onnx.NodeProto, index: int) -> str:
    """The name of input ``index`` ("" when absent)."""
    return node.input[index] if len(node.input) > index else ""


def set_input(node: onnx.NodeProto, index: int, name: str) -> None:
    """Put ``name`` at input ``index``, filling absent optional inputs before it with ""."""
    while len(node.input) <= index:
        node.input.append("")
    node.input[index] = name


def trim_inputs(node: onnx.NodeProto, keep: int | None = None) -> None:
    """Drop inputs from ``keep`` on (when given), then trailing absent ("") inputs."""
    if keep is not None:
        del node.input[keep:]
    while node.input and not node.input[-1]:
        del node.input[-1]


def attr_to_input(node, ctx, attr: str, index: int, dtype=np.int64, hint: str | None = None,
                  skip_empty: bool = False) -> bool:
    """Going up: attribute ``attr`` becomes the constant input ``index`` (an initializer in a
    graph, a Constant in a function; a reference to a calling function's INTS attribute becomes
    a Constant<value_ints = @ref>). Returns whether an input was made (False when the attribute
    is absent, or empty with ``skip_empty``)."""
    a = attribute(node, attr)
    if a is None:
        return False
    hint = hint or f"{node.op_type.lower()}_{attr}"
    if a.ref_attr_name:
        if a.type != onnx.AttributeProto.INTS or dtype is not np.int64:
            ctx.block(f"{attr} comes from the calling node's attribute '{a.ref_attr_name}', whose value "
                      f"the conversion cannot see")
        name = ctx.add_constant_reference(f"{hint}_{a.ref_attr_name}", a.ref_attr_name)
    else:
        value = onnx.helper.get_attribute_value(a)
        remove_attribute(node, attr)
        if skip_empty and isinstance(value, list) and not value:
            return False
        array = np.array(value, dtype=dtype)
        name = ctx.add_constant(hint, array)
    remove_attribute(node, attr)
    set_input(node, index, name)
    ctx.record(f"{node.op_type} {attr} attribute -> input")
    return True


def value_of(ctx, name: str):
    """ctx.constant(name), also for constants in the scope's body that its cached lookup has not
    seen yet (made earlier in this conversion), and integer shape computations that static
    shapes decide (:meth:`NodeContext.shape_value`)."""
    value = ctx.constant(name)
    if value is not None or not name:
        return value
    body = ctx.scope.body
    if not ctx.scope.is_function:
        inputs = {i.name for i in body.input}
        for t in body.initializer:
            if t.name == name and name not in inputs:
                return numpy_helper.to_array(t)
    else:
        for n in body.node:
            if n.op_type == "Constant" and name in n.output:
                return constant_node_value(n, numpy_helper.to_array)
    return ctx.shape_value(name)  # computed, but decided by static shapes and constants


def constant_input(node, ctx, index: int, what: str, below: int | None = None) -> np.ndarray | None:
    """Going down: the value of constant input ``index`` (None when absent); a non-constant
    input blocks, naming the input."""
    name = input_name(node, index)
    if not name:
        return None
    value = value_of(ctx, name)
    if value is None:
        where = f" needed below opset {below}" if below else ""
        ctx.block(f"{what} input '{name}' is not a constant, so it cannot become the {what} attribute{where}")
    return np.asarray(value)


def ints_input_to_attr(node, ctx, index: int, attr: str, below: int, allow_reference: bool = True
                       ) -> list[int] | None:
    """Going down: constant input ``index`` becomes INTS attribute ``attr`` and the input goes
    (trailing absent inputs too). Returns the values (None when the input is absent, [] and no
    attribute for a reference)."""
    name = input_name(node, index)
    if not name:
        trim_inputs(node, index)
        return None
    reference = ctx.constant_reference(name) if allow_reference else None
    if reference is not None:
        trim_inputs(node, index)
        ctx.maybe_unused(name)
        node.attribute.append(onnx.AttributeProto(name=attr, ref_attr_name=reference, type=onnx.AttributeProto.INTS))
        ctx.record(f"{node.op_type} {attr} input -> attribute")
        return []
    value = constant_input(node, ctx, index, attr, below)
    if value.ndim > 1 or value.dtype.kind not in "iu":
        ctx.block(f"{attr} input '{name}' must be a 1-D integer tensor, got {value.dtype} with shape "
                  f"{list(value.shape)}")
    values = [int(v) for v in value.reshape(-1)]
    remove_attribute(node, attr)
    node.attribute.append(onnx.helper.make_attribute(attr, values, attr_type=onnx.AttributeProto.INTS))
    trim_inputs(node, index)
    ctx.maybe_unused(name)
    ctx.record(f"{node.op_type} {attr} input -> attribute")
    return values


def check_types(node, ctx, a: int | None = None, b: int | None = None) -> None:
    """Every type the node uses must be allowed by schema ``b`` (default: the step's destination);
    the node must already have schema b's inputs."""
    a, b = (a, b) if a is not None else ctx.step
    reason = step_types_allowed(node, a, b, ctx.value_type)
    if reason is not None:
        ctx.block(reason)


def float_exact(value, elem_type: int | None) -> bool:
    """Whether the scalar ``value`` survives a round trip through a float32 attribute exactly
    (as the data type ``elem_type`` sees it)."""
    v = np.asarray(value).reshape(-1)[0]
    as_f32 = np.float32(v)
    if np.isnan(v):
        return True
    if elem_type == onnx.TensorProto.DOUBLE:
        return float(as_f32) == float(v)
    return True  # float32 and float16 values are exact in float32
