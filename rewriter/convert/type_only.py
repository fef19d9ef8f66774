"""Schema type facts for the engine's type-only steps, read from ``onnx.defs``.

Many schema steps only add or remove types (bfloat16 at 13, more integer types at 14,
optional types for If and Loop at 16, float8 at 19, ...). Whether a step is one of them is
decided by ``rewriter.convert.steps.step_kind`` (with :func:`same_signature`: the two schemas
are identical apart from the types their constraints allow); whether a node may take it, by
:func:`step_types_allowed` (every type the node uses is allowed at the destination).
"""

from __future__ import annotations

import functools

import onnx
import onnx.defs

from rewriter.graph.schemas import schema_at

__all__ = ["allowed_types", "same_signature", "step_types_allowed", "type_string"]


@functools.lru_cache(maxsize=None)
def _signature(op_type: str, since: int) -> tuple:
    """Everything about a schema but the types its constraints allow.

    Type parameters are renamed by order of first use (Identity-13's ``T`` and Identity-14's
    ``V`` are the same signature), so only which inputs and outputs share a type counts.
    """
    s = schema_at(op_type, since)
    constraint_names = {c.type_param_str for c in s.type_constraints}
    renamed: dict[str, str] = {}

    def param(p):
        type_str = p.type_str
        if type_str in constraint_names:
            type_str = renamed.setdefault(type_str, f"T{len(renamed)}")
        return (p.name, type_str, p.option, p.is_homogeneous, p.min_arity)

    attrs = tuple(sorted(
        (name, a.type, a.required, a.default_value.SerializeToString()) for name, a in s.attributes.items()
    ))
    return (tuple(param(p) for p in s.inputs), tuple(param(p) for p in s.outputs), s.min_input,
            s.max_input, s.min_output, s.max_output, attrs)


@functools.lru_cache(maxsize=None)
def _allowed(op_type: str, since: int, which: str, index: int) -> frozenset[str] | None:
    """Type strings allowed for input/output ``index`` (the last formal covers variadic ones)."""
    s = schema_at(op_type, since)
    params = s.inputs if which == "input" else s.outputs
    if not params:
        return None
    p = params[min(index, len(params) - 1)]
    for c in s.type_constraints:
        if c.type_param_str == p.type_str:
            return frozenset(c.allowed_type_strs)
    return frozenset([p.type_str])


def type_string(t: onnx.TypeProto) -> str | None:
    """A TypeProto as a schema type string: tensor(float), seq(tensor(int64)), optional(...)."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        if not t.tensor_type.elem_type:
            return None
        return "tensor(" + onnx.helper.tensor_dtype_to_string(t.tensor_type.elem_type).split(".")[-1].lower() + ")"
    if kind == "sequence_type":
        inner = type_string(t.sequence_type.elem_type)
        return f"seq({inner})" if inner else None
    if kind == "optional_type":
        inner = type_string(t.optional_type.elem_type)
        return f"optional({inner})" if inner else None
    return None


@functools.lru_cache(maxsize=None)
def _params(op_type: str, since: int) -> dict[str, tuple[str, ...]]:
    """The type parameter (or literal type) of each formal input and output of a schema."""
    s = schema_at(op_type, since)
    return {"input": tuple(p.type_str for p in s.inputs), "output": tuple(p.type_str for p in s.outputs)}


def allowed_types(op_type: str, since: int, which: str, index: int) -> frozenset[str] | None:
    """The type strings schema ``since`` of ``op_type`` allows for input or output (``which``)
    ``index``; the last formal covers variadic ones. None when the schema has no such formal."""
    return _allowed(op_type, since, which, index)


def same_signature(op_type: str, a: int, b: int) -> bool:
    """Whether schema versions ``a`` and ``b`` of ``op_type`` differ only in the types they allow."""
    return _signature(op_type, a) == _signature(op_type, b)


def step_types_allowed(node: onnx.NodeProto, a: int, b: int, types) -> str | None:
    """For a type-only step of ``node`` from schema ``a`` to ``b``: None when every type the node
    uses is allowed by schema ``b``, else the reason. ``types`` maps a value name to its
    TypeProto or None; an unknown type passes only when everything ``a`` allows, ``b`` allows."""
    op = node.op_type
    params = _params(op, a)
    bound: dict[str, str] = {}  # type parameter of schema a -> the type a value bound to it has
    for which, names in (("input", node.input), ("output", node.output)):
        formals = params[which]
        for i, name in enumerate(names):
            if name and formals:
                t = types(name)
                actual = type_string(t) if t is not None else None
                if actual is not None:
                    bound.setdefault(formals[min(i, len(formals) - 1)], actual)
    for which, names in (("input", node.input), ("output", node.output)):
        formals = params[which]
        for i, name in enumerate(names):
            if not name:
                continue
            allowed_b = _allowed(op, b, which, i)
            t = types(name)
            actual = type_string(t) if t is not None else None
            if actual is None and formals:  # a value sharing a type parameter with a known one
                actual = bound.get(formals[min(i, len(formals) - 1)])
            if actual is None:
                allowed_a = _allowed(op, a, which, i)
                if allowed_b is None or allowed_a is None or not allowed_a <= allowed_b:
                    return (f"the type of {which} '{name}' is unknown and schema version {b} allows "
                            f"fewer types than version {a}")
            elif allowed_b is None or actual not in allowed_b:
                return f"{which} '{name}' is {actual}, which {op}-{b} does not allow"
    return None
