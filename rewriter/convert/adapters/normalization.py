"""MeanVarianceNormalization across opset 13 (bfloat16), and its missing-default defect.

MVN-13's ONNX function body reads ``@axes``; onnx does not bind the schema default
(``[0, 2, 3]``) when the node has no ``axes`` attribute, so from opset 13 on such a node makes
``check_model(full_check=True)`` fail ("One and only one of the attributes 'value', 'value_*'
... Constant"). Writing the default out is the same node and a valid one: both steps do it.

- every MVN node a conversion meets (registry normalizer, also when it takes no step, e.g. 13 -> 15):
  the default axes written out.
- up 9 -> 13: nothing else changes.
- down 13 -> 9: bfloat16 is refused (types checked); the axes stay explicit (harmless at 9).

GroupNormalization 18 <-> 21: 21 takes scale/bias per channel instead of per group. Up: each
group's value repeated C/G times. Down: GroupNormalization-18 is deprecated (the checker refuses
it): the engine expands the node into GroupNormalization-21's function body instead (831f667);
the 21 -> 18 adapter refuses, should the step ever be taken.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, check_types, record_type
from rewriter.graph.attributes import attribute, set_ints
from rewriter.convert.registry import register, register_normalizer

__all__ = ["materialize_default_axes"]

_DEFAULT_AXES = [0, 2, 3]


def materialize_default_axes(node, ctx) -> None:
    """Write MVN's default axes on a node without them (see the module doc). Also the
    normalizer of every MVN node a conversion meets, so 13 -> 15+ (no schema step) is fixed too;
    an axes attribute that references the calling function's attribute is left as it is."""
    if attribute(node, "axes") is None:
        set_ints(node, "axes", list(_DEFAULT_AXES))
        ctx.record("MeanVarianceNormalization default axes written out")


register_normalizer("MeanVarianceNormalization")(materialize_default_axes)


@register("MeanVarianceNormalization", 9, 13, kind="type-only")
def mvn_9_13(node, ctx) -> None:
    materialize_default_axes(node, ctx)


@register("MeanVarianceNormalization", 13, 9, kind="type-only")
def mvn_13_9(node, ctx) -> None:
    check_types(node, ctx)
    materialize_default_axes(node, ctx)


# ---------------------------------------------------------------- GroupNormalization 18 <-> 21

@register("GroupNormalization", 18, 21, kind="meaning change")
def group_norm_18_21(node, ctx) -> None:
    """GroupNormalization-21 takes scale and bias per channel (C) instead of per group (G): each
    group's value is repeated C/G times (numpy.repeat), as a new constant when the input is a
    constant and C is static, else with Reshape [G, 1] -> Expand [1, C/G] -> Reshape [-1]."""
    groups = attr_value(node, ctx, "num_groups")
    shape = ctx.shape(node.input[0])
    channels = shape[1] if shape is not None and len(shape) > 1 else None
    per_group = None
    if channels is not None:
        if channels % groups:
            ctx.block(f"{channels} channels do not split into {groups} groups")
        per_group = channels // groups
    for i in (1, 2):
        name = node.input[i]
        value = ctx.constant(name)
        if value is not None and per_group is not None:
            node.input[i] = add_typed_constant(ctx, f"{name}_per_channel", np.repeat(np.asarray(value), per_group))
            ctx.maybe_unused(name)
            continue
        elem = ctx.elem_type(name)
        column = ctx.insert_before("Reshape", [name, add_typed_constant(ctx, "gn_column", np.array([groups, 1]))])
        record_type(ctx, column.output[0], elem, [groups, 1])
        if per_group is not None:
            expand_shape = add_typed_constant(ctx, "gn_expand", np.array([1, per_group]))
        else:
            c = ctx.insert_before("Shape", [node.input[0]], start=1, end=2)
            k = ctx.insert_before("Div", [c.output[0], add_typed_constant(ctx, "gn_groups", np.array([groups]))])
            e = ctx.insert_before("Concat", [add_typed_constant(ctx, "gn_one", np.array([1])), k.output[0]], axis=0)
            for n, dims in ((c, [1]), (k, [1]), (e, [2])):
                record_type(ctx, n.output[0], onnx.TensorProto.INT64, dims)
            expand_shape = e.output[0]
        expanded = ctx.insert_before("Expand", [column.output[0], expand_shape])
        record_type(ctx, expanded.output[0], elem, [groups, per_group])
        flat = ctx.insert_before("Reshape", [expanded.output[0], add_typed_constant(ctx, "gn_flat", np.array([-1]))])
        record_type(ctx, flat.output[0], elem, [channels])
        node.input[i] = flat.output[0]
    ctx.record("GroupNormalization scale/bias per group -> per channel")


@register("GroupNormalization", 21, 18, kind="meaning change")
def group_norm_21_18(node, ctx) -> None:
    """GroupNormalization-18 is deprecated: the checker refuses it in a model, so no node can be
    converted to it. (The engine expands GroupNormalization-21 into its function body for targets
    18..20 before this step is reached; the step stays refused for any other way here.)"""
    ctx.block("GroupNormalization-18 is deprecated (the ONNX checker refuses it): targets 18..20 would need "
              "GroupNormalization-21's function body instead")
