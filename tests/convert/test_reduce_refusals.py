"""ReduceProd refusals a looser adapter would turn into a silently different model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.convert import convert_model


def _function_model(noop: int) -> onnx.ModelProto:
    """A function whose ReduceProd axes are Constant<value_ints = @ax>, with noop_with_empty_axes."""
    const = helper.make_node("Constant", [], ["ax"])
    const.attribute.append(onnx.AttributeProto(name="value_ints", ref_attr_name="axes",
                                               type=onnx.AttributeProto.INTS))
    body = [const, helper.make_node("ReduceProd", ["x", "ax"], ["y"], name="fn_prod", keepdims=1,
                                    noop_with_empty_axes=noop)]
    fn = helper.make_function("local", "Prod", ["x"], ["y"], body, opset_imports=[helper.make_opsetid("", 18)],
                              attributes=["axes"])
    graph = helper.make_graph([helper.make_node("Prod", ["x"], ["y"], domain="local", axes=[1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])])
    model = helper.make_model(graph, functions=[fn], opset_imports=[helper.make_opsetid("", 18),
                                                                     helper.make_opsetid("local", 1)])
    model.ir_version = 9
    return model


def test_axes_from_the_call_with_noop_cannot_go_below_18():
    """noop_with_empty_axes=1 with call-time axes: the axes may be empty at a call (Identity) or
    not, which no attribute form below 18 can say; dropping noop would reduce everything."""
    with pytest.raises(rewriter.RewriterError, match=r"'fn_prod'"):
        convert_model(_function_model(noop=1), 13)


def test_axes_from_the_call_without_noop_become_an_attribute_reference():
    result, _ = convert_model(_function_model(noop=0), 13)
    (prod,) = [n for n in result.functions[0].node if n.op_type == "ReduceProd"]
    assert [(a.name, a.ref_attr_name) for a in prod.attribute if a.name == "axes"] == [("axes", "axes")]


def test_axes_that_are_not_1d_int64_are_refused_through_the_python_api():
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x", "axes"], ["y"], name="rp", keepdims=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
                              [numpy_helper.from_array(np.array([1], dtype=np.int32), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(rewriter.RewriterError, match=r"'rp'.*must be a 1-D int64 tensor"):
        rewriter.convert_opset(model, 13)


def test_an_out_of_range_negative_axis_is_refused_below_11_not_wrapped():
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x"], ["y"], name="rp", axes=[-4], keepdims=1)],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(rewriter.RewriterError, match=r"'rp'.*axis -4 is out of range for rank 3"):
        convert_model(model, 10)
