"""A function body's attribute references bound to a call's values."""

from __future__ import annotations

import onnx

from rewriter.graph.traversal import attribute_graphs

__all__ = ["bind_attribute_refs"]


def bind_attribute_refs(node: onnx.NodeProto, values: dict[str, onnx.AttributeProto]) -> None:
    """Replace, in place, ``node``'s attribute references (``ref_attr_name``) by ``values`` (the
    call's attributes, or the function's defaults), in its subgraphs too; a reference to an
    attribute ``values`` lacks is left out, as ONNX specifies (the schema default applies)."""
    keep = []
    for a in node.attribute:
        b = onnx.AttributeProto()
        if a.ref_attr_name:
            value = values.get(a.ref_attr_name)
            if value is None:
                continue
            b.CopyFrom(value)
            b.name = a.name
        else:
            b.CopyFrom(a)
            for g in attribute_graphs(b):
                for n in g.node:
                    bind_attribute_refs(n, values)
        keep.append(b)
    del node.attribute[:]
    node.attribute.extend(keep)
