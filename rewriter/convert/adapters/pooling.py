"""Pooling ops: the steps that added optional features.

- AveragePool 7 (count_include_pad), 10 (ceil_mode), 19 (dilations);
- MaxPool 8 (storage_order and the optional Indices output), 10 (ceil_mode, dilations);
- LpPool 2 (p became an int, kernel_shape required), 18 (ceil_mode, dilations).

Going up nothing changes (absent = the old behaviour). Going down a feature at its default is
dropped; ceil_mode=1 is dropped when every spatial output size is the same with floor (static
shape, explicit pads, (in + pads - effective kernel) divisible by the stride), and otherwise,
for MaxPool and an AveragePool that does not count pads, becomes floor with the end padding
that gives the ceil-mode windows (static dims, no dilation); dilations are
dropped when all 1; an Indices output that is used blocks; anything else blocks naming the
feature and the opset that has it. Types are checked against the older schema.

Going below 22 (all three ops): a ceil_mode window that would start in the end padding is dropped
from 22 but counted before; when that is the only way ceil differs from floor, ceil_mode becomes 0.
"""

from __future__ import annotations

from rewriter.convert.adapters.feature_support import attr_value, check_types, drop_default
from rewriter.graph.attributes import attribute, remove_attribute, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


def _nothing(node, ctx) -> None:
    """The newer version without the new attribute is the older one."""


def _ones(value) -> bool:
    return all(v == 1 for v in value)


def _drop_ceil_mode(node, ctx, since: int) -> None:
    if attribute(node, "ceil_mode") is None:
        return
    ceil = attr_value(node, ctx, "ceil_mode", 0)
    if ceil:
        reason = _ceil_differs(node, ctx)
        if reason and reason.startswith("with dim") and _ceil_as_end_pads(node, ctx):
            return
        if reason:
            ctx.block(f"ceil_mode=1 exists only from opset {since}, and {reason}")
    remove_attribute(node, "ceil_mode")
    ctx.record(f"{node.op_type} ceil_mode dropped")


def _ceil_as_end_pads(node, ctx) -> bool:
    """ceil_mode=1 as floor with more padding at the end of each spatial axis: as many windows
    (before opset 22 a ceil-mode window may start in the end padding, and counts), each over the
    same input cells. Padding takes no part in a max, nor in an average that does not count
    pads (count_include_pad=0); an average that counts them would count the added ones, so it
    stays refused. Static spatial dims and dilations of 1 (checked by the caller and here)."""
    if node.op_type == "AveragePool" and attr_value(node, ctx, "count_include_pad", 0):
        return False
    kernel = attr_value(node, ctx, "kernel_shape")
    n = len(kernel)
    dilations = attr_value(node, ctx, "dilations", None) or [1] * n
    if not _ones(dilations):
        return False
    spatial = ctx.shape(node.input[0])[2:]
    strides = attr_value(node, ctx, "strides", None) or [1] * n
    auto_pad = attr_value(node, ctx, "auto_pad", "NOTSET")
    pads = list(([0] * (2 * n) if auto_pad == "VALID" else None) or attr_value(node, ctx, "pads", None)
                or [0] * (2 * n))
    for i in range(n):
        span = spatial[i] + pads[i] + pads[i + n] - kernel[i]
        windows = -(-span // strides[i]) + 1  # ceil(span / stride) + 1
        pads[i + n] += (windows - 1) * strides[i] + kernel[i] - (spatial[i] + pads[i] + pads[i + n])
    remove_attribute(node, "auto_pad")
    set_attribute(node, "pads", pads)
    remove_attribute(node, "ceil_mode")
    ctx.record(f"{node.op_type} ceil_mode=1 -> floor with more end padding")
    return True


def _ceil_differs(node, ctx) -> str | None:
    """Why ceil_mode=1 could give other output sizes than floor (None when it cannot)."""
    auto_pad = attr_value(node, ctx, "auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID"):
        return f"auto_pad={auto_pad}"
    shape = ctx.shape(node.input[0])
    kernel = attr_value(node, ctx, "kernel_shape")
    if shape is None or kernel is None:
        return "the input's shape is unknown"
    spatial = shape[2:]
    if len(spatial) != len(kernel) or None in spatial:
        return f"the input's spatial dims {spatial} are not static"
    n = len(kernel)
    strides = attr_value(node, ctx, "strides", None) or [1] * n
    dilations = attr_value(node, ctx, "dilations", None) or [1] * n
    pads = ([0] * (2 * n) if auto_pad == "VALID" else None) or attr_value(node, ctx, "pads", None) or [0] * (2 * n)
    for i in range(n):
        span = spatial[i] + pads[i] + pads[i + n] - ((kernel[i] - 1) * dilations[i] + 1)
        if span % strides[i]:
            return f"with dim {spatial[i]} of spatial axis {i} it rounds the output size up"
    return None


def _drop_dilations(node, ctx, since: int) -> None:
    drop_default(node, ctx, "dilations", _ones, since)


def _drop_ceil_mode_and_dilations(node, ctx, since: int) -> None:
    check_types(node, ctx)
    _drop_ceil_mode(node, ctx, since)
    _drop_dilations(node, ctx, since)


# ---------------------------------------------------------------- AveragePool

@register("AveragePool", 7, 1, kind="new feature")
def average_pool_7_1(node, ctx) -> None:
    check_types(node, ctx)
    drop_default(node, ctx, "count_include_pad", 0, 7)


@register("AveragePool", 10, 7, kind="new feature")
def average_pool_10_7(node, ctx) -> None:
    check_types(node, ctx)
    _drop_ceil_mode(node, ctx, 10)


@register("AveragePool", 19, 11, kind="new feature")
def average_pool_19_11(node, ctx) -> None:
    check_types(node, ctx)
    _drop_dilations(node, ctx, 19)


# ---------------------------------------------------------------- MaxPool

@register("MaxPool", 8, 1, kind="new feature")
def max_pool_8_1(node, ctx) -> None:
    if len(node.output) > 1 and node.output[1]:
        ctx.block(f"the Indices output '{node.output[1]}' exists only from opset 8")
    del node.output[1:]
    check_types(node, ctx)
    # storage_order only says how Indices are computed: without Indices it means nothing
    if attribute(node, "storage_order") is not None:
        attr_value(node, ctx, "storage_order")
        remove_attribute(node, "storage_order")
        ctx.record("MaxPool storage_order dropped (no Indices output)")


@register("MaxPool", 10, 8, kind="new feature")
def max_pool_10_8(node, ctx) -> None:
    _drop_ceil_mode_and_dilations(node, ctx, 10)


# ---------------------------------------------------------------- LpPool

@register("LpPool", 1, 2, kind="meaning change")
def lp_pool_1_2(node, ctx) -> None:
    """p was a float (default 2.0), is an int from 2; kernel_shape became required."""
    p = attr_value(node, ctx, "p", 2.0)
    if float(p) != int(p):
        ctx.block(f"p={p} is not an integer, and LpPool from opset 2 takes an integer p")
    if attribute(node, "kernel_shape") is None:
        ctx.block("LpPool from opset 2 requires kernel_shape, which the node does not have")
    if attribute(node, "p") is not None:
        set_attribute(node, "p", int(p))
        ctx.record("LpPool p float -> int")


@register("LpPool", 2, 1, kind="meaning change")
def lp_pool_2_1(node, ctx) -> None:
    check_types(node, ctx)
    if attribute(node, "p") is not None:
        set_attribute(node, "p", float(attr_value(node, ctx, "p")))
        ctx.record("LpPool p int -> float")


@register("LpPool", 18, 11, kind="new feature")
def lp_pool_18_11(node, ctx) -> None:
    _drop_ceil_mode_and_dilations(node, ctx, 18)


def _ceil_windows(node, ctx) -> list[str] | None:
    """With ceil_mode=1 and explicit pads: per spatial axis "same" (ceil and floor agree), "extra"
    (ceil adds a last window that starts inside the input or the begin padding: every version
    counts it) or "dropped" (that last window would start in the end padding: from opset 22 it is
    dropped, before 22 the output size counts it). None when the shape is not static."""
    shape = ctx.shape(node.input[0])
    kernel = attr_value(node, ctx, "kernel_shape")
    if shape is None or kernel is None or len(shape) - 2 != len(kernel) or None in shape[2:]:
        return None
    n = len(kernel)
    strides = attr_value(node, ctx, "strides", None) or [1] * n
    dilations = attr_value(node, ctx, "dilations", None) or [1] * n
    pads = attr_value(node, ctx, "pads", None) or [0] * (2 * n)
    kinds = []
    for i in range(n):
        span = shape[2 + i] + pads[i] + pads[i + n] - ((kernel[i] - 1) * dilations[i] + 1)
        if span % strides[i] == 0:
            kinds.append("same")
        else:
            out = -(-span // strides[i]) + 1
            kinds.append("dropped" if (out - 1) * strides[i] >= shape[2 + i] + pads[i] else "extra")
    return kinds


def _before_22(node, ctx) -> None:
    """ceil_mode=1 going below 22: when along some axis the last ceil window starts in the end
    padding (dropped from 22, counted before) and no axis has a real extra ceil window, the floor
    sizes are exactly the 22 sizes: ceil_mode=0. Both kinds at once are refused; unknown shapes
    keep the node (ONNX Runtime drops such windows in every version)."""
    check_types(node, ctx)
    if not attr_value(node, ctx, "ceil_mode", 0) or attr_value(node, ctx, "auto_pad", "NOTSET") != "NOTSET":
        return
    kinds = _ceil_windows(node, ctx)
    if kinds is None or "dropped" not in kinds:
        return
    if "extra" in kinds:
        ctx.block(f"with ceil_mode=1 the last window starts in the end padding along some spatial axes "
                  f"({kinds}): from opset 22 it is dropped, before 22 counted, and the other axes need "
                  f"ceil_mode=1")
    set_attribute(node, "ceil_mode", 0)
    ctx.record(f"{node.op_type} ceil_mode=1 -> 0 (last window in the padding, dropped from 22)")


register(("AveragePool", 22, 19), ("MaxPool", 22, 12), ("LpPool", 22, 18), kind="meaning change")(_before_22)
register(("AveragePool", 19, 22), ("MaxPool", 12, 22), ("LpPool", 18, 22), kind="type-only")(_nothing)
register(("AveragePool", 1, 7), ("AveragePool", 7, 10), ("AveragePool", 11, 19), ("MaxPool", 1, 8),
         ("MaxPool", 8, 10), ("LpPool", 11, 18), kind="new feature")(_nothing)
