"""RNN, GRU and LSTM: output_sequence (gone at 7), GRU's linear_before_reset (3), layout (14).

- 1/3 <-> 7: ``output_sequence`` (default 0) only said whether Y is produced; from 7 the presence
  of the Y output says it. Up: the attribute goes. Down: output_sequence=1 exactly when Y is
  produced.
- GRU 1 <-> 3: 3 added ``linear_before_reset`` (default 0), made Y_h optional and fixed the
  default direction's spelling. Down: linear_before_reset=1 is refused, an absent Y_h gets a
  fresh name (required at 1), an absent direction is written "forward".
- 7 <-> 14: 14 added ``layout`` (default 0: sequence first). Down: layout=0 dropped; layout=1
  (batch first) is rewritten exactly with Transposes: X and initial_h/initial_c [batch, seq|dirs,
  ...] -> [seq|dirs, batch, ...] before, Y [seq, dirs, batch, hidden] -> [batch, seq, dirs, hidden]
  and Y_h/Y_c [dirs, batch, hidden] -> [batch, dirs, hidden] after.
"""

from __future__ import annotations

from rewriter.convert.adapters.feature_support import attr_value, check_types, drop_default, record_type
from rewriter.graph.attributes import attribute, remove_attribute, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


def _nothing(node, ctx) -> None:
    """The newer version without the new attribute is the older one."""


def _output_sequence_up(node, ctx) -> None:
    if attribute(node, "output_sequence") is not None:
        attr_value(node, ctx, "output_sequence")
        remove_attribute(node, "output_sequence")
        ctx.record(f"{node.op_type} output_sequence dropped")


def _output_sequence_down(node, ctx) -> None:
    check_types(node, ctx)
    if node.output and node.output[0]:
        set_attribute(node, "output_sequence", 1)


def _layout_down(node, ctx) -> None:
    check_types(node, ctx)
    layout = attr_value(node, ctx, "layout", 0)
    remove_attribute(node, "layout")
    if not layout:
        return
    # inputs: X (0), initial_h (5), initial_c (6, LSTM): swap the first two dims
    for i in (0, 5, 6):
        if i < len(node.input) and node.input[i] and not (i == 6 and node.op_type != "LSTM"):
            t = ctx.insert_before("Transpose", [node.input[i]], perm=[1, 0, 2])
            shape = ctx.shape(node.input[i])
            record_type(ctx, t.output[0], ctx.elem_type(node.input[i]),
                        None if shape is None else [shape[1], shape[0], shape[2]])
            node.input[i] = t.output[0]
    for i, perm in ((0, [2, 0, 1, 3]), (1, [1, 0, 2]), (2, [1, 0, 2])):
        if i < len(node.output) and node.output[i]:
            original = node.output[i]
            inner = ctx.redirect_output(i)
            ctx.insert_after("Transpose", [inner], [original], perm=perm)
    ctx.record(f"{node.op_type} layout=1 -> Transposes around layout 0")


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
    if attribute(node, "direction") is None:
        set_attribute(node, "direction", "forward")


@register("GRU", 3, 1, kind="new feature")
def gru_3_1(node, ctx) -> None:
    check_types(node, ctx)
    drop_default(node, ctx, "linear_before_reset", 0, 3)
    if attribute(node, "direction") is None:
        set_attribute(node, "direction", "forward")
    while len(node.output) < 2:
        node.output.append("")
    if not node.output[1]:
        node.output[1] = ctx.fresh_name(f"{node.name or 'gru'}_Y_h")
        ctx.record("GRU Y_h output named (required below opset 3)")
