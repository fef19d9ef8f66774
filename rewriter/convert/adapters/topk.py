"""TopK across opsets 10 and 11.

- 1 <-> 10: ``k`` moved from an attribute to an int64 input of shape [1]. Up: constant input;
  down: a constant K becomes the attribute, a computed one blocks.
- 10 <-> 11: ``largest`` and ``sorted`` added (defaults 1), integer types added. Down:
  sorted=0 leaves the order unspecified, so a sorted result is one valid answer: dropped;
  largest=0 (the k smallest) becomes TopK of the negated data with the values negated back
  (exact for the float types TopK-10 takes; ties keep the lower index either way); integer
  data blocks. Up: nothing.
(11 <-> 24: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import attr_value
from rewriter.convert.adapters.moves import check_types, constant_input, input_name
from rewriter.graph.attributes import attribute, remove_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("TopK", 1, 10, kind="attribute<->input")
def topk_1_10(node, ctx) -> None:
    k = attr_value(node, ctx, "k", None)
    if k is None:
        ctx.block("TopK-1 without its required k attribute")
    remove_attribute(node, "k")
    del node.input[1:]
    node.input.append(ctx.add_constant("topk_k", np.array([k], dtype=np.int64)))
    ctx.record("TopK k attribute -> input")


@register("TopK", 10, 1, kind="attribute<->input")
def topk_10_1(node, ctx) -> None:
    if not input_name(node, 1):
        ctx.block("TopK without its K input")
    k = constant_input(node, ctx, 1, "k", 10)
    if k.size != 1:
        ctx.block(f"K input '{node.input[1]}' does not hold one value")
    ctx.maybe_unused(node.input[1])
    del node.input[1:]
    node.attribute.append(onnx.helper.make_attribute("k", int(k.reshape(-1)[0])))
    ctx.record("TopK K input -> attribute")


@register("TopK", 10, 11, kind="new feature")
def topk_10_11(node, ctx) -> None:
    """TopK-11 with the default largest/sorted is TopK-10."""


@register("TopK", 11, 10, kind="new feature")
def topk_11_10(node, ctx) -> None:
    largest = attr_value(node, ctx, "largest", 1)
    attr_value(node, ctx, "sorted", 1)
    if attribute(node, "sorted") is not None:
        remove_attribute(node, "sorted")
        ctx.record("TopK sorted dropped")
    remove_attribute(node, "largest")
    check_types(node, ctx)
    if largest:
        return
    data_type = ctx.value_type(node.input[0])
    negated = ctx.insert_before("Neg", [node.input[0]]).output[0]
    node.input[0] = negated
    if data_type is not None:
        ctx.set_type(negated, data_type)
    if node.output[0]:
        original = node.output[0]
        out_type = ctx.value_type(original)
        values = ctx.redirect_output(0)
        if out_type is not None:
            ctx.set_type(values, out_type)
        ctx.insert_after("Neg", [values], [original])
    ctx.record("TopK largest=0 -> Neg, TopK, Neg")
