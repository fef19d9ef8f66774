"""The generic "type restriction" adapter for ops other than ReduceProd.

Many schema steps only add or remove types (bfloat16 at 13, more integer types at 14,
optional types for If and Loop at 16, float8 at 19, ...). onnx.version_converter has
upward adapters for most of them but almost no downward ones, so on its own it cannot
bring, say, an If or an Add from opset 18 down to 13. Such a step is safe to take by
changing nothing in the node when

- the two schemas are identical apart from the types their constraints allow (same
  inputs, outputs, arities and attributes with the same types and defaults), read from
  ``onnx.defs``; and
- the op is one whose identical-signature steps are known to be type-only
  (``TYPE_ONLY_OPS``: control flow, Identity, Constant, elementwise and shape ops, and
  from opset 11 on the reductions and axis ops, whose step to 11 allowed negative axes
  without changing the signature; ops whose enum values grew, such as Pad and Resize,
  are deliberately left out); and
- every type the node actually uses is allowed by every schema on the way.

Everything else is left to onnx.version_converter.
"""

from __future__ import annotations

import functools

import onnx
import onnx.defs

__all__ = ["TYPE_ONLY_OPS", "type_only_path", "allowed_types", "same_signature", "step_types_allowed"]

_ANY = 1
# op -> the lowest opset this rule may reach for it: steps below it changed meaning without
# changing the signature (opset 11 let many ops take negative axes, opset 8 let the variadic
# elementwise ops broadcast).
TYPE_ONLY_OPS: dict[str, int] = {
    **dict.fromkeys([
        "Identity", "Constant",
        "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt", "Exp", "Log", "Reciprocal",
        "Relu", "Sigmoid", "Tanh", "Floor", "Ceil", "Sign", "Erf",
        "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor",
        "Where", "MatMul", "Size", "Shape", "Cast", "Transpose",
        "Reshape", "Expand", "Tile", "ConstantOfShape",
    ], _ANY),
    # Max/Min/Sum/Mean-8 added broadcasting without changing their signature
    **dict.fromkeys(["Max", "Min", "Sum", "Mean"], 8),
    "Loop": 11,  # Loop-11 reworded what the body's loop-carried values may do
    "If": _ANY,  # If-11 let the branches' outputs differ in shape: see _if_branches_agree
    **dict.fromkeys([
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
        "Concat", "Gather", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Gemm", "Clip",
    ], 11),
}


def _schema(op_type: str, since: int) -> onnx.defs.OpSchema:
    return onnx.defs.get_schema(op_type, since, "")


@functools.lru_cache(maxsize=None)
def _versions(op_type: str) -> tuple[int, ...]:
    return tuple(sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                        if s.name == op_type and s.domain == ""))


@functools.lru_cache(maxsize=None)
def _signature(op_type: str, since: int) -> tuple:
    """Everything about a schema but the types its constraints allow.

    Type parameters are renamed by order of first use (Identity-13's ``T`` and Identity-14's
    ``V`` are the same signature), so only which inputs and outputs share a type counts.
    """
    s = _schema(op_type, since)
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
    s = _schema(op_type, since)
    params = s.inputs if which == "input" else s.outputs
    if not params:
        return None
    p = params[min(index, len(params) - 1)]
    for c in s.type_constraints:
        if c.type_param_str == p.type_str:
            return frozenset(c.allowed_type_strs)
    return frozenset([p.type_str])


def _static_shape(value: onnx.ValueInfoProto) -> list[int] | None:
    t = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return None if None in dims else dims


def _if_branches_agree(node: onnx.NodeProto) -> bool:
    """Whether both branches declare outputs of the same static shapes, as If-1 requires."""
    branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    then, other = branches.get("then_branch"), branches.get("else_branch")
    if then is None or other is None or len(then.output) != len(other.output):
        return False
    for a, b in zip(then.output, other.output):
        shape = _static_shape(a)
        if shape is None or shape != _static_shape(b):
            return False
    return True


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


def type_only_path(node: onnx.NodeProto, source: int, target: int, types=None) -> bool:
    """Whether every schema step of ``node`` from opset ``source`` to ``target`` is type-only.

    ``types`` is a callable name -> TypeProto | None giving the types of the node's values;
    without it every type counts as unknown.
    """
    floor = TYPE_ONLY_OPS.get(node.op_type)
    if floor is None or min(source, target) < floor:
        return False
    if node.op_type == "If" and min(source, target) < 11 <= max(source, target) \
            and not _if_branches_agree(node):
        return False
    if types is None:
        return _type_only_untyped(node.op_type, source, target,
                                  tuple(bool(i) for i in node.input), tuple(bool(o) for o in node.output))
    return _type_only(node.op_type, source, target, node.input, node.output, types)


@functools.lru_cache(maxsize=4096)
def _type_only_untyped(op, source, target, inputs, outputs) -> bool:
    unknown = lambda _name: None  # noqa: E731
    return _type_only(op, source, target, ["x" if i else "" for i in inputs],
                      ["x" if o else "" for o in outputs], unknown)


def _type_only(op, source, target, inputs, outputs, types) -> bool:
    versions = _versions(op)
    lo, hi = sorted((source, target))
    src = max(v for v in versions if v <= lo)
    chain = [src] + [v for v in versions if lo < v <= hi]
    if len({_signature(op, v) for v in chain}) != 1:
        return False
    for which, names in (("input", inputs), ("output", outputs)):
        for i, name in enumerate(names):
            if not name:
                continue
            t = types(name)
            actual = type_string(t) if t is not None else None
            sets = [_allowed(op, v, which, i) for v in chain]
            if actual is None:
                # unknown type: safe only if the types the source allows stay allowed throughout
                start = sets[0] if source <= target else sets[-1]
                if any(s is None or not start <= s for s in sets):
                    return False
            elif any(s is None or actual not in s for s in sets):
                return False
    return True


@functools.lru_cache(maxsize=None)
def _params(op_type: str, since: int) -> dict[str, tuple[str, ...]]:
    """The type parameter (or literal type) of each formal input and output of a schema."""
    s = _schema(op_type, since)
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
