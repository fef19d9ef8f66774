"""BatchNormalization across 6, 7, 9, 14 and 15.

- 1 <-> 6: 6 dropped the required legacy ``consumed_inputs`` (going down it is written as [0, 0],
  as onnx does).
- 6 <-> 7: 7 dropped ``is_test`` (default 0 = training): from 7 the mode is given by the outputs
  (more than Y = training). Up: is_test=1 is dropped (an extra output would then mean training:
  refused); is_test=0 keeps training by giving the node all five outputs (fresh names for the
  missing ones). Down: is_test=1 when only Y is produced, else is_test=0.
- 7 <-> 9: 9 dropped ``spatial`` (always 1). Up: spatial=1 dropped, spatial=0 refused.
- 9 <-> 14: 14 added ``training_mode`` (default 0) and has only running_mean/running_var as
  extra outputs. Up: training (extra outputs) -> training_mode=1, saved_mean/saved_var must be
  unused. Down: training_mode=0 -> attribute dropped (extra outputs are not produced in
  inference: they must be unused); training_mode=1 -> the extra outputs signal training.
- 14 <-> 15: 15 split the type parameter (scale/B T1, mean/var T2). Down: scale and B must have
  X's type, mean and var one type.
"""

from __future__ import annotations

from rewriter.convert.adapters.feature_support import attr_value, check_types, consumed, record_type
from rewriter.graph.attributes import attribute, remove_attribute, set_ints, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


def _used_outputs(node, ctx, start: int) -> list[str]:
    return [o for o in node.output[start:] if consumed(ctx, o)]


def _trim(node) -> None:
    while len(node.output) > 1 and not node.output[-1]:
        del node.output[-1]


@register("BatchNormalization", 1, 6, kind="new feature")
def bn_1_6(node, ctx) -> None:
    if attribute(node, "consumed_inputs") is not None:
        remove_attribute(node, "consumed_inputs")
        ctx.record("BatchNormalization consumed_inputs dropped")


@register("BatchNormalization", 6, 1, kind="new feature")
def bn_6_1(node, ctx) -> None:
    check_types(node, ctx)
    set_ints(node, "consumed_inputs", [0, 0])
    ctx.record("BatchNormalization consumed_inputs written")


@register("BatchNormalization", 6, 7, kind="meaning change")
def bn_6_7(node, ctx) -> None:
    is_test = attr_value(node, ctx, "is_test", 0)
    remove_attribute(node, "is_test")
    if is_test:
        if _used_outputs(node, ctx, 1):
            ctx.block(f"is_test=1 with the extra outputs {_used_outputs(node, ctx, 1)}: from opset 7 extra "
                      f"outputs mean training mode")
        del node.output[1:]
        return
    while len(node.output) < 5:
        node.output.append("")
    for i in range(1, 5):
        if not node.output[i]:
            node.output[i] = ctx.fresh_name(f"{node.name or 'bn'}_training_out{i}")
            record_type(ctx, node.output[i], ctx.elem_type(node.input[0]), ctx.shape(node.input[1]))
    ctx.record("BatchNormalization is_test=0 -> training outputs")


@register("BatchNormalization", 7, 6, kind="meaning change")
def bn_7_6(node, ctx) -> None:
    check_types(node, ctx)
    _trim(node)
    set_attribute(node, "is_test", 0 if len(node.output) > 1 else 1)
    ctx.record("BatchNormalization is_test written")


@register("BatchNormalization", 7, 9, kind="new feature")
def bn_7_9(node, ctx) -> None:
    spatial = attr_value(node, ctx, "spatial", 1)
    if not spatial:
        ctx.block("spatial=0 (per-activation statistics) does not exist from opset 9")
    remove_attribute(node, "spatial")


@register("BatchNormalization", 9, 7, kind="new feature")
def bn_9_7(node, ctx) -> None:
    check_types(node, ctx)


@register("BatchNormalization", 9, 14, kind="new feature")
def bn_9_14(node, ctx) -> None:
    _trim(node)
    if len(node.output) == 1:
        return
    extra = _used_outputs(node, ctx, 3)
    if extra:
        ctx.block(f"the saved_mean/saved_var outputs {extra} do not exist from opset 14")
    del node.output[3:]
    set_attribute(node, "training_mode", 1)
    ctx.record("BatchNormalization training outputs -> training_mode=1")


@register("BatchNormalization", 14, 9, kind="new feature")
def bn_14_9(node, ctx) -> None:
    training = attr_value(node, ctx, "training_mode", 0)
    x_type = ctx.elem_type(node.input[0])
    for i in (3, 4):
        t = ctx.elem_type(node.input[i])
        if t is None or x_type is None or t != x_type:
            ctx.block(f"input '{node.input[i]}' must have the type of X below opset 14; its type is "
                      f"{'unknown' if t is None or x_type is None else 'different'}")
    remove_attribute(node, "training_mode")
    if not training:
        if _used_outputs(node, ctx, 1):
            ctx.block(f"outputs {_used_outputs(node, ctx, 1)} of an inference-mode node (training_mode=0)")
        del node.output[1:]
    else:  # BatchNormalization-9 in training mode has all 5 outputs
        while len(node.output) < 5:
            node.output.append("")
        for i in range(1, 5):
            if not node.output[i]:
                node.output[i] = ctx.fresh_name(f"{node.name or 'bn'}_running_{i}")
                record_type(ctx, node.output[i], x_type, ctx.shape(node.input[1]))
        ctx.record("BatchNormalization training_mode=1 -> training outputs")
    check_types(node, ctx)


@register("BatchNormalization", 14, 15, kind="type-only")
def bn_14_15(node, ctx) -> None:
    """15 only split the type parameters: every 14 node is a 15 node."""


@register("BatchNormalization", 15, 14, kind="type-only")
def bn_15_14(node, ctx) -> None:
    x_type = ctx.elem_type(node.input[0])
    for i in (1, 2):
        t = ctx.elem_type(node.input[i])
        if t is None or t != x_type:
            ctx.block(f"input '{node.input[i]}' must have the type of X below opset 15")
    if ctx.elem_type(node.input[3]) != ctx.elem_type(node.input[4]):
        ctx.block("input_mean and input_var must have one type below opset 15")
    check_types(node, ctx)
