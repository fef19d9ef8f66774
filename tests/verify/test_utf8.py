"""Strings that are not UTF-8: found at C speed (rewriter.verify.inputs.utf8), named by validate_model.

ONNX's proto2 parser accepts any bytes in a string field, and protobuf hands such a field to
Python as ``bytes``. The oracle is Python itself: a model is built with a marker string, the
marker's bytes are replaced by invalid UTF-8 in the serialized model, and whether protobuf
then returns ``bytes`` for the field decides what is expected.
"""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from onnx import TensorProto, helper, numpy_helper

from rewriter.errors import RewriterError
from rewriter.verify.inputs.utf8 import all_text_utf8
from rewriter.verify.inputs import validate_model

MARK = "QQQQ"
BAD = b"Q\xffQQ"  # same length: lengths in the serialized model stay right
F = TensorProto.FLOAT


def _model(**names) -> onnx.ModelProto:
    """x -> Relu -> If(then: Identity) -> y, with a Loop-free function; every name overridable."""
    n = {"node": "relu", "op": "Relu", "out": "r", "sub_node": "ident", "sub_in": "r", "doc": "",
         "graph_in": "x", "fn_node": "fneg", "meta": "v"} | names
    then = helper.make_graph([helper.make_node("Identity", [n["sub_in"]], ["t"], name=n["sub_node"])], "then",
                             [], [helper.make_tensor_value_info("t", F, [2])])
    other = helper.make_graph([helper.make_node("Identity", ["w"], ["e"], name="ident2")], "else",
                              [], [helper.make_tensor_value_info("e", F, [2])])
    nodes = [helper.make_node(n["op"], [n["graph_in"]], [n["out"]], name=n["node"], doc_string=n["doc"]),
             helper.make_node("ReduceSum", [n["out"]], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other),
             helper.make_node("Neg2", ["y"], ["z"], name="call", domain="local")]
    fn = helper.make_function("local", "Neg2", ["a"], ["b"],
                              [helper.make_node("Neg", ["a"], ["b"], name=n["fn_node"])],
                              [helper.make_opsetid("", 13)])
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n["graph_in"], F, [2])],
                              [helper.make_tensor_value_info("z", F, [2])],
                              [numpy_helper.from_array(np.ones(2, np.float32), "w"),
                               numpy_helper.from_array(np.zeros((), np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                              functions=[fn])
    helper.set_model_props(model, {"k": n["meta"]})
    model.ir_version = 8
    return model


def _broken(model: onnx.ModelProto) -> onnx.ModelProto:
    data = model.SerializeToString()
    assert data.count(MARK.encode()) >= 1
    return onnx.ModelProto.FromString(data.replace(MARK.encode(), BAD))


def test_a_valid_model_passes_and_is_valid_for_the_checker():
    model = _model()
    onnx.checker.check_model(model)
    assert all_text_utf8(model)
    assert validate_model(model) is None


@pytest.mark.parametrize("field, where", [
    ("node", "node #0 in main graph"),
    ("out", "node #0 in main graph"),
    ("op", "node #0 in main graph"),
    ("sub_node", "node #0 in then_branch"),
    ("fn_node", "node #0 in function 'local:Neg2'"),
])
def test_a_node_string_that_is_not_utf8_is_found_and_named(field, where):
    model = _broken(_model(**{field: MARK}))
    assert not all_text_utf8(model)
    with pytest.raises(RewriterError, match="not valid UTF-8") as e:
        validate_model(model, "m.onnx")
    assert str(e.value).startswith(f"m.onnx: {where}")


def test_a_graph_input_name_that_is_not_utf8_is_refused():
    model = _broken(_model(graph_in=MARK))
    assert isinstance(model.graph.input[0].name, bytes)  # the premise: protobuf hands back bytes
    assert not all_text_utf8(model)
    with pytest.raises(RewriterError, match="a name in main graph is not valid UTF-8"):
        validate_model(model, "m.onnx")


def test_a_doc_string_that_is_not_utf8_is_found_but_not_refused():
    """Nothing reads a node's doc string as text: such a model was always processed."""
    model = _broken(_model(doc=MARK))
    assert isinstance(model.graph.node[0].doc_string, bytes)
    assert not all_text_utf8(model)
    assert validate_model(model, "m.onnx") is None


def test_model_metadata_is_not_the_graphs_business():
    model = _broken(_model(meta=MARK))
    assert all_text_utf8(model)


def test_a_big_graph_is_checked_through_a_light_copy(monkeypatch):
    import rewriter.verify.inputs.utf8 as utf8

    monkeypatch.setattr(utf8, "DIRECT_BYTES", 0)
    assert utf8.all_text_utf8(_model())
    assert not utf8.all_text_utf8(_broken(_model(node=MARK)))
    assert not utf8.all_text_utf8(_broken(_model(sub_node=MARK)))


_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="Q\x00"), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(names=st.fixed_dictionaries({k: _TEXT for k in ("node", "out", "sub_node", "fn_node", "doc")}),
       broken=st.sampled_from([None, "node", "out", "sub_node", "fn_node", "doc"]))
def test_the_fast_check_agrees_with_what_protobuf_hands_back(names, broken):
    names = dict(names)
    if len(set(names.values()) - {names["doc"]}) < 4:
        return  # names must stay distinct for a valid graph
    if broken is not None:
        names[broken] = MARK
    model = _model(**names)
    if broken is not None:
        model = _broken(model)
    values = [model.graph.node[0].name, model.graph.node[0].output[0], model.graph.node[0].doc_string,
              next(a.g for a in model.graph.node[3].attribute if a.name == "then_branch").node[0].name, model.functions[0].node[0].name]
    expected = all(isinstance(v, str) for v in values)
    assert all_text_utf8(model) is expected
