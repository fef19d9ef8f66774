"""Cast and CastLike: the steps that are not type-only.

- Cast 1 <-> 6: ``to`` was a string naming the TensorProto data type ("FLOAT"); from 6 it is
  the enum value.
- Cast 13 <-> 19, CastLike 15 <-> 19: 19 added ``saturate`` (default 1) and the float8 types.
  saturate only affects casts to float8, which do not exist below 19: going down every type
  must be allowed by the older schema, and then saturate means nothing and is dropped.
- Cast/CastLike 23 <-> 24: 24 added ``round_mode`` (default "up") and float8e8m0; round_mode
  only affects casts to float8e8m0, which does not exist below 24: same rule.

Going up nothing changes. The other steps only add types (type-only, checked by the engine).
"""

from __future__ import annotations

import onnx

from rewriter.convert.adapters.feature_support import attr_value, check_types
from rewriter.graph.attributes import attribute, remove_attribute, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Cast", 1, 6, kind="meaning change")
def cast_1_6(node, ctx) -> None:
    """``to`` as a data type name becomes the enum value."""
    to = attr_value(node, ctx, "to")
    if isinstance(to, int):  # already the enum (some exporters wrote it so)
        return
    if to is None:
        ctx.block("Cast without a 'to' attribute")
    try:
        value = onnx.TensorProto.DataType.Value(str(to).upper())
    except ValueError:
        ctx.block(f"to={to!r} is not the name of an ONNX data type")
    set_attribute(node, "to", value)
    ctx.record("Cast to: name -> enum")


@register("Cast", 6, 1, kind="meaning change")
def cast_6_1(node, ctx) -> None:
    """``to`` as the enum value becomes the data type name Cast-1 takes."""
    to = attr_value(node, ctx, "to")
    if to is None:
        ctx.block("Cast without a 'to' attribute")
    if isinstance(to, str):
        return
    check_types(node, ctx)
    set_attribute(node, "to", onnx.TensorProto.DataType.Name(to))
    ctx.record("Cast to: enum -> name")


def _up(node, ctx) -> None:
    """The newer version's default (saturate=1, round_mode="up") is the old behaviour."""


def _drop_after_types(feature: str, since: int, affected: str):
    def adapter(node, ctx) -> None:
        check_types(node, ctx)
        if attribute(node, feature) is not None:
            attr_value(node, ctx, feature)  # blocks on a function attribute reference
            remove_attribute(node, feature)
            ctx.record(f"{node.op_type} {feature} dropped (only affects {affected})")
    adapter.__doc__ = (f"{feature} (from opset {since}) only affects casts to {affected}, which the "
                       f"older schema does not have: types checked, {feature} dropped.")
    return adapter


register(("Cast", 13, 19), ("CastLike", 15, 19), ("Cast", 23, 24), ("CastLike", 23, 24),
         kind="new feature")(_up)
register(("Cast", 19, 13), ("CastLike", 19, 15), kind="new feature")(
    _drop_after_types("saturate", 19, "float8 types"))
register(("Cast", 24, 23), ("CastLike", 24, 23), kind="new feature")(
    _drop_after_types("round_mode", 24, "float8e8m0"))
