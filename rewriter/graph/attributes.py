"""Reading and writing a NodeProto's attributes: the one reader every package shares (values through
``onnx.helper.get_attribute_value``; an attribute a function's caller sets is told apart)."""

from __future__ import annotations

import onnx
from onnx import helper

__all__ = ["CALLER_SET", "attribute", "attribute_int", "attribute_value", "attribute_values",
           "remove_attribute", "set_attribute", "set_ints", "value_of"]

CALLER_SET = object()  # the value of an attribute a function's caller sets (``ref_attr_name``)


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


def value_of(a: onnx.AttributeProto, *, decode: bool = False):
    """``a``'s value (:data:`CALLER_SET` when a function's caller sets it); strings, also in a list,
    decoded when ``decode``."""
    if a.ref_attr_name:
        return CALLER_SET
    v = helper.get_attribute_value(a)
    if decode and isinstance(v, bytes):
        return v.decode()
    if decode and isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    return v


def attribute_value(node: onnx.NodeProto, name: str, default=None, *, decode: bool = False):
    """The value of attribute ``name`` (``default`` when absent, :data:`CALLER_SET` when a function's
    caller sets it); a string's bytes decoded when ``decode``."""
    a = attribute(node, name)
    return default if a is None else value_of(a, decode=decode)


def attribute_values(node: onnx.NodeProto, names=None, *, decode: bool = False) -> dict:
    """Every attribute's value by name (only ``names`` when given), as :func:`attribute_value` reads it."""
    return {a.name: value_of(a, decode=decode) for a in node.attribute if names is None or a.name in names}


def remove_attribute(node: onnx.NodeProto, name: str) -> None:
    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            return


def set_attribute(node: onnx.NodeProto, name: str, value) -> None:
    """Attribute ``name`` set to ``value`` (replacing any)."""
    remove_attribute(node, name)
    node.attribute.append(helper.make_attribute(name, value))


def set_ints(node: onnx.NodeProto, name: str, values) -> None:
    """The INTS attribute ``name`` set to ``values`` (also when empty)."""
    remove_attribute(node, name)
    node.attribute.append(onnx.AttributeProto(name=name, type=onnx.AttributeProto.INTS, ints=[int(v) for v in values]))
