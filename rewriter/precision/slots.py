"""What an op's schema says about half precision, slot by slot.

For a node, each input and output slot is bound to a formal parameter of the op's schema
(``onnx.defs``): a type parameter (``T``) with its allowed types, or a fixed type such as
``tensor(float)`` (Resize's ``scales``). A type parameter bound to one slot only, an input,
is *free*: the node takes whatever type the value has among the allowed ones (Shape's
``T``, Cast's ``T1``, Resize's ``roi``), so it never needs a Cast there. The other type
parameters tie slots together: converting the node converts all their float slots at once.
"""

from __future__ import annotations

import dataclasses

import onnx
import onnx.defs

from rewriter.graph.schemas import is_default_domain, schema_at

__all__ = ["Slot", "NodeSlots", "node_slots", "first_half_opset", "HALF_TYPES"]

HALF_TYPES = {"float16": onnx.TensorProto.FLOAT16, "bfloat16": onnx.TensorProto.BFLOAT16}


@dataclasses.dataclass(frozen=True)
class Slot:
    """One input or output position of a node as its schema types it."""

    param: str | None  # the type parameter's name, None for a fixed type
    allowed: frozenset  # type strings the slot takes ("tensor(float16)", ...)
    free: bool = False  # a type parameter of this slot alone, on an input


@dataclasses.dataclass(frozen=True)
class NodeSlots:
    """The slots of one node (``inputs[i]`` for ``node.input[i]``), or empty when unknown."""

    since_version: int
    inputs: tuple
    outputs: tuple


def _formal(params, i: int):
    if i < len(params):
        return params[i]
    if params and params[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return params[-1]
    return None


def node_slots(node: onnx.NodeProto, opset: int | None) -> NodeSlots | None:
    """The slots of ``node`` at the default-domain ``opset``; None when it is not a
    default-domain op the installed onnx knows."""
    if not is_default_domain(node.domain) or opset is None:
        return None
    schema = schema_at(node.op_type, opset)
    if schema is None:
        return None
    constraints = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    formals_in = [_formal(schema.inputs, i) for i in range(len(node.input))]
    formals_out = [_formal(schema.outputs, i) for i in range(len(node.output))]
    if None in formals_in or None in formals_out:
        return None
    uses: dict[str, int] = {}
    for name, f in list(zip(node.input, formals_in)) + list(zip(node.output, formals_out)):
        if name and f.type_str in constraints:
            uses[f.type_str] = uses.get(f.type_str, 0) + 1

    def slot(f, is_input: bool) -> Slot:
        if f.type_str in constraints:
            free = is_input and uses.get(f.type_str, 0) == 1
            return Slot(f.type_str, constraints[f.type_str], free)
        return Slot(None, frozenset({f.type_str}))

    return NodeSlots(schema.since_version, tuple(slot(f, True) for f in formals_in),
                     tuple(slot(f, False) for f in formals_out))


def first_half_opset(node: onnx.NodeProto, opset: int, dtype: str, inputs, outputs) -> int | None:
    """The first opset after ``opset`` whose schema of ``node``'s op lets every slot at the
    positions ``inputs`` / ``outputs`` take ``dtype`` (``onnx.defs``, up to the newest opset the
    installed onnx knows); None when none does."""
    want = f"tensor({dtype})"
    for version in range(opset + 1, onnx.defs.onnx_opset_version() + 1):
        slots = node_slots(node, version)
        if slots is not None and all(want in slots.inputs[i].allowed for i in inputs) \
                and all(want in slots.outputs[i].allowed for i in outputs):
            return version
    return None
