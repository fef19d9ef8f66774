"""OptionalHasElement / OptionalGetElement across 18, which let them take a plain tensor or
sequence (and OptionalHasElement no input at all) besides an optional.

- up 15 -> 18: nothing.
- down 18 -> 15: an optional input keeps the node (types checked). Otherwise OptionalHasElement
  becomes a constant (false without an input, true for a plain tensor/sequence: it always has an
  element) and OptionalGetElement an Identity. An input of unknown type is refused.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.convert.registry import register
from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain

__all__: list[str] = []


def _kind(ctx, name: str) -> str | None:
    """'optional_type', 'tensor_type', 'sequence_type', or None when unknown."""
    t = ctx.value_type(name)
    if t is not None:
        return t.WhichOneof("value")
    kind, producer, where = traversal.definition(name, ctx.scope)
    if kind == "initializer":
        return "tensor_type"
    if kind == "input" and where is not None and not where.is_function:
        for vi in where.body.input:
            if vi.name == name and vi.type.WhichOneof("value"):
                return vi.type.WhichOneof("value")
    if kind == "node" and is_default_domain(producer.domain):
        if producer.op_type == "Optional":
            return "optional_type"
        if producer.op_type.startswith("Sequence") and producer.op_type not in ("SequenceAt", "SequenceLength"):
            return "sequence_type"
    return None


@register(("OptionalHasElement", 15, 18), ("OptionalGetElement", 15, 18), kind="new feature")
def _up(node, ctx) -> None:
    """Every 15 node is an 18 node."""


@register("OptionalHasElement", 18, 15, kind="new feature")
def optional_has_element_18_15(node, ctx) -> None:
    name = node.input[0] if node.input else ""
    kind = _kind(ctx, name) if name else None
    if name and kind is None:
        ctx.block(f"the type of input '{name}' is unknown: below opset 18 it must be an optional")
    if kind == "optional_type":  # every optional type of 18 exists at 15
        return
    value = np.array(bool(name))
    del node.input[:]
    del node.attribute[:]
    node.op_type = "Constant"
    node.attribute.append(onnx.helper.make_attribute("value", numpy_helper.from_array(value)))
    ctx.record(f"OptionalHasElement of {'a plain ' + kind.split('_')[0] if name else 'no input'} -> Constant")


@register("OptionalGetElement", 18, 15, kind="new feature")
def optional_get_element_18_15(node, ctx) -> None:
    kind = _kind(ctx, node.input[0])
    if kind is None:
        ctx.block(f"the type of input '{node.input[0]}' is unknown: below opset 18 it must be an optional")
    if kind == "optional_type":  # every optional type of 18 exists at 15
        return
    node.op_type = "Identity"
    ctx.record("OptionalGetElement of a plain value -> Identity")
