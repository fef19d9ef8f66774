"""Reading a NodeProto's attributes: the one reader the precision wing and the graph helpers share."""

from __future__ import annotations

import onnx

__all__ = ["attribute", "attribute_int"]


def attribute(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    """``node``'s attribute ``name``, or None."""
    for a in node.attribute:
        if a.name == name:
            return a
    return None


def attribute_int(node: onnx.NodeProto, name: str, default: int | None = None) -> int | None:
    """The integer attribute ``name`` of ``node``, or ``default`` when absent."""
    a = attribute(node, name)
    return default if a is None else a.i
