"""Dropout across opsets 6, 7, 10 and 12 (inference semantics: the output is the input).

- 1 <-> 6: ``consumed_inputs`` (a legacy hint) went. Up drops it; down changes nothing.
- 6 <-> 7: ``is_test`` went (Dropout-7 and later are the identity at inference). Up drops it;
  down writes ``is_test=1`` (Dropout-6's default 0 would drop values at random).
- 7 <-> 10: the ``mask`` output became bool. A used mask gets a Cast to the type the
  consumers expect (T going up, bool going down); ONNX Runtime's inference mask is 0 / False
  at both, which the Cast keeps.
- The inference mask changed at 12: all True (ONNX Runtime: all False at 7 and 10). Down 12 -> 10
  a used mask becomes a constant all-True tensor when the data's shape is static, otherwise
  the step blocks; up 10 -> 12 a used mask blocks (its value is runtime-defined below 12). An
  unused mask output (no reader, not an output of the graph) is dropped.
- 10 <-> 12: ``ratio`` moved to an optional input, ``training_mode`` and ``seed`` were added.
  Up: a ratio attribute becomes a constant float scalar input. Down: ratio must be absent or
  a constant scalar (it becomes the attribute), training_mode absent or a constant false,
  seed is dropped (it only matters in training mode); training_mode true with a constant
  ratio 0 is the identity too; otherwise blocked.
(12 <-> 13, 13 <-> 22: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import attr_value, consumed, record_type
from rewriter.convert.adapters.moves import check_types, constant_input, input_name, trim_inputs
from rewriter.graph.attributes import attribute, remove_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Dropout", 1, 6, kind="new feature")
def dropout_1_6(node, ctx) -> None:
    remove_attribute(node, "consumed_inputs")


@register("Dropout", 6, 1, kind="new feature")
def dropout_6_1(node, ctx) -> None:
    """Dropout-1 has the same attributes (consumed_inputs is optional)."""


@register("Dropout", 6, 7, kind="new feature")
def dropout_6_7(node, ctx) -> None:
    if attribute(node, "is_test") is not None:
        attr_value(node, ctx, "is_test")
        remove_attribute(node, "is_test")
        ctx.record("Dropout is_test dropped")


@register("Dropout", 7, 6, kind="new feature")
def dropout_7_6(node, ctx) -> None:
    remove_attribute(node, "is_test")
    node.attribute.append(onnx.helper.make_attribute("is_test", 1))
    ctx.record("Dropout is_test=1 written out")


# masks this conversion redirected to a Cast inserted after the node (read by a node the
# engine has not put in the body yet, so consumed cannot see the reader); names are fresh
_CAST_MASKS: set[str] = set()


def _drop_unused_mask(node, ctx) -> bool:
    """Drop an unused mask output; whether a used one remains."""
    if len(node.output) < 2 or not node.output[1]:
        return False
    if node.output[1] in _CAST_MASKS or consumed(ctx, node.output[1]):
        return True
    del node.output[1:]
    ctx.record("Dropout unused mask dropped")
    return False


def _mask_cast(node, ctx, to_bool: bool) -> None:
    """The node's mask now has the other type: the consumers get it cast back."""
    if not _drop_unused_mask(node, ctx):
        return
    elem = ctx.elem_type(node.input[0])
    if not elem:
        ctx.block(f"the mask output '{node.output[1]}' is used and the type of '{node.input[0]}' is unknown "
                  f"(the mask's type changed at opset 10)")
    shape = ctx.shape(node.input[0])
    original = node.output[1]
    fresh = ctx.redirect_output(1)
    _CAST_MASKS.add(fresh)
    record_type(ctx, fresh, elem if to_bool else onnx.TensorProto.BOOL, shape)
    ctx.insert_after("Cast", [fresh], [original], to=onnx.TensorProto.BOOL if to_bool else elem)
    ctx.record("Dropout mask cast")


@register("Dropout", 7, 10, kind="meaning change")
def dropout_7_10(node, ctx) -> None:
    _mask_cast(node, ctx, to_bool=False)


@register("Dropout", 10, 7, kind="meaning change")
def dropout_10_7(node, ctx) -> None:
    _mask_cast(node, ctx, to_bool=True)


@register("Dropout", 10, 12, kind="attribute<->input")
def dropout_10_12(node, ctx) -> None:
    if _drop_unused_mask(node, ctx):
        ctx.block(f"the mask output '{node.output[1]}' is used: Dropout-10's inference mask is runtime-defined "
                  f"(ONNX Runtime: all False), Dropout-12's is all True")
    ratio = attr_value(node, ctx, "ratio", None)
    remove_attribute(node, "ratio")
    if ratio is not None:
        del node.input[1:]
        node.input.append(ctx.add_constant("dropout_ratio", np.array(ratio, dtype=np.float32)))
        ctx.record("Dropout ratio attribute -> input")


@register("Dropout", 12, 10, kind="attribute<->input")
def dropout_12_10(node, ctx) -> None:
    ratio = constant_input(node, ctx, 1, "ratio", 12) if input_name(node, 1) else None
    if ratio is not None and ratio.size != 1:
        ctx.block(f"ratio input '{node.input[1]}' is not a scalar")
    if input_name(node, 2):
        training = constant_input(node, ctx, 2, "training_mode", 12)
        if training.size != 1 or bool(training.reshape(-1)[0]) and (ratio is None or float(ratio.reshape(-1)[0])):
            ctx.block(f"training_mode input '{node.input[2]}' is true (training_mode exists from opset 12)")
        ctx.maybe_unused(node.input[2])
    if ratio is not None:
        ctx.maybe_unused(node.input[1])
    trim_inputs(node, 1)
    if attribute(node, "seed") is not None:
        remove_attribute(node, "seed")
        ctx.record("Dropout seed dropped")
    if ratio is not None:
        node.attribute.append(onnx.helper.make_attribute("ratio", float(ratio.reshape(-1)[0])))
        ctx.record("Dropout ratio input -> attribute")
    check_types(node, ctx)
    if _drop_unused_mask(node, ctx):
        shape = ctx.shape(node.input[0])
        if shape is None or None in shape:
            ctx.block(f"the mask output '{node.output[1]}' is used and the shape of '{node.input[0]}' is not "
                      f"static: Dropout-12's inference mask is all True, Dropout-10's runtime-defined")
        ones = ctx.add_constant("dropout_mask", np.ones(shape, dtype=bool))
        mask = node.output[1]
        del node.output[1:]
        ctx.insert_after("Identity", [ones], [mask])
        ctx.record("Dropout mask -> constant all True")
