"""Opset-1 era attributes: ``consumed_inputs`` (dropped at 6 by the unary ops, Max/Min/Sum/Mean,
PRelu, InstanceNormalization, ...), Selu's defaults (changed at 6), Concat's optional axis (4),
GlobalLpPool's float p (2), PRelu's broadcasting (7).

- up to 6: consumed_inputs (an optimization hint) goes; Selu's old default alpha/gamma are
  written out, since 6 changed them.
- down from 6: types checked (6 added integer types to several ops); Selu's new defaults are
  written out.
- Concat up 1 -> 4: an absent axis (default 1 before 4, required from 4) is written out.
- GlobalLpPool 1 <-> 2: p float <-> int, as LpPool.
- PRelu 7 -> 6: below 7 the slope has X's shape or one element; other (broadcast) shapes refused.
"""

from __future__ import annotations

import numpy as np

from rewriter.convert.adapters.feature_support import attr_value, check_types
from rewriter.graph.attributes import attribute, remove_attribute, set_attribute
from rewriter.convert.registry import register
from rewriter.verify.shapes.rule import format_shape

__all__: list[str] = []

_CONSUMED = ("Abs", "Ceil", "Elu", "Exp", "Floor", "HardSigmoid", "LeakyRelu", "Log", "Max", "Mean", "Min", "Neg",
             "PRelu", "Reciprocal", "Relu", "Selu", "Sigmoid", "Sqrt", "Sum", "Tanh", "InstanceNormalization")
_SELU_1 = {"alpha": 1.673200011253357, "gamma": 1.0506999492645264}
_SELU_6 = {"alpha": 1.6732631921768188, "gamma": 1.0507010221481323}


def _up_to_6(node, ctx) -> None:
    if attribute(node, "consumed_inputs") is not None:
        remove_attribute(node, "consumed_inputs")
        ctx.record(f"{node.op_type} consumed_inputs dropped")
    if node.op_type == "Selu":
        for name, value in _SELU_1.items():
            if attribute(node, name) is None:
                set_attribute(node, name, value)


def _down_from_6(node, ctx) -> None:
    check_types(node, ctx)
    if node.op_type == "Selu":
        for name, value in _SELU_6.items():
            if attribute(node, name) is None:
                set_attribute(node, name, value)


for _op in _CONSUMED:
    register(_op, 1, 6, kind="new feature")(_up_to_6)
    register(_op, 6, 1, kind="type-only")(_down_from_6)


@register("Concat", 1, 4, kind="new feature")
def concat_1_4(node, ctx) -> None:
    if attribute(node, "axis") is None:
        set_attribute(node, "axis", 1)
        ctx.record("Concat default axis written out")


@register("Concat", 4, 1, kind="type-only")
def concat_4_1(node, ctx) -> None:
    check_types(node, ctx)


@register("GlobalLpPool", 1, 2, kind="meaning change")
def global_lp_pool_1_2(node, ctx) -> None:
    p = attr_value(node, ctx, "p", 2.0)
    if float(p) != int(p):
        ctx.block(f"p={p} is not an integer, and GlobalLpPool from opset 2 takes an integer p")
    if attribute(node, "p") is not None:
        set_attribute(node, "p", int(p))


@register("GlobalLpPool", 2, 1, kind="meaning change")
def global_lp_pool_2_1(node, ctx) -> None:
    check_types(node, ctx)
    if attribute(node, "p") is not None:
        set_attribute(node, "p", float(attr_value(node, ctx, "p")))


@register("PRelu", 6, 7, kind="meaning change")
def prelu_6_7(node, ctx) -> None:
    """A slope of X's shape or of one element broadcasts the same way from 7."""


@register("PRelu", 7, 6, kind="meaning change")
def prelu_7_6(node, ctx) -> None:
    check_types(node, ctx)
    x, slope = ctx.shape(node.input[0]), ctx.shape(node.input[1])
    if slope is not None and None not in slope and int(np.prod(slope)) == 1:
        return
    if x is not None and slope is not None and x == slope and None not in x:
        return
    ctx.block(f"the slope's shape {format_shape(slope)} is neither X's shape {format_shape(x)} nor one element: PRelu broadcasts "
              f"the slope only from opset 7")
