"""Shape rule against ONNX's own inference; verify_reduce_prod_shapes on good and bad declarations."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from rewriter.errors import RewriterError
from rewriter.verify.shapes.rule import DYNAMIC_AXES, ShapeRuleError, compatible, reduce_prod_output_shape
from rewriter.passes import VerifyReduceProdShapesPass
from rewriter.verify.shapes.check import check_report, verify_reduce_prod_shapes

MODELS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "models")


# ---------------------------------------------------------------- the rule vs ONNX inference

def _onnx_shape(tp: onnx.TypeProto):
    t = tp.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param") and not d.dim_param.startswith("unk__"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tuple(dims)


def _onnx_infer(version, shape, axes, keepdims, noop, axes_kind):
    """ONNX's strict inference of one ReduceProd; axes_kind: attr | init | dynamic | absent."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    inits = []
    attrs = {"keepdims": keepdims}
    node_inputs = ["x"]
    if version >= 18:
        attrs["noop_with_empty_axes"] = noop
        if axes_kind == "init":
            inits.append(numpy_helper.from_array(np.array(axes, dtype=np.int64), "axes"))
            node_inputs.append("axes")
        elif axes_kind == "dynamic":
            inputs.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [None]))
            node_inputs.append("axes")
    node = helper.make_node("ReduceProd", node_inputs, ["y"], **attrs)
    if version < 18 and axes_kind == "attr":
        node.attribute.append(helper.make_attribute("axes", axes, attr_type=onnx.AttributeProto.INTS))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    return _onnx_shape(inferred.graph.output[0].type)


dims = st.one_of(st.integers(0, 4), st.sampled_from(["N", "M"]), st.none())


@st.composite
def cases(draw):
    version = draw(st.sampled_from([1, 11, 13, 18]))
    shape = draw(st.lists(dims, min_size=0, max_size=4))
    rank = len(shape)
    kinds = ["attr", "absent"] if version < 18 else ["init", "absent"]
    kind = draw(st.sampled_from(kinds))
    axes = None
    if kind != "absent":
        picked = draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank)) if rank else []
        axes = [a - rank if draw(st.booleans()) else a for a in picked]
    return version, shape, axes, draw(st.sampled_from([0, 1])), draw(st.sampled_from([0, 1])), kind


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_rule_matches_onnx_inference(case):
    version, shape, axes, keepdims, noop, kind = case
    expected = reduce_prod_output_shape(shape, axes, keepdims=bool(keepdims),
                                        noop_with_empty_axes=bool(noop), version=version)
    assert expected == _onnx_infer(version, shape, axes, keepdims, noop, kind)


@settings(max_examples=60, deadline=None)
@given(st.lists(dims, min_size=0, max_size=4), st.sampled_from([0, 1]), st.sampled_from([0, 1]))
def test_rule_with_dynamic_axes_is_consistent_with_onnx(shape, keepdims, noop):
    expected = reduce_prod_output_shape(shape, DYNAMIC_AXES, keepdims=bool(keepdims),
                                        noop_with_empty_axes=bool(noop), version=18)
    onnx_shape = _onnx_infer(18, shape, None, keepdims, noop, "dynamic")
    if keepdims:  # the rank is known even though the axes are not
        assert expected is not None and len(expected) == len(shape)
        assert all(d in (None, 1) for d in expected)
    else:
        assert expected is None
    assert compatible(expected, onnx_shape)


@pytest.mark.parametrize("version", [11, 13])
def test_rule_rejects_out_of_range_axes_as_onnx_does(version):
    with pytest.raises(ShapeRuleError):
        reduce_prod_output_shape([2, 3], [2], version=version)
    with pytest.raises(onnx.shape_inference.InferenceError):
        _onnx_infer(version, [2, 3], [2], 1, 0, "attr")


def test_rule_knows_the_scalar_result_without_the_rank():
    assert reduce_prod_output_shape(None, None, keepdims=False) == ()
    assert reduce_prod_output_shape(None, [], keepdims=False, version=13) == ()
    assert reduce_prod_output_shape(None, [], keepdims=False, noop_with_empty_axes=True) is None
    # noop is an 18 attribute: below 18, empty axes still reduce everything
    assert reduce_prod_output_shape([2, "N"], [], keepdims=True, noop_with_empty_axes=True, version=13) == (1, 1)


# ---------------------------------------------------------------- bad declarations are caught

AXES1 = numpy_helper.from_array(np.array([1], dtype=np.int64), "ax")

BAD = {
    "graph_output_wrong_dims": ("rp", '''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2,3,4] x) => (float[2,3,4] y) { y = ReduceProd <axes=[1], keepdims=1> (x) }'''),
    "keepdims0_declared_with_input_rank": ("rp", '''<ir_version: 8, opset_import: ["" : 13]>
        g (float[N,3,4] x) => (float[N,1,4] y) { y = ReduceProd <axes=[1], keepdims=0> (x) }'''),
    "wrong_value_info_on_intermediate": ("rp", '''<ir_version: 8, opset_import: ["" : 18]>
        g (float[N,3,4] x) => (float[N,4] z) <float[N,2,4] r> {
          r = ReduceProd <keepdims=1> (x, ax)
          z = Squeeze (r, ax) }'''),
    "wrong_value_info_in_if_branch": ("rp", '''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2,3,4] x, bool c) => (float[2,4] y) {
          y = If (c) <then_branch = t () => (float[2,4] ty) { ty = ReduceProd <axes=[1], keepdims=0> (x) },
                      else_branch = e () => (float[2,4] ey) <float[2,5] er> {
                        er = ReduceProd <axes=[1], keepdims=0> (x)
                        ey = Identity (er) }> }'''),
    "declared_number_is_another_number": ("rp", '''<ir_version: 8, opset_import: ["" : 11]>
        g (float[2,3,4] x) => (float[2,1,5] y) { y = ReduceProd <axes=[-2], keepdims=1> (x) }'''),
}

# the same models, declared correctly
GOOD = {
    "graph_output_wrong_dims": ("float[2,3,4] y", "float[2,1,4] y"),
    "keepdims0_declared_with_input_rank": ("float[N,1,4] y", "float[N,4] y"),
    "wrong_value_info_on_intermediate": ("float[N,2,4] r", "float[N,1,4] r"),
    "wrong_value_info_in_if_branch": ("float[2,5] er", "float[2,4] er"),
    "declared_number_is_another_number": ("float[2,1,5] y", "float[2,1,4] y"),
}


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    for node, scope_graph in _all_nodes(model.graph):
        if node.op_type == "ReduceProd":
            node.name = "rp"
    if any("ax" in n.input for n, _ in _all_nodes(model.graph)):
        model.graph.initializer.append(AXES1)
    return model


def _all_nodes(graph):
    for node in graph.node:
        yield node, graph
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_declaration_is_reported(case):
    name, text = BAD[case]
    problems = verify_reduce_prod_shapes(_model(text))
    assert problems, case
    assert any(p.node == name and p.op_type == "ReduceProd" and p.kind == "declared" for p in problems)
    assert all(name in str(p) or p.kind == "inference-error" for p in problems)


@pytest.mark.parametrize("case", sorted(BAD))
def test_same_model_declared_correctly_is_clean(case):
    _, text = BAD[case]
    wrong, right = GOOD[case]
    assert wrong in text
    model = _model(text.replace(wrong, right))
    onnx.checker.check_model(model, full_check=True)
    assert verify_reduce_prod_shapes(model) == []


def test_problem_in_if_branch_says_where():
    problems = verify_reduce_prod_shapes(_model(BAD["wrong_value_info_in_if_branch"][1]))
    declared = [p for p in problems if p.kind == "declared"]
    assert declared[0].location.startswith("else_branch of unnamed If node")
    assert declared[0].declared == (2, 5) and declared[0].expected == (2, 4)


def test_problem_carries_the_three_shapes():
    (p,) = [p for p in verify_reduce_prod_shapes(_model(BAD["keepdims0_declared_with_input_rank"][1]))
            if p.kind == "declared"]
    assert p.expected == ("N", 4) and p.inferred == ("N", 4) and p.declared == ("N", 1, 4)
    assert "rank" in p.reason and p.location == "main graph"


def test_strict_inference_error_names_the_node():
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2,3] x) => (float[5] y) { r = ReduceProd <axes=[1], keepdims=0> (x)
          y = Identity (r) }''')
    model.graph.node[1].name = "ident"
    problems = verify_reduce_prod_shapes(model)
    assert [(p.node, p.op_type, p.kind) for p in problems] == [("ident", "Identity", "inference-error")]
    assert "ident" in str(problems[0])


def test_onnx_inference_disagreeing_with_declared_when_rule_cannot_tell():
    # axes from a graph input: the rule knows only the rank; data propagation would not help
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 18]>
        g (float[2,3] x, int64[1] a) => (float[2,1,7] y) { y = ReduceProd <keepdims=1> (x, a) }''')
    model.graph.node[0].name = "rp"
    problems = verify_reduce_prod_shapes(model)
    assert problems and problems[0].node == "rp" and "rank 3 vs 2" in problems[0].reason


# ---------------------------------------------------------------- functions

FUNCTION_MODEL = '''<ir_version: 10, opset_import: ["" : 18, "local" : 1]>
g (float[2,3,4] x, float[5,6] z) => (float[2,4] a, float[5] b) {
  a = local.F <kd = 0> (x)
  b = local.F <kd = 0> (z)
}
<domain: "local", opset_import: ["" : 18]>
F <kd> (t) => (u) {
  ax = Constant <value_ints = [1]> ()
  u = ReduceProd <keepdims: int = @kd> (t, ax)
}'''


def test_function_is_checked_at_each_call_site():
    model = onnx.parser.parse_model(FUNCTION_MODEL)
    model.functions[0].node[1].name = "frp"
    report = check_report(model)
    assert [(r.input_shape, r.expected, r.inferred, r.keepdims) for r in report.rows] == [
        ((2, 3, 4), (2, 4), (2, 4), 0), ((5, 6), (5,), (5,), 0)]
    assert report.ok
    assert all("function 'local:F'" in r.location for r in report.rows)


def test_function_value_info_contradicting_a_call_site_is_reported():
    model = onnx.parser.parse_model(FUNCTION_MODEL)
    model.functions[0].node[1].name = "frp"
    model.functions[0].value_info.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [2, 4]))
    problems = verify_reduce_prod_shapes(model)
    assert [p.node for p in problems] == ["frp"]  # fine at the first call site, wrong at the second
    assert "called by" in problems[0].location


# ---------------------------------------------------------------- sample models, API, pass

def _sample_models():
    return sorted(glob.glob(os.path.join(MODELS, "*.onnx")))


def test_every_sample_model_verifies_clean():
    paths = _sample_models()
    assert len(paths) >= 18
    for path in paths:
        model = onnx.load(path)
        assert verify_reduce_prod_shapes(model) == [], path
        assert check_report(model).rows, path


def test_accepts_onnx_ir_model_and_does_not_mutate():
    model = _model(BAD["wrong_value_info_on_intermediate"][1])
    before = model.SerializeToString()
    assert verify_reduce_prod_shapes(model)
    assert model.SerializeToString() == before
    problems = verify_reduce_prod_shapes(ir.serde.deserialize_model(model))
    assert [p.node for p in problems if p.kind == "declared"] == ["rp"]


def test_verify_reduce_prod_shapes_pass():
    good = ir.serde.deserialize_model(_model(BAD["graph_output_wrong_dims"][1].replace(
        "float[2,3,4] y", "float[2,1,4] y")))
    result = VerifyReduceProdShapesPass()(good)
    assert result.model is good and result.modified is False
    bad = ir.serde.deserialize_model(_model(BAD["graph_output_wrong_dims"][1]))
    with pytest.raises(RewriterError, match="node 'rp'"):
        VerifyReduceProdShapesPass()(bad)


def test_big_initializers_keep_their_shape_and_small_ones_their_value():
    data = numpy_helper.from_array(np.ones((64, 32), dtype=np.float32), "w")  # 8 KiB: stripped
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 18]>
        g (float[N,8] x) => (float[1,4,8,32] y) {
          r = Reshape (w, shp)
          y = ReduceProd <keepdims=1> (r, ax)
        }''')
    model.graph.initializer.extend([data, numpy_helper.from_array(np.array([2, 4, 8, 32], np.int64), "shp"),
                                    numpy_helper.from_array(np.array([0], np.int64), "ax")])
    model.graph.node[1].name = "rp"
    problems = verify_reduce_prod_shapes(model)
    # Reshape's small shape initializer was read: ONNX infers [1,4,8,32] and so does the rule
    (row,) = check_report(model).rows
    assert row.input_shape == (2, 4, 8, 32) and row.expected == (1, 4, 8, 32) == row.inferred
    assert problems == []


def test_inference_error_inside_a_function_names_node_and_call_site():
    model = onnx.parser.parse_model('''<ir_version: 10, opset_import: ["" : 13, "local" : 1]>
        g (float[2,3] x) => (float[2] y) { y = local.G (x) }
        <domain: "local", opset_import: ["" : 13]>
        G (t) => (u) {
          k = Constant <value_int = 1> ()
          s = Add (t, k)
          u = ReduceProd <axes = [1], keepdims = 0> (s)
        }''')
    model.functions[0].node[1].name = "bad_add"
    model.graph.node[0].name = "call"
    problems = verify_reduce_prod_shapes(model)
    errors = [p for p in problems if p.kind == "inference-error"]
    assert errors and errors[0].node == "bad_add" and errors[0].op_type == "Add"
    assert errors[0].location == "function 'local:G' (called by node 'call' (G) in main graph)"


def test_axes_from_a_constant_node_and_absent_axes_at_18():
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 18]>
        g (float[N,3,4] x) => (float[N,3,1] y, float[N,3,4] z, float[] w) {
          a = Constant <value_ints = [-1]> ()
          y = ReduceProd <keepdims = 1> (x, a)
          z = ReduceProd <noop_with_empty_axes = 1> (x)
          w = ReduceProd <keepdims = 0> (x)
        }''')
    report = check_report(model)
    assert [(r.axes, r.expected, r.inferred) for r in report.rows] == [
        ([-1], ("N", 3, 1), ("N", 3, 1)), (None, ("N", 3, 4), ("N", 3, 4)), (None, (), ())]
    assert report.ok
