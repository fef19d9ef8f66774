"""Binary elementwise ops across opset 7 (numpy broadcasting replaced ``broadcast``/``axis``),
Add/Sub/Mul/Div across 6 (``consumed_inputs`` dropped, integer types added); Mod across 28,
Equal across 11, Greater/Less across 9 (types). Pow and Max/Min across 12 are in
``type_routes.py``.

Before 7 the shapes had to be equal unless ``broadcast=1``; then only B broadcast, and B's shape
had to be a contiguous run of A's shape starting at ``axis`` (default: aligned to the end), or B
had one element. From 7 both inputs broadcast numpy-style (aligned to the end, dims of 1 stretch).

- up to 7: broadcast=0 -> the shapes were equal: attributes dropped. broadcast=1 without axis or
  with the axis that aligns B to the end -> numpy does the same: dropped. Another axis -> B gets
  trailing dims of 1 (Unsqueeze; needs both ranks).
- down from 7: equal shapes -> nothing; numpy broadcasting that the old rule can express
  (B one element, or B's dims without its leading/trailing 1s a run of A's dims, A having the
  output's shape) -> broadcast=1 (and axis; B reshaped to the run when it had extra 1s);
  otherwise refused. Needs static shapes unless the shapes are known equal.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, check_types, record_type
from rewriter.graph.attributes import attribute, remove_attribute, set_attribute
from rewriter.convert.registry import register
from rewriter.verify.shapes.rule import format_shape

__all__ = ["dims", "old_broadcast", "OLD_BROADCAST_OPS"]

OLD_BROADCAST_OPS = {"Add": 6, "Sub": 6, "Mul": 6, "Div": 6, "Pow": 1, "And": 1, "Or": 1, "Xor": 1,
                     "Equal": 1, "Greater": 1, "Less": 1}


def dims(ctx, name: str) -> list | None:
    """The dims of ``name``: ints, dim_param strings, or None for unknown dims; None for unknown rank."""
    t = ctx.value_type(name)
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out = []
    for d in t.tensor_type.shape.dim:
        out.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
    return out


def _same(a, b) -> bool:
    return a is not None and b is not None and len(a) == len(b) and all(
        x is not None and x == y for x, y in zip(a, b))


def old_broadcast(a: list | None, b: list | None, out: list | None):
    """How the pre-7 rule expresses numpy broadcasting of B onto A: None when the shapes are
    equal, else (axis or None, B's new shape or None), or a str saying why it cannot."""
    if _same(a, b):
        return None
    if a is None or b is None:
        return "the inputs' shapes are unknown"
    if out is not None and not _same(a, out):
        if len(out) != len(a) or any(x != y for x, y in zip(a, out) if isinstance(x, int) and isinstance(y, int)):
            return f"the first input {a} is itself broadcast (to {out})"
    if any(not isinstance(d, int) for d in b):
        return f"the second input's shape {b} is not static"
    if len(b) > len(a):
        return f"the second input {b} has a higher rank than the first {a}"
    if int(np.prod(b)) == 1:
        return (None, None)
    # B aligned to the end of A; strip B's leading and trailing 1s to find the run
    start = len(a) - len(b)
    lo, hi = 0, len(b)
    while lo < hi and b[lo] == 1:
        lo += 1
    while hi > lo and b[hi - 1] == 1:
        hi -= 1
    run = b[lo:hi]
    if any(x != 1 and not isinstance(y, int) for x, y in zip(b, a[start:])):
        return f"the first input's shape {format_shape(a)} is not static where the second input's {format_shape(b)} is not 1"
    if any(x != 1 and x != y for x, y in zip(b, a[start:])):
        return f"the shapes {format_shape(a)} and {format_shape(b)} do not broadcast"
    if list(a[start + lo:start + hi]) != run:
        return (f"the second input {format_shape(b)} stretches dims of 1 inside its run of dims, which broadcast=1 "
                f"cannot express")
    axis = start + lo
    if hi == len(b):  # already aligned to the end
        return (None if lo == 0 else axis, None if lo == 0 else run)
    return (axis, run)


_SWAPPED = {"Add": "Add", "Mul": "Mul", "And": "And", "Or": "Or", "Xor": "Xor", "Equal": "Equal",
            "Greater": "Less", "Less": "Greater"}


def _down(node, ctx) -> None:
    """From 7 to the version with broadcast/axis."""
    a, b = node.input[0], node.input[1]
    out = dims(ctx, node.output[0])
    how = old_broadcast(dims(ctx, a), dims(ctx, b), out)
    if isinstance(how, str) and node.op_type in _SWAPPED:
        # only B broadcast before 7: the commutative ops (and Greater <-> Less) swap their inputs
        swapped = old_broadcast(dims(ctx, b), dims(ctx, a), out)
        if not isinstance(swapped, str):
            node.input[0], node.input[1] = b, a
            a, b, how = b, a, swapped
            if node.op_type != _SWAPPED[node.op_type]:
                node.op_type = _SWAPPED[node.op_type]
            ctx.record("inputs swapped for broadcast=1")
    if isinstance(how, str):
        ctx.block(f"numpy-style broadcasting exists only from opset 7, and {how}")
    if how is not None:
        axis, shape = how
        if shape is not None:
            value = ctx.constant(b)
            if value is not None:
                node.input[1] = add_typed_constant(ctx, f"{b}_reshaped", np.asarray(value).reshape(shape))
                ctx.maybe_unused(b)
            elif ctx.step[1] >= 5:
                shape_name = add_typed_constant(ctx, "broadcast_shape", np.array(shape, dtype=np.int64))
                r = ctx.insert_before("Reshape", [b, shape_name])
                record_type(ctx, r.output[0], ctx.elem_type(b), shape)
                node.input[1] = r.output[0]
            else:
                r = ctx.insert_before("Reshape", [b], shape=list(shape))  # Reshape-1
                record_type(ctx, r.output[0], ctx.elem_type(b), shape)
                node.input[1] = r.output[0]
        set_attribute(node, "broadcast", 1)
        if axis is not None:
            set_attribute(node, "axis", axis)
        ctx.record(f"{node.op_type} numpy broadcasting -> broadcast=1")
    check_types(node, ctx)


def _up(node, ctx) -> None:
    """From the version with broadcast/axis to 7."""
    broadcast = attr_value(node, ctx, "broadcast", 0)
    axis = attr_value(node, ctx, "axis", None)
    remove_attribute(node, "broadcast")
    remove_attribute(node, "axis")
    remove_attribute(node, "consumed_inputs")
    if not broadcast or axis is None:
        return
    ra, rb = ctx.rank(node.input[0]), ctx.rank(node.input[1])
    if ra is None or rb is None:
        ctx.block(f"broadcast=1 with axis={axis} needs the ranks of both inputs to align the second "
                  f"input for numpy broadcasting, and they are unknown")
    if axis < 0:
        axis += ra
    trailing = ra - axis - rb
    if trailing < 0:
        ctx.block(f"axis={axis} does not fit a second input of rank {rb} into rank {ra}")
    if trailing == 0:
        return
    b = node.input[1]
    shape = list(dims(ctx, b) or [None] * rb) + [1] * trailing
    # a node, not a new initializer: models this old may be IR 3, where initializers must be inputs
    u = ctx.insert_before("Unsqueeze", [b], axes=list(range(rb, rb + trailing)))  # Unsqueeze-1
    record_type(ctx, u.output[0], ctx.elem_type(b), shape)
    node.input[1] = u.output[0]
    ctx.record(f"{node.op_type} broadcast axis -> trailing dims of 1")


def _consumed_inputs_up(node, ctx) -> None:
    if attribute(node, "consumed_inputs") is not None:
        remove_attribute(node, "consumed_inputs")
        ctx.record(f"{node.op_type} consumed_inputs dropped")


def _types_down(node, ctx) -> None:
    check_types(node, ctx)


for _op, _low in OLD_BROADCAST_OPS.items():
    register(_op, _low, 7, kind="meaning change")(_up)
    register(_op, 7, _low, kind="meaning change")(_down)
for _op in ("Add", "Sub", "Mul", "Div"):
    register(_op, 1, 6, kind="new feature")(_consumed_inputs_up)
    register(_op, 6, 1, kind="type-only")(_types_down)


_SUB_13 = frozenset(onnx.defs.get_schema("Sub", 13).type_constraints[0].allowed_type_strs)


def _type_name(elem) -> str:
    return onnx.helper.tensor_dtype_to_string(elem).split(".")[-1].lower()


@register("Mod", 13, 28, kind="meaning change")
def mod_13_28(node, ctx) -> None:
    """28 allowed fmod=0 on floats and fmod=1 on integers: every Mod-13 node means the same."""


@register("Mod", 28, 13, kind="meaning change")
def mod_28_13(node, ctx) -> None:
    """Below 28, fmod=0 takes integers only and fmod=1 floats only. The other pairings are
    rewritten exactly from the allowed one, as numpy does (npy_divmod):

    - floats, fmod=0 (floor): r = fmod(a, b); r + b where r != 0 and sign(r) != sign(b);
      a zero r takes b's sign (0 * Sign(b)).
    - integers, fmod=1 (truncate): r = a % b (floor); r - b where r != 0 and sign(r) != sign(a).
    """
    fmod = attr_value(node, ctx, "fmod", 0)
    elem = ctx.elem_type(node.input[0])
    if elem is None:
        ctx.block("the input type is unknown, and below opset 28 it decides which fmod is allowed")
    floating = onnx.helper.tensor_dtype_to_np_dtype(elem).kind == "f" or elem == onnx.TensorProto.BFLOAT16
    check_types(node, ctx)
    if floating == bool(fmod):
        return
    a, b = node.input[0], node.input[1]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem) if elem != onnx.TensorProto.BFLOAT16 else None
    if dtype is None or not floating and "tensor(" + dtype.name + ")" not in _SUB_13:
        ctx.block(f"fmod={fmod} on {_type_name(elem)} inputs exists only from opset 28")
    set_attribute(node, "fmod", 0 if fmod else 1)
    original = node.output[0]
    r = ctx.redirect_output(0)
    out_shape = dims(ctx, original)
    record_type(ctx, r, elem, out_shape)
    zero = add_typed_constant(ctx, "mod_zero", np.zeros([], dtype))

    def op(kind, inputs, elem_out=onnx.TensorProto.BOOL, outputs=1, **attrs):
        n = ctx.insert_after(kind, inputs, outputs, **attrs)
        if outputs == 1:
            record_type(ctx, n.output[0], elem_out, out_shape)
        return n.output[0]

    sign_ref = b if floating else a
    differ = op("Xor", [op("Less", [r, zero]), op("Less", [sign_ref, zero])])
    nonzero = op("Not", [op("Equal", [r, zero])])
    fix = op("And", [differ, nonzero])
    if floating:
        shifted = op("Add", [r, b], elem)
        fixed = op("Where", [fix, shifted, r], elem)
        signed_zero = op("Mul", [op("Sign", [b], elem), zero], elem)
        # the signed zero in Where's else branch: ONNX Runtime's Where drops the sign of a -0.0
        # taken from the then branch
        ctx.insert_after("Where", [nonzero, fixed, signed_zero], [original])
    else:
        shifted = op("Sub", [r, b], elem)
        ctx.insert_after("Where", [fix, shifted, r], [original])
    ctx.record(f"Mod fmod={fmod} on {'floats' if floating else 'integers'} -> fmod={1 - bool(fmod)} + correction")


@register("Equal", 7, 11, kind="type-only")
@register("Greater", 7, 9, kind="type-only")
@register("Less", 7, 9, kind="type-only")
def _types_added(node, ctx) -> None:
    """The newer version only added types."""


_EQUAL_7 = frozenset(onnx.defs.get_schema("Equal", 7).type_constraints[0].allowed_type_strs)
_WIDEN_TO_INT64 = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                   onnx.TensorProto.UINT32}


@register("Equal", 11, 7, kind="type-only")
def equal_11_7(node, ctx) -> None:
    """Equal-7 compares bool/int32/int64 only. Smaller integers are compared as int64 (Cast is
    exact and injective); floats as ``not (a < b or a > b)`` and neither is NaN, where ``x`` is not
    NaN when ``x < inf or x > max_finite`` (exact, also for infinities and signed zeros)."""
    elem = ctx.elem_type(node.input[0])
    if elem is None:
        ctx.block(f"the type of input '{node.input[0]}' is unknown, and Equal-7 takes bool/int32/int64 only")
    if "tensor(" + _type_name(elem) + ")" in _EQUAL_7:
        return
    out_dims = dims(ctx, node.output[0])
    a, b = node.input[0], node.input[1]
    if elem in _WIDEN_TO_INT64:
        for i in (0, 1):
            c = ctx.insert_before("Cast", [node.input[i]], to=onnx.TensorProto.INT64)
            record_type(ctx, c.output[0], onnx.TensorProto.INT64, dims(ctx, node.input[i]))
            node.input[i] = c.output[0]
        ctx.record("Equal on small integers -> Cast to int64")
        return
    if elem not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE):
        ctx.block(f"Equal on {_type_name(elem)} exists only from opset 11")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    inf = add_typed_constant(ctx, f"equal_inf_{dtype.name}", np.array(np.inf, dtype))
    big = add_typed_constant(ctx, f"equal_max_{dtype.name}", np.array(np.finfo(dtype).max, dtype))

    def op(kind, inputs, shape=out_dims, where=ctx.insert_before, outputs=1):
        n = where(kind, inputs, outputs)
        if outputs == 1:
            record_type(ctx, n.output[0], onnx.TensorProto.BOOL, shape)
        return n.output[0]

    def not_nan(x):
        shape = dims(ctx, x)
        return op("Or", [op("Less", [x, inf], shape), op("Greater", [x, big], shape)], shape)

    differ = op("Or", [op("Less", [a, b]), op("Greater", [a, b])])
    same = op("Not", [differ])
    numbers = op("And", [not_nan(a), not_nan(b)])
    node.op_type = "And"
    del node.input[:]
    del node.attribute[:]
    node.input.extend([same, numbers])
    ctx.record("Equal on floats -> Less/Greater/Not/And/Or")


_GREATER_7 = frozenset(onnx.defs.get_schema("Greater", 7).type_constraints[0].allowed_type_strs)
_EXACT_IN_DOUBLE = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.UINT8,
                    onnx.TensorProto.UINT16, onnx.TensorProto.UINT32}


def _compare_9_7(node, ctx) -> None:
    """Greater/Less-7 compare floats only (integers from 9): integers of up to 32 bits are compared
    as doubles, which hold them exactly."""
    elem = ctx.elem_type(node.input[0])
    if elem is None:
        ctx.block(f"the type of input '{node.input[0]}' is unknown, and {node.op_type}-7 takes floats only")
    if "tensor(" + _type_name(elem) + ")" in _GREATER_7:
        return
    if elem not in _EXACT_IN_DOUBLE:
        ctx.block(f"{node.op_type} on {_type_name(elem)} exists only from opset 9 (a double does not hold "
                  f"every {_type_name(elem)} exactly)")
    for i in (0, 1):
        c = ctx.insert_before("Cast", [node.input[i]], to=onnx.TensorProto.DOUBLE)
        record_type(ctx, c.output[0], onnx.TensorProto.DOUBLE, dims(ctx, node.input[i]))
        node.input[i] = c.output[0]
    ctx.record(f"{node.op_type} on integers -> Cast to double")


for _op in ("Greater", "Less"):
    register(_op, 9, 7, kind="type-only")(_compare_9_7)
