"""The Reduce* family beyond ReduceProd (test_convert.py covers ReduceProd in depth): the axes
move (ReduceSum at 13, the others at 18) both ways, noop_with_empty_axes, type steps, scopes,
refusals, and the official backend cases."""

from __future__ import annotations

import ml_dtypes
import onnx
import pytest

from rewriter.convert import registry, steps
from rewriter.convert.adapters.reduce import AXES_INPUT_SINCE
from tests.convert.support.feature_util import (LATEST, TensorProto, cases, converts, convert_model, helper, model, np,
                                        reference, refused, run_backend_case)
from tests.convert.support.moves_util import constantized

OPS = sorted(op for op in AXES_INPUT_SINCE if op != "ReduceProd")
X = np.random.default_rng(0).uniform(0.5, 2.0, size=[2, 3, 4]).astype(np.float32)
I64 = TensorProto.INT64


def _axes_input(op, opset, axes, keepdims=1, noop=None, elem=TensorProto.FLOAT, name="r"):
    """One reduce node in its axes-input form; axes None = absent input."""
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs, init = ["x"], []
    if axes is not None:
        inputs.append("axes")
        init.append(helper.make_tensor("axes", I64, [len(axes)], axes))
    return model([helper.make_node(op, inputs, ["y"], name=name, **attrs)], opset,
                 [("x", elem, [2, 3, 4])], [("y", elem, None)], initializers=init)


def _axes_attr(op, opset, axes, keepdims=1, name="r"):
    node = helper.make_node(op, ["x"], ["y"], name=name, keepdims=keepdims)
    if axes is not None:
        node.attribute.append(helper.make_attribute("axes", axes, attr_type=onnx.AttributeProto.INTS))
    return model([node], opset,
                 [("x", TensorProto.FLOAT, [2, 3, 4])], [("y", TensorProto.FLOAT, None)])


def test_every_reduce_step_is_own_or_type_only_both_ways():
    for op in [*OPS, "ReduceProd"]:
        versions = registry.schema_versions(op)
        for a, b in zip(versions, versions[1:]):
            for x, y in ((a, b), (b, a)):
                assert steps.step_kind(op, x, y) in ("own", "type-only"), (op, x, y)
        move = AXES_INPUT_SINCE[op]
        assert registry.KINDS[(op, move, versions[versions.index(move) - 1])] == "attribute<->input"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, -1], 0), ([-2], 1)])
def test_axes_input_down_and_back_up(op, axes, keepdims):
    move = AXES_INPUT_SINCE[op]
    m = _axes_input(op, move, axes, keepdims)
    for target in sorted({move - 1, 11, 7}):
        result, report = converts(m, target, {"x": X})
        node = result.graph.node[0]
        assert list(node.input) == ["x"] and node.name == "r"
        attr = {a.name: a for a in node.attribute}
        assert "noop_with_empty_axes" not in attr
        expected = axes if target >= 11 else [a % 3 for a in axes]
        assert list(attr["axes"].ints) == expected
        assert not result.graph.initializer  # the axes initializer went with its last reader
        assert not report.version_converter_called
    back, _ = converts(result, LATEST, {"x": X}, expected=None)
    assert len(back.graph.node[0].input) == 2


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", [None, [], [2, 0]])
def test_axes_attribute_up(op, axes):
    m = _axes_attr(op, 11, axes)
    result, _ = converts(m, LATEST, {"x": X})
    node = result.graph.node[0]
    assert not any(a.name in ("axes", "noop_with_empty_axes") for a in node.attribute)
    assert len(node.input) == (2 if axes else 1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_noop_with_empty_or_absent_axes_becomes_identity(op):
    move = AXES_INPUT_SINCE[op]
    for axes in (None, []):
        result, _ = converts(_axes_input(op, move, axes, noop=1), move - 1, {"x": X}, expected=[X])
        assert [n.op_type for n in result.graph.node] == ["Identity"]
        assert result.graph.node[0].name == "r"


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceL2", "ReduceLogSumExp"])
def test_empty_axes_without_noop_reduce_everything(op):
    move = AXES_INPUT_SINCE[op]
    result, _ = converts(_axes_input(op, move, [], keepdims=0, noop=0), 7, {"x": X})
    assert not result.graph.node[0].attribute[0].name == "axes"
    assert [d.dim_value for d in result.graph.output[0].type.tensor_type.shape.dim] in ([], [0])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMin"])
def test_computed_axes_are_refused_naming_node_and_input(op):
    move = AXES_INPUT_SINCE[op]
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "one", "two"], ["ax"], name="slice"),
             helper.make_node(op, ["x", "ax"], ["y"], name="red")]
    init = [helper.make_tensor("one", I64, [1], [0]), helper.make_tensor("two", I64, [1], [1])]  # [2]
    m = model(nodes, move, [("x", TensorProto.FLOAT, ["n", 3, 4])], [("y", TensorProto.FLOAT, ["a", "b", "c"])],
              initializers=init)  # the axes are the first dim, known at run time only
    refused(m, move - 1, "'red'", f"{move} -> ", "axes input 'ax' is not a constant")
    converts(m, LATEST, {"x": X})  # up: nothing to move


def test_axes_that_are_a_graph_input_are_refused():
    m = model([helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean")], 18,
              [("x", TensorProto.FLOAT, [2, 3, 4]), ("axes", I64, [1])], [("y", TensorProto.FLOAT, None)])
    refused(m, 17, "'mean'", "ReduceMean 18 -> 13", "'axes' is not a constant", "targets >= 18")


def test_reduce_sum_bfloat16_is_refused_below_13_but_float_is_not():
    m = _axes_input("ReduceSum", 13, [1], elem=TensorProto.BFLOAT16)
    refused(m, 11, "'r'", "ReduceSum 13 -> 11", "bfloat16")
    refused(_axes_input("ReduceMean", 18, [1], elem=TensorProto.BFLOAT16), 12, "'r'", "bfloat16")
    converts(_axes_input("ReduceMean", 18, [1], elem=TensorProto.BFLOAT16), 13,
             {"x": X.astype(ml_dtypes.bfloat16)}, runner=reference)


def test_reduce_max_int8_down_to_11_refused_and_bool_below_20():
    refused(_axes_input("ReduceMax", 18, [1], elem=TensorProto.INT8), 11, "'r'", "ReduceMax 12 -> 11", "int8")
    refused(_axes_input("ReduceMax", 20, [1], elem=TensorProto.BOOL), 18, "'r'", "ReduceMax 20 -> 18", "bool")


def test_negative_axes_need_the_rank_below_11():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("ReduceL1", ["r", "axes"], ["o"], name="l1"),
             helper.make_node("Flatten", ["o"], ["y"], name="flat", axis=0)]
    m = model(nodes, 18, [("x", TensorProto.FLOAT, [2, 3, 4]), ("s", I64, ["n"])],
              [("y", TensorProto.FLOAT, ["a", "b"])], initializers=[helper.make_tensor("axes", I64, [1], [-1])])
    refused(m, 10, "'l1'", "rank")
    converts(m, 11, {"x": X, "s": np.array([4, 3, 2], dtype=np.int64)})


def test_shared_axes_initializer_serves_several_ops_and_goes():
    init = [helper.make_tensor("axes", I64, [1], [1])]
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], name="mean"),
             helper.make_node("ReduceMax", ["m", "axes"], ["mx"], name="max"),
             helper.make_node("Unsqueeze", ["mx", "axes"], ["y"], name="unsq")]
    m = model(nodes, 18, [("x", TensorProto.FLOAT, [2, 3, 4])], [("y", TensorProto.FLOAT, None)], initializers=init)
    result, _ = converts(m, 13, {"x": X})
    assert [i.name for i in result.graph.initializer] == ["axes"]  # Unsqueeze-13 still reads it
    result, _ = converts(m, 11, {"x": X})
    assert not result.graph.initializer


def _if_model(opset):
    """ReduceSum/ReduceMean inside If branches, axes from the main graph (an initializer)."""
    def branch(op, out):
        node = helper.make_node(op, ["x", "axes"] if opset >= AXES_INPUT_SINCE[op] else ["x"], [out],
                                name=f"in_{out}", keepdims=0,
                                **({} if opset >= AXES_INPUT_SINCE[op] else {"axes": [1]}))
        return helper.make_graph([node], out, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 4])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("ReduceSum", "t"),
                              else_branch=branch("ReduceMean", "e"))]
    return model(nodes, opset, [("c", TensorProto.BOOL, []), ("x", TensorProto.FLOAT, [2, 3, 4])],
                 [("y", TensorProto.FLOAT, [2, 4])], initializers=[helper.make_tensor("axes", I64, [1], [1])])


@pytest.mark.parametrize("source,target", [(18, 11), (18, 13), (11, 18), (13, LATEST)])
def test_inside_if_branches_with_outer_scope_axes(source, target):
    m = _if_model(source)
    for c in (True, False):
        converts(m, target, {"c": np.array(c), "x": X})


def _function_model(opset, attribute=False):
    """A model-local function whose ReduceSumSquare takes its axes from a Constant (or from the
    function's attribute 'ax')."""
    if opset >= 18:
        const = (helper.make_node("Constant", [], ["a"], name="c",
                                  value_ints=[-1]) if not attribute else onnx_ref_constant("a", "ax"))
        body = [const, helper.make_node("ReduceSumSquare", ["x", "a"], ["y"], name="fn_r", keepdims=0)]
    else:
        red = helper.make_node("ReduceSumSquare", ["x"], ["y"], name="fn_r", keepdims=0)
        if attribute:
            red.attribute.append(onnx.AttributeProto(name="axes", ref_attr_name="ax",
                                                                   type=onnx.AttributeProto.INTS))
        else:
            red.attribute.append(helper.make_attribute("axes", [-1]))
        body = [red]
    fn = helper.make_function("local", "F", ["x"], ["y"], body, [helper.make_opsetid("", opset)],
                              attributes=["ax"] if attribute else [])
    call = helper.make_node("F", ["d"], ["out"], domain="local", name="call", **({"ax": [2]} if attribute else {}))
    return model([call], opset, [("d", TensorProto.FLOAT, [2, 3, 4])], [("out", TensorProto.FLOAT, None)],
                 functions=[fn])


def onnx_ref_constant(out, attr):
    node = helper.make_node("Constant", [], [out], name="c")
    node.attribute.append(onnx.AttributeProto(name="value_ints", ref_attr_name=attr, type=onnx.AttributeProto.INTS))
    return node


@pytest.mark.parametrize("attribute", [False, True])
@pytest.mark.parametrize("source,target", [(18, 13), (13, 18), (18, 11), (11, LATEST)])
def test_inside_functions(attribute, source, target):
    m = _function_model(source, attribute)
    result, _ = converts(m, target, {"d": X})
    body = result.functions[0].node
    red = next(n for n in body if n.op_type == "ReduceSumSquare")
    assert len(red.input) == (2 if target >= 18 else 1)
    if attribute:
        refs = [a.ref_attr_name for n in body for a in n.attribute if a.ref_attr_name]
        assert refs == ["ax"]


def test_function_attribute_axes_cannot_go_below_11():
    refused(_function_model(18, attribute=True), 9, "'fn_r'", "calling node's attribute 'ax'")


# ---------------------------------------------------------------- the official backend cases

@pytest.mark.parametrize("case", cases(*OPS), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case, (7, 11, 13, 17, 18))


@pytest.mark.parametrize("case", [c for c in cases(*OPS) if len(c.model.graph.input) > 1], ids=lambda c: c.name)
def test_backend_cases_with_constant_axes(case):
    """The same cases with their axes made an initializer: the downward steps move them."""
    k = constantized(case)
    done = run_backend_case(k, (7, 11, 13, 17, 18))
    source = next(o.version for o in case.model.opset_import if o.domain == "")
    dtype = case.model.graph.input[0].type.tensor_type.elem_type
    if dtype != TensorProto.BOOL:
        assert done == len([t for t in (7, 11, 13, 17, 18) if t != source])
    else:
        assert done == 0
        for target in (7, 18):
            with pytest.raises(Exception, match="bool"):
                convert_model(k.model, target)
