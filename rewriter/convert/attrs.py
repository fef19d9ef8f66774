"""Small NodeProto attribute helpers for adapters."""

from __future__ import annotations

import onnx

__all__ = ["get_attr", "remove_attr", "set_ints"]


def get_attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    for a in node.attribute:
        if a.name == name:
            return a
    return None


def remove_attr(node: onnx.NodeProto, name: str) -> None:
    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            return


def set_ints(node: onnx.NodeProto, name: str, values: list[int]) -> None:
    remove_attr(node, name)
    node.attribute.append(onnx.AttributeProto(name=name, type=onnx.AttributeProto.INTS, ints=[int(v) for v in values]))
