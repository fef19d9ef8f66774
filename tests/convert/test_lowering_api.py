"""lower_ops as a whole: every scope (main graph, If branches, model-local functions), all or
nothing (every blocking node named, the input untouched), the ops chosen, the opsets (a model below
13 raised first, a result converted to the opset asked), imports and IR version kept consistent."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper

from rewriter.convert.lower_ops import lower_ops
from rewriter.convert.lowering import MIN_OPSET, LoweringBlocked, lower_nodes, lowerable_ops
from rewriter.errors import RewriterError
from tests.convert.support.lowering_oracle import ML, check_lowering, one_node, only_standard, ort_run

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
X = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)


def _scaler(inp="X", out="Y", name="scale"):
    return helper.make_node("Scaler", [inp], [out], domain=ML, name=name, scale=[2.0, 0.5, -1.0],
                            offset=[0.1, 0.0, 1.0])


def _model(nodes, opset=13, functions=(), outputs=("Y",)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", T.FLOAT, [None, 3])],
                              [helper.make_tensor_value_info(o, T.FLOAT, [None, 3]) for o in outputs])
    imports = [helper.make_opsetid(ML, 1)] + ([helper.make_opsetid("", opset)] if opset else [])
    model = helper.make_model(graph, opset_imports=imports, functions=list(functions))
    model.ir_version = 8
    return model


def test_the_main_graph_and_an_if_branch():
    branch = lambda name: helper.make_graph([_scaler("X", f"{name}_y", name)], name, [],  # noqa: E731
                                            [helper.make_tensor_value_info(f"{name}_y", T.FLOAT, [None, 3])])
    nodes = [helper.make_node("ReduceSum", ["X"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["Y"], then_branch=branch("then"), else_branch=branch("other"))]
    model = _model(nodes)
    model.graph.initializer.append(helper.make_tensor("zero", T.FLOAT, [], [0.0]))
    lowered = check_lowering(model, {"X": X})
    assert lowered.graph.node[2].attribute[0].g.node[0].op_type != "Scaler"
    check_lowering(model, {"X": -X})


def test_a_model_local_function():
    body = onnx.helper.make_function("local", "f", ["a"], ["b"], [_scaler("a", "b")],
                                     [helper.make_opsetid(ML, 1), helper.make_opsetid("", 13)])
    model = _model([helper.make_node("f", ["X"], ["Y"], domain="local")], functions=[body])
    model.opset_import.append(helper.make_opsetid("local", 1))
    lowered = check_lowering(model, {"X": X})  # the function's types come from its call site
    assert [n.op_type for n in lowered.functions[0].node].count("Constant") == 2
    assert all(o.domain != ML for o in lowered.functions[0].opset_import)


def test_every_blocking_node_is_named_and_the_input_is_untouched():
    nodes = [helper.make_node("Normalizer", ["X"], ["a"], domain=ML, name="first", norm="L7"),
             _scaler("a", "b"),
             helper.make_node("Binarizer", ["b"], ["Y"], domain=ML, name="third")]
    model = _model(nodes)
    before = model.SerializeToString()
    with pytest.raises(LoweringBlocked) as caught:
        lower_ops(model)
    assert [b.name for b in caught.value.blockers] == ["first"]
    assert "norm 'L7'" in str(caught.value) and "node 'first' (Normalizer)" in str(caught.value)
    assert model.SerializeToString() == before
    nodes[2] = helper.make_node("FeatureVectorizer", ["b"], ["Y"], domain=ML, name="fv")
    with pytest.raises(LoweringBlocked) as caught:
        lower_ops(_model(nodes), {(ML, "Normalizer"), (ML, "Scaler"), (ML, "FeatureVectorizer")})
    assert [b.name for b in caught.value.blockers] == ["first", "fv"]
    assert "no lowering of ai.onnx.ml::FeatureVectorizer" in str(caught.value)


def test_only_the_chosen_ops_are_lowered():
    model = _model([_scaler("X", "a"), helper.make_node("Normalizer", ["a"], ["Y"], domain=ML, norm="L1")])
    lowered, report = lower_ops(model, {(ML, "Normalizer")})
    assert [n.op_type for n in lowered.graph.node if n.domain == ML] == ["Scaler"]
    assert dict(report.lowered) == {(ML, "Normalizer"): 1}
    np.testing.assert_array_equal(ort_run(lowered, {"X": X})[0], ort_run(model, {"X": X})[0])
    with pytest.raises(RewriterError, match="standard ONNX ops are not lowered"):
        lower_ops(model, {("", "Relu")})


def test_none_lowers_every_op_that_has_a_lowering_and_keeps_the_rest():
    nodes = [_scaler("X", "a"), helper.make_node("FeatureVectorizer", ["a"], ["Y"], domain=ML, inputdimensions=[3])]
    lowered, report = lower_ops(_model(nodes, outputs=()))
    assert [n.op_type for n in lowered.graph.node if n.domain == ML] == ["FeatureVectorizer"]
    assert dict(report.lowered) == {(ML, "Scaler"): 1}
    assert (ML, "FeatureVectorizer") not in lowerable_ops()


def test_a_model_below_opset_13_is_raised_first():
    model = _model([helper.make_node("Relu", ["X"], ["a"]), _scaler("a", "Y")], opset=9)
    lowered, report = lower_ops(model)
    assert report.source_opset == 9 and report.opset == MIN_OPSET
    assert only_standard(lowered)
    np.testing.assert_array_equal(ort_run(lowered, {"X": X})[0], ort_run(model, {"X": X})[0])
    with pytest.raises(RewriterError, match="opset >= 13"):
        lower_nodes(model)


def test_the_result_at_the_opset_asked():
    model = _model([_scaler()], opset=15)
    for opset in (11, 18, 21):
        lowered, _ = lower_ops(model, opset=opset)
        assert next(o.version for o in lowered.opset_import if o.domain == "") == opset
        np.testing.assert_array_equal(ort_run(lowered, {"X": X})[0], ort_run(model, {"X": X})[0])


def test_a_model_without_the_default_domain_gets_it():
    lowered, report = lower_ops(_model([_scaler()], opset=None))
    assert [(o.domain, o.version) for o in lowered.opset_import] == [("", MIN_OPSET)]
    assert lowered.ir_version >= 7
    onnx.checker.check_model(lowered, full_check=True)


def test_nothing_to_lower_returns_an_equal_copy():
    model = _model([helper.make_node("Relu", ["X"], ["Y"])])
    lowered, report = lower_ops(model)
    assert lowered.SerializeToString() == model.SerializeToString() and not report.changed


def test_fresh_names_do_not_clash():
    """A value named like a lowering's would-be name keeps its meaning."""
    model = one_node("Scaler", [("X", T.FLOAT, [None, 3])], [("Y", T.FLOAT, [None, 3])], name="s",
                     scale=[2.0, 0.5, -1.0], offset=[0.1, 0.0, 1.0])
    model.graph.node[0].output[0] = "s_Sub"
    model.graph.node.append(helper.make_node("Identity", ["s_Sub"], ["Y"], name="s_Mul"))
    check_lowering(model, {"X": X})


def test_parse_ops_names():
    from rewriter.convert.lowering import parse_ops

    assert parse_ops("all") == lowerable_ops()
    assert parse_ops("ai.onnx.ml") == {k for k in lowerable_ops() if k[0] == ML}
    assert parse_ops("Scaler, ai.onnx.ml::Normalizer") == {(ML, "Scaler"), (ML, "Normalizer")}
    assert parse_ops("ai.onnx.ml::SVMClassifier") == {(ML, "SVMClassifier")}  # blocks by name when met
    with pytest.raises(RewriterError, match="did you mean 'Scaler'"):
        parse_ops("Scalar")
    with pytest.raises(RewriterError, match="nothing named"):
        parse_ops(" , ")
