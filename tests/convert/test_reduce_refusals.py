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
    with pytest.raises(rewriter.RewriterError, match=r"'rp'.*axes input must be int64, got int32"):
        rewriter.convert_opset(model, 13)


def test_an_out_of_range_negative_axis_is_refused_below_11_not_wrapped():
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x"], ["y"], name="rp", axes=[-4], keepdims=1)],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(rewriter.RewriterError, match=r"'rp'.*axis -4 is out of range for rank 3"):
        convert_model(model, 10)


def _opset11_model(x_shape, axes, y_shape=None) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x"], ["y"], name="rp", axes=axes, keepdims=1)],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 6
    return model


def test_negative_axes_are_normalized_below_11_with_the_rank():
    result, report = convert_model(_opset11_model([2, 3, 4], [-1, 0], [1, 3, 1]), 10)
    (prod,) = result.graph.node
    assert [list(a.ints) for a in prod.attribute if a.name == "axes"] == [[2, 0]]
    assert report.changes["negative axes normalized"] == 1 and report.own["ReduceProd"] == 1


def test_negative_axes_of_an_unknown_rank_are_refused_below_11():
    with pytest.raises(rewriter.RewriterError, match=r"node 'rp' \(ReduceProd\).*11 -> 1: negative axes \[-1\] "
                                                     r"cannot be converted below opset 11 because the rank of "
                                                     r"'x' is unknown"):
        convert_model(_opset11_model(None, [-1]), 10)
    _, report = convert_model(_opset11_model(None, [1]), 10, plan_only=True)  # axes >= 0 need no rank
    assert not report.blockers


def test_axes_from_the_call_cannot_go_below_11():
    prod = helper.make_node("ReduceProd", ["x"], ["y"], name="fn_prod", keepdims=1)
    prod.attribute.append(onnx.AttributeProto(name="axes", ref_attr_name="ax", type=onnx.AttributeProto.INTS))
    fn = helper.make_function("local", "Prod", ["x"], ["y"], [prod], opset_imports=[helper.make_opsetid("", 11)],
                              attributes=["ax"])
    graph = helper.make_graph([helper.make_node("Prod", ["x"], ["y"], domain="local", ax=[-1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])])
    model = helper.make_model(graph, functions=[fn], opset_imports=[helper.make_opsetid("", 11),
                                                                     helper.make_opsetid("local", 1)])
    model.ir_version = 8
    with pytest.raises(rewriter.RewriterError, match=r"'fn_prod'.*axes come from the calling node's attribute "
                                                     r"'ax', so negative values among them cannot be normalized"):
        convert_model(model, 10)


def test_bfloat16_data_is_refused_below_13_naming_the_node():
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x"], ["y"], name="rp", axes=[0], keepdims=1)],
                              "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [1, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    for target in (12, 11, 7):
        with pytest.raises(rewriter.RewriterError, match=r"node 'rp' \(ReduceProd\) in main graph: ReduceProd "
                                                         r"13 -> 11: .*bfloat16.*would work for targets >= 13"):
            convert_model(model, target)


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceMean", "ReduceSumSquare"])
def test_data_of_unknown_type_is_refused_below_13_like_every_reduce_op(op):
    """In a function no node calls, nothing says the data is not bfloat16: the type-only rule
    refuses the step, for ReduceProd as for the other Reduce ops (13 added bfloat16 to each)."""
    fn = helper.make_function("local", "F", ["x"], ["y"], [helper.make_node(op, ["x"], ["y"], axes=[0],
                                                                           keepdims=0)],
                              [helper.make_opsetid("", 13)])
    graph = helper.make_graph([helper.make_node("Relu", ["a"], ["b"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                              functions=[fn])
    model.ir_version = 8
    _, report = convert_model(model, 11, plan_only=True)
    (blocker,) = report.blockers
    assert (blocker.op, blocker.step, blocker.where) == (op, "13 -> 11", "function 'local:F'")
    assert "the type of input 'x' is unknown" in blocker.reason
