"""ScatterElements / ScatterND across 16 (``reduction`` added) and 18 (reduction grew max/min),
GatherND across 12 (``batch_dims`` added)."""

from __future__ import annotations

from rewriter.convert.adapters.feature_support import attr_value, check_types, drop_default
from rewriter.convert.registry import register

__all__: list[str] = []


def _nothing(node, ctx) -> None:
    """The newer version without (or with the old values of) the attribute is the older one."""


def _reduction_16_13(node, ctx) -> None:
    check_types(node, ctx)
    drop_default(node, ctx, "reduction", "none", 16)


def _reduction_18_16(node, ctx) -> None:
    """Identical signatures, but 18 added the reduction values max and min."""
    reduction = attr_value(node, ctx, "reduction", "none")
    if reduction in ("max", "min"):
        ctx.block(f"reduction={reduction!r} exists only from opset 18")
    check_types(node, ctx)


for _op in ("ScatterElements", "ScatterND"):
    register(_op, 13, 16, kind="new feature")(_nothing)
    register(_op, 16, 18, kind="new feature")(_nothing)
    register(_op, 16, 13, kind="new feature")(_reduction_16_13)
    register(_op, 18, 16, kind="meaning change")(_reduction_18_16)


@register("GatherND", 11, 12, kind="new feature")
def gather_nd_11_12(node, ctx) -> None:
    """GatherND-12 without batch_dims is GatherND-11."""


@register("GatherND", 12, 11, kind="new feature")
def gather_nd_12_11(node, ctx) -> None:
    check_types(node, ctx)
    drop_default(node, ctx, "batch_dims", 0, 12)


@register("Scatter", 9, 11, kind="rewrite")
def scatter_9_11(node, ctx) -> None:
    """Scatter-11 is deprecated (the checker refuses it): the node becomes ScatterElements-11,
    which computes what Scatter does (same inputs and axis; negative axes allowed)."""
    node.op_type = "ScatterElements"
    ctx.record("Scatter -> ScatterElements (Scatter-11 is deprecated)")
