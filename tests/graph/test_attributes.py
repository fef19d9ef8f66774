"""The one attribute reader (rewriter/graph/attributes.py): values as onnx.helper reads them, a value a
function's caller sets told apart, strings decoded on request, removal and replacement."""

from __future__ import annotations

import onnx
from onnx import helper

from rewriter.graph.attributes import (CALLER_SET, attribute, attribute_int, attribute_value, attribute_values,
                                       remove_attribute, set_attribute, set_ints, value_of)


def _node():
    node = helper.make_node("Foo", ["x"], ["y"], axis=2, mode="linear", names=["a", "b"], scale=0.5)
    ref = onnx.AttributeProto(name="alpha", ref_attr_name="outer_alpha", type=onnx.AttributeProto.FLOAT)
    node.attribute.append(ref)
    return node


def test_values_as_onnx_reads_them():
    node = _node()
    assert attribute(node, "axis").i == 2
    assert attribute(node, "missing") is None
    assert attribute_int(node, "axis") == 2
    assert attribute_int(node, "missing", 7) == 7
    assert attribute_value(node, "scale") == 0.5
    assert attribute_value(node, "mode") == b"linear"
    assert attribute_value(node, "missing", "dflt") == "dflt"


def test_strings_decoded_on_request_also_in_lists():
    node = _node()
    assert attribute_value(node, "mode", decode=True) == "linear"
    assert attribute_value(node, "names", decode=True) == ["a", "b"]
    assert attribute_value(node, "names") == [b"a", b"b"]
    assert value_of(attribute(node, "names"), decode=True) == ["a", "b"]


def test_a_value_the_caller_sets_is_told_apart():
    node = _node()
    assert attribute_value(node, "alpha") is CALLER_SET
    assert attribute_values(node)["alpha"] is CALLER_SET
    assert attribute_value(node, "scale") is not CALLER_SET


def test_attribute_values_reads_every_or_the_named():
    node = _node()
    assert set(attribute_values(node)) == {"axis", "mode", "names", "scale", "alpha"}
    assert attribute_values(node, ("axis", "scale", "absent")) == {"axis": 2, "scale": 0.5}


def test_remove_and_set():
    node = _node()
    remove_attribute(node, "axis")
    assert attribute(node, "axis") is None and len(node.attribute) == 4
    remove_attribute(node, "absent")
    assert len(node.attribute) == 4
    set_attribute(node, "mode", "nearest")
    assert attribute_value(node, "mode", decode=True) == "nearest"
    assert [a.name for a in node.attribute].count("mode") == 1
    set_ints(node, "axes", [])
    a = attribute(node, "axes")
    assert a.type == onnx.AttributeProto.INTS and list(a.ints) == []
    set_ints(node, "axes", [1, -1])
    assert attribute_value(node, "axes") == [1, -1]
    assert [a.name for a in node.attribute].count("axes") == 1
