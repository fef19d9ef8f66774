"""RNN, GRU and LSTM: output_sequence (gone at 7), GRU's linear_before_reset (3), layout (14).

- 1/3 <-> 7: ``output_sequence`` (default 0) only said whether Y is produced; from 7 the presence
  of the Y output says it. Up: the attribute goes. Down: output_sequence=1 exactly when Y is
  produced.
- GRU 1 <-> 3: 3 added ``linear_before_reset`` (default 0), made Y_h optional and fixed the
  default direction's spelling. Down: linear_before_reset=1 is refused, an absent Y_h gets a
  fresh name (required at 1), an absent direction is written "forward".
- 7 <-> 14: 14 added ``layout`` (default 0: sequence first). Down: layout=0 dropped, 1 refused.
"""

from __future__ import annotations

from rewriter.convert.adapters.feature_support import attr_value, check_types, drop_default, set_attr
from rewriter.convert.attrs import get_attr, remove_attr
from rewriter.convert.registry import register

__all__: list[str] = []


def _nothing(node, ctx) -> None:
    """The newer version without the new attribute is the older one."""


def _output_sequence_up(node, ctx) -> None:
    if get_attr(node, "output_sequence") is not None:
        attr_value(node, ctx, "output_sequence")
        remove_attr(node, "output_sequence")
        ctx.record(f"{node.op_type} output_sequence dropped")


def _output_sequence_down(node, ctx) -> None:
    check_types(node, ctx)
    if node.output and node.output[0]:
        set_attr(node, "output_sequence", 1)


def _layout_down(node, ctx) -> None:
    check_types(node, ctx)
    drop_default(node, ctx, "layout", 0, 14, " (batch-first inputs and outputs)")


for _op in ("RNN", "GRU", "LSTM"):
    register(_op, 7, 14, kind="new feature")(_nothing)
    register(_op, 14, 7, kind="new feature")(_layout_down)
for _op, _low in (("RNN", 1), ("LSTM", 1), ("GRU", 3)):
    register(_op, _low, 7, kind="new feature")(_output_sequence_up)
    register(_op, 7, _low, kind="new feature")(_output_sequence_down)


@register("GRU", 1, 3, kind="new feature")
def gru_1_3(node, ctx) -> None:
    """GRU-3 without linear_before_reset is GRU-1 (direction written out: GRU-1's default was
    spelled 'foward')."""
    if get_attr(node, "direction") is None:
        set_attr(node, "direction", "forward")


@register("GRU", 3, 1, kind="new feature")
def gru_3_1(node, ctx) -> None:
    check_types(node, ctx)
    drop_default(node, ctx, "linear_before_reset", 0, 3)
    if get_attr(node, "direction") is None:
        set_attr(node, "direction", "forward")
    while len(node.output) < 2:
        node.output.append("")
    if not node.output[1]:
        node.output[1] = ctx.fresh_name(f"{node.name or 'gru'}_Y_h")
        ctx.record("GRU Y_h output named (required below opset 3)")
