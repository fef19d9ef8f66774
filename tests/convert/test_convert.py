"""Opset conversion of ReduceProd: validity and numerical equality against ORT / onnx.reference."""

from __future__ import annotations

import collections
import itertools

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.convert import registry as adapters
from rewriter.convert import convert_model, steps
from tests.oracle import assert_same_outputs, assert_valid, run

SOURCES = (1, 11, 13, 18)
TARGETS = (1, 11, 13, 18, 21, 28)
SHAPE = [3, 2, 4]
DTYPES = {
    "float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
    "uint32": np.uint32, "uint64": np.uint64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
}
# (name, axes, keepdims, noop): axes None = absent
VARIANTS = (
    ("one_axis_keep", [1], 1, 0),
    ("one_axis_drop", [1], 0, 0),
    ("absent_keep", None, 1, 0),
    ("absent_drop", None, 0, 0),
    ("negative", [-1], 1, 0),
    ("multiple_negative", [0, -1], 0, 0),
    ("empty", [], 1, 0),
    ("absent_noop", None, 1, 1),
    ("empty_noop", [], 0, 1),
    ("axes_noop_ignored", [2], 1, 1),
)


def _tensor_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _ir(opset: int) -> int:
    return max(7, helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))


def _typed(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fill in the outputs' shapes (the checker requires them) from ONNX's own inference."""
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def reduce_model(opset, dtype, axes, keepdims, noop=0, axes_as="initializer"):
    """One ReduceProd in the form of ``opset`` (axes attribute below 18, input from 18)."""
    inits, nodes, attrs = [], [], {"keepdims": keepdims}
    inputs = ["data"]
    if opset >= 18:
        if noop:
            attrs["noop_with_empty_axes"] = 1
        if axes is not None:
            value = np.array(axes, dtype=np.int64)
            if axes_as == "initializer":
                inits.append(numpy_helper.from_array(value, "axes"))
            elif axes_as == "value":
                nodes.append(helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(value)))
            else:
                nodes.append(helper.make_node("Constant", [], ["axes"], value_ints=list(axes)))
            inputs.append("axes")
    nodes.append(helper.make_node("ReduceProd", inputs, ["out"], name="prod", **attrs))
    if opset < 18 and axes is not None:
        nodes[-1].attribute.append(helper.make_attribute("axes", axes, attr_type=onnx.AttributeProto.INTS))
    elem = _tensor_type(dtype)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("data", elem, SHAPE)],
                              [helper.make_tensor_value_info("out", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = _ir(opset)
    return _typed(model)


def sample(dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(1, 4, size=SHAPE).astype(dtype)
    return rng.uniform(0.5, 1.5, size=SHAPE).astype(dtype)


def _allowed(source, dtype_name, axes, noop):
    if source < 13 and dtype_name == "bfloat16":
        return False
    if source < 11 and axes and min(axes) < 0:
        return False
    if source < 18 and noop:
        return False
    return True


def _cases():
    for source, target, (name, axes, keepdims, noop), dtype_name in itertools.product(
        SOURCES, TARGETS, VARIANTS, DTYPES
    ):
        if _allowed(source, dtype_name, axes, noop):
            yield pytest.param(source, target, axes, keepdims, noop, dtype_name,
                               id=f"{source}->{target}-{name}-{dtype_name}")


@pytest.mark.parametrize("source,target,axes,keepdims,noop,dtype_name", list(_cases()))
def test_matrix(source, target, axes, keepdims, noop, dtype_name):
    dtype = DTYPES[dtype_name]
    model = reduce_model(source, dtype, axes, keepdims, noop)
    feeds = {"data": sample(dtype)}
    if target < 13 and dtype_name == "bfloat16":
        with pytest.raises(rewriter.RewriterError, match="'prod'.*bfloat16"):
            convert_model(model, target)
        return
    result, _ = convert_model(model, target)
    assert_valid(result)
    assert result.opset_import[0].version == target
    assert_same_outputs(run(model, feeds), run(result, feeds))
    for node in result.graph.node:
        if node.op_type == "ReduceProd":
            names = {a.name for a in node.attribute}
            assert ("noop_with_empty_axes" in names) <= (target >= 18)
            assert ("axes" in names) <= (target < 18)
            assert (len(node.input) > 1) <= (target >= 18)
            if target < 11:
                assert all(a >= 0 for a in next((a.ints for a in node.attribute if a.name == "axes"), []))


@pytest.mark.parametrize("axes_as", ["initializer", "value", "value_ints"])
@pytest.mark.parametrize("target", [1, 11, 13])
def test_down_from_18_axes_forms(axes_as, target):
    model = reduce_model(18, np.float32, [0, -1], 0, axes_as=axes_as)
    result, report = convert_model(model, target)
    assert_valid(result)
    (node,) = result.graph.node  # the axes Constant or initializer is gone
    assert not result.graph.initializer
    assert [list(a.ints) for a in node.attribute if a.name == "axes"] == [[0, 2] if target < 11 else [0, -1]]
    assert report.changes["axes input -> attribute"] == 1
    feeds = {"data": sample(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_noop_with_absent_axes_becomes_identity():
    model = reduce_model(18, np.float32, None, 1, noop=1)
    result, _ = convert_model(model, 13)
    assert [n.op_type for n in result.graph.node] == ["Identity"]
    assert not result.graph.node[0].attribute


def test_axes_initializer_still_used_elsewhere_is_kept():
    model = reduce_model(18, np.int64, [1], 1)
    model.graph.node.append(helper.make_node("Abs", ["axes"], ["abs_axes"]))
    model.graph.output.append(helper.make_tensor_value_info("abs_axes", TensorProto.INT64, [1]))
    result, _ = convert_model(model, 13)
    assert [t.name for t in result.graph.initializer] == ["axes"]
    feeds = {"data": sample(np.int64)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_shared_axes_initializer_converted_for_both_nodes_then_removed():
    model = reduce_model(18, np.float32, [2], 1)
    model.graph.node.append(helper.make_node("ReduceProd", ["out", "axes"], ["out2"], name="prod2"))
    model.graph.output.append(helper.make_tensor_value_info("out2", TensorProto.FLOAT, None))
    model = _typed(model)
    result, report = convert_model(model, 13)
    assert not result.graph.initializer
    assert report.changes["axes input -> attribute"] == 2
    feeds = {"data": sample(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def _if_model(opset, axes_in_outer=True):
    """ReduceProd inside an If branch nested in a Loop-free If, axes from the main graph."""
    if opset >= 18:
        inner = helper.make_node("ReduceProd", ["data", "axes"], ["t"], name="inner_prod", keepdims=0)
    else:
        inner = helper.make_node("ReduceProd", ["data"], ["t"], name="inner_prod",
                                 axes=[-1] if opset >= 11 else [0], keepdims=0)
    deeper = helper.make_graph([inner], "deep", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [])])
    then_g = helper.make_graph(
        [helper.make_node("If", ["cond"], ["tt"], then_branch=deeper, else_branch=deeper)],
        "then", [], [helper.make_tensor_value_info("tt", TensorProto.FLOAT, [])])
    else_g = helper.make_graph(
        [helper.make_node("ReduceProd", ["data"], ["e"], name="else_prod", keepdims=0)
         if opset < 18 else helper.make_node("ReduceProd", ["data"], ["e"], name="else_prod", keepdims=0,
                                             noop_with_empty_axes=0)],
        "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [])])
    inits = [numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")] if opset >= 18 else []
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["out"], name="outer_if", then_branch=then_g, else_branch=else_g)],
        "g", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [4]),
              helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = _ir(opset)
    return _typed(model)


# ReduceProd's schema versions and how each step between them is taken (DESIGN.md §2): 11 -> 1
# normalizes negative axes, 13 <-> 18 moves the axes (each by an adapter; 1 -> 11, registered with
# 11 -> 1, changes nothing), 11 <-> 13 only adds bfloat16 (kept by the type-only rule).
REDUCE_PROD_VERSIONS = (1, 11, 13, 18)
REDUCE_PROD_STEPS = {(1, 11): "type-only", (11, 1): "meaning change", (11, 13): "type-only",
                     (13, 11): "type-only", (13, 18): "attribute<->input", (18, 13): "attribute<->input"}
REDUCE_PROD_ADAPTED = {(1, 11), (11, 1), (13, 18), (18, 13)}


def _reduce_prod_steps(source, target):
    at = [max(v for v in REDUCE_PROD_VERSIONS if v <= o) for o in (source, target)]
    i, j = (REDUCE_PROD_VERSIONS.index(v) for v in at)
    walk = REDUCE_PROD_VERSIONS[i:j + 1] if i <= j else REDUCE_PROD_VERSIONS[j:i + 1][::-1]
    return list(zip(walk, walk[1:]))


@pytest.mark.parametrize("source,target", list(itertools.product(SOURCES, TARGETS)))
def test_nested_subgraphs_with_outer_scope_axes(source, target):
    model = _if_model(source)
    result, report = convert_model(model, target)
    assert_valid(result)
    taken = _reduce_prod_steps(source, target)
    # deep If's two branches share one graph proto each: 3 nodes, counted as the summary says
    # (converted by an adapter, kept type-only, or nothing to do), their steps as --plan shows them
    adapted = any(step in REDUCE_PROD_ADAPTED for step in taken)
    assert report.own["ReduceProd"] == (3 if adapted else 0)
    assert report.type_only["ReduceProd"] == (3 if taken and not adapted else 0)
    expected = collections.Counter()
    for step in taken:
        expected[REDUCE_PROD_STEPS[step]] += 3
    assert {how: n for (op, how), n in report.steps.items() if op == "ReduceProd"} == dict(expected)
    for cond in (True, False):
        feeds = {"data": np.array([1.5, 2.0, -3.0, 0.5], dtype=np.float32), "cond": np.array(cond)}
        assert_same_outputs(run(model, feeds), run(result, feeds))


def _function_model(opset):
    if opset >= 18:
        body = [helper.make_node("Constant", [], ["ax"], value_ints=[-1]),
                helper.make_node("ReduceProd", ["x", "ax"], ["y"], name="fn_prod", keepdims=1)]
    else:
        body = [helper.make_node("ReduceProd", ["x"], ["y"], name="fn_prod",
                                 axes=[-1] if opset >= 11 else [2], keepdims=1)]
    fn = helper.make_function("local", "Prod", ["x"], ["y"], body, opset_imports=[helper.make_opsetid("", opset)])
    graph = helper.make_graph(
        [helper.make_node("Prod", ["data"], ["out"], domain="local")], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid("local", 1)])
    model.ir_version = max(_ir(opset), 8)
    return _typed(model)


@pytest.mark.parametrize("source,target", list(itertools.product(SOURCES, TARGETS)))
def test_function_bodies_are_converted_and_kept(source, target):
    model = _function_model(source)
    result, _ = convert_model(model, target)
    assert_valid(result)
    (fn,) = result.functions
    assert [o.version for o in fn.opset_import if o.domain == ""] == [target]
    kinds = [n.op_type for n in fn.node]
    assert kinds == (["Constant", "ReduceProd"] if target >= 18 else ["ReduceProd"])
    feeds = {"data": sample(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


@pytest.mark.parametrize("low,high", [(1, 18), (11, 28), (13, 18), (1, 13), (11, 21)])
@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v[3]], ids=lambda v: v[0])
def test_round_trip_reproduces_outputs(low, high, variant):
    _, axes, keepdims, _ = variant
    if low < 11 and axes and min(axes) < 0:
        pytest.skip("negative axes do not exist below opset 11")
    model = reduce_model(low, np.float64, axes, keepdims)
    back, _ = convert_model(convert_model(model, high)[0], low)
    assert_valid(back)
    feeds = {"data": sample(np.float64, seed=3)}
    assert_same_outputs(run(model, feeds), run(back, feeds))


# ------------------------------------------------------------------ impossible conversions

def test_non_constant_axes_below_18_names_the_node():
    model = reduce_model(18, np.float32, [1], 1)
    model.graph.input.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [1]))
    with pytest.raises(rewriter.RewriterError, match=r"'prod'.*axes input 'axes' is not a constant"):
        convert_model(model, 13)


def test_negative_axes_unknown_rank_below_11():
    model = reduce_model(11, np.float32, [-1], 1)
    model.graph.input[0].type.tensor_type.ClearField("shape")
    model.graph.node[0].name = ""
    with pytest.raises(rewriter.RewriterError, match=r"unnamed ReduceProd node #0 in main graph.*rank"):
        convert_model(model, 10)


def test_failure_leaves_input_untouched_and_nothing_half_done():
    model = reduce_model(18, np.float32, [1], 1)
    good = helper.make_node("ReduceProd", ["data", "axes"], ["ok"], name="first")
    model.graph.node.insert(0, good)
    model.graph.input.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [1]))
    before = model.SerializeToString()
    with pytest.raises(rewriter.RewriterError):
        convert_model(model, 13)
    assert model.SerializeToString() == before


def test_input_is_never_mutated():
    model = reduce_model(13, np.float32, [1], 0)
    before = model.SerializeToString()
    convert_model(model, 18)
    assert model.SerializeToString() == before


# ------------------------------------------------------------------ the rest of the model

def _mixed(opset=13):
    nodes = [helper.make_node("Relu", ["data"], ["r"]),
             helper.make_node("ReduceProd", ["r"], ["p"], name="prod", axes=[1], keepdims=0),
             helper.make_node("ReduceMean", ["r"], ["m"], name="mean", axes=[1], keepdims=0),
             helper.make_node("Add", ["p", "m"], ["out"]),
             helper.make_node("Custom", ["out"], ["side"], domain="custom.ops")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("data", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("custom.ops", 3)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


@pytest.fixture
def reduce_mean_to_onnx(monkeypatch):
    """Without rewriter's own ReduceMean 13 <-> 18 adapters, onnx's (correct upward) one is used:
    this keeps the delegation path under test now that no common op needs it."""
    from rewriter.convert import registry

    registry.lookup("ReduceMean", 13, 18)  # load the adapters first
    for key in [("ReduceMean", 13, 18), ("ReduceMean", 18, 13)]:
        if key in registry.ADAPTERS:
            monkeypatch.delitem(registry.ADAPTERS, key)
            monkeypatch.delitem(registry.KINDS, key, raising=False)
    registry.has_adapters.cache_clear()
    yield
    registry.has_adapters.cache_clear()


def test_other_ops_delegated_and_custom_domain_untouched(reduce_mean_to_onnx):
    model = _mixed()
    result, report = convert_model(model, 18)
    assert report.version_converter_called
    assert report.delegated == {"ReduceMean": 1}
    assert report.type_only == {"Relu": 1, "Add": 1}  # type-only steps: kept as they are
    assert {(o.domain, o.version) for o in result.opset_import} == {("", 18), ("custom.ops", 3)}
    assert result.graph.node[-1] == model.graph.node[-1]
    mean = next(n for n in result.graph.node if n.op_type == "ReduceMean")
    assert len(mean.input) == 2  # the version converter moved ReduceMean's axes too
    prod = next(n for n in result.graph.node if n.op_type == "ReduceProd")
    assert len(prod.input) == 2 and prod.name == "prod"
    result.graph.node.pop()  # ORT cannot run the custom op; check the rest numerically
    model.graph.node.pop()
    feeds = {"data": sample(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_version_converter_not_called_when_only_reduce_prod_changes(monkeypatch):
    import onnx.version_converter

    def fail(*_args, **_kwargs):
        raise AssertionError("onnx.version_converter must not be called")

    monkeypatch.setattr(onnx.version_converter, "convert_version", fail)
    model = reduce_model(13, np.float32, [1], 0)
    model.graph.node.append(helper.make_node("Abs", ["out"], ["abs"]))  # Abs: no change 13..18
    result, report = convert_model(model, 18)
    assert not report.version_converter_called and not report.delegated
    assert_valid(result)


def test_mixed_model_down_to_7_computes_the_same():
    model = _mixed(13)
    del model.graph.node[-1]  # the custom op: no runtime has it
    del model.opset_import[-1]
    result, _ = convert_model(model, 7)
    assert_valid(result)
    feeds = {i.name: np.random.default_rng(0).random([d.dim_value for d in i.type.tensor_type.shape.dim],
                                                      dtype=np.float32) for i in model.graph.input}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_op_newer_than_the_target_is_expanded_into_its_function_body():
    model = reduce_model(18, np.float32, [1], 1)
    model.graph.node.append(helper.make_node("Mish", ["out"], ["m"], name="act"))
    model.graph.output.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, None))
    model = _typed(model)
    result, report = convert_model(model, 13)
    assert_valid(result)
    assert report.expanded["Mish"] == 1 and "Mish" not in {n.op_type for n in result.graph.node}
    names = [n.name for n in result.graph.node if n.name]
    assert len(names) == len(set(names)) and any(n.name == "act" and "m" in n.output for n in result.graph.node)
    feeds = {"data": np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_op_without_function_body_missing_at_target_names_the_node():
    model = reduce_model(18, np.float32, [1], 1)
    model.graph.node.append(helper.make_node("GridSample", ["out", "out"], ["m"], name="grid"))
    with pytest.raises(rewriter.RewriterError, match=r"'grid'.*GridSample exists only from opset 16 and ONNX "
                                                     r"defines no function body"):
        convert_model(model, 13)


def test_onnx_ir_model_in_and_out():
    import onnx_ir as ir

    model = ir.from_proto(reduce_model(13, np.float32, [1], 0))
    result = rewriter.convert_opset(model, 18)
    assert isinstance(result, ir.Model)
    assert result.opset_imports[""] == 18
    assert model.opset_imports[""] == 13

    result_pass = rewriter.ConvertOpsetPass(18)(model)
    assert result_pass.modified
    assert not rewriter.ConvertOpsetPass(13)(model).modified


# ------------------------------------------------------------------ adapter coverage

def test_every_schema_boundary_is_converted_both_ways():
    """Each ReduceProd step, both ways, is an adapter's where the node changes, else type-only."""
    versions = [s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == "ReduceProd"]
    versions = sorted(versions)
    assert tuple(versions) == adapters.schema_versions("ReduceProd") == REDUCE_PROD_VERSIONS
    for low, high in zip(versions, versions[1:]):
        for step in ((low, high), (high, low)):
            assert steps.step_kind("ReduceProd", *step) == ("own" if step in REDUCE_PROD_ADAPTED else "type-only")
    assert {k[1:] for k in adapters.ADAPTERS if k[0] == "ReduceProd"} == REDUCE_PROD_ADAPTED


def test_function_with_op_needing_the_converter(reduce_mean_to_onnx):
    body = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], keepdims=1),
            helper.make_node("ReduceProd", ["m"], ["y"], name="fn_prod", axes=[0], keepdims=1)]
    fn = helper.make_function("local", "MeanProd", ["x"], ["y"], body, opset_imports=[helper.make_opsetid("", 13)])
    graph = helper.make_graph(
        [helper.make_node("MeanProd", ["data"], ["out"], domain="local")], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("local", 1)])
    model.ir_version = 8
    model = _typed(model)
    result, report = convert_model(model, 18)
    assert report.version_converter_called and report.delegated == {"ReduceMean": 1}
    assert_valid(result)
    (fn_out,) = result.functions
    assert sorted(n.op_type for n in fn_out.node) == ["Constant", "Constant", "ReduceMean", "ReduceProd"]
    assert all(n.domain == "" for n in fn_out.node)
    feeds = {"data": sample(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_type_only_step_down_refused_for_a_type_the_target_lacks():
    """Add-14 allows int8; Add-13 does not, so the step is not type-only and the converter refuses it."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "a"], ["b"], name="add8")], "g",
        [helper.make_tensor_value_info("a", TensorProto.INT8, [2])],
        [helper.make_tensor_value_info("b", TensorProto.INT8, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    with pytest.raises(rewriter.RewriterError, match=r"Add 14 -> 13: input 'a' is tensor\(int8\), which Add-13 does not allow"):
        convert_model(model, 13)
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    result, report = convert_model(model, 13)
    assert report.type_only == {"Add": 1} and not report.version_converter_called
    assert_valid(result)


def test_axes_attribute_to_input_shares_equal_constants():
    model = reduce_model(13, np.float32, [1], 1)
    model.graph.node.append(helper.make_node("ReduceProd", ["out"], ["out2"], name="prod2", axes=[1]))
    model.graph.output.append(helper.make_tensor_value_info("out2", TensorProto.FLOAT, None))
    result, _ = convert_model(_typed(model), 18)
    assert len(result.graph.initializer) == 1
    assert result.graph.node[0].input[1] == result.graph.node[1].input[1] == result.graph.initializer[0].name


def _two_call_model(second_shape):
    fn = _function_model(13).functions[0]
    graph = helper.make_graph(
        [helper.make_node("Prod", ["data"], ["out"], domain="local"),
         helper.make_node("Prod", ["other"], ["out2"], domain="local")], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, SHAPE),
         helper.make_tensor_value_info("other", TensorProto.FLOAT, second_shape)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("out2", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("local", 1)])
    model.ir_version = 8
    return _typed(model)


def test_function_negative_axes_use_the_rank_at_the_call_sites():
    model = _two_call_model([5, 2, 7])  # both calls rank 3: -1 -> 2
    result, report = convert_model(model, 1)
    assert_valid(result)
    (node,) = result.functions[0].node
    assert [list(a.ints) for a in node.attribute if a.name == "axes"] == [[2]]
    feeds = {"data": sample(np.float32), "other": np.ones([5, 2, 7], dtype=np.float32) * 1.5}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_function_negative_axes_with_call_sites_of_different_rank_are_refused():
    with pytest.raises(rewriter.RewriterError, match=r"'fn_prod'.*function 'local:Prod'.*rank"):
        convert_model(_two_call_model([5, 7]), 1)


def test_converter_path_keeps_sparse_initializers_and_metadata(reduce_mean_to_onnx):
    """onnx.version_converter rebuilds the graph without these: they must survive anyway."""
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.0, 3.0], dtype=np.float32), "sp"),
        numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "sp_indices"), [2, 3])
    nodes = [helper.make_node("Add", ["data", "data"], ["s"], name="add"),
             helper.make_node("ReduceMean", ["s"], ["m"], name="mean", axes=[1], keepdims=1),
             helper.make_node("ReduceProd", ["m"], ["out"], name="prod", axes=[0], keepdims=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])],
                              sparse_initializer=[sparse])
    helper.set_metadata_props(graph, {"graph_key": "graph_value"})
    for node in graph.node:
        helper.set_metadata_props(node, {"origin": node.name})
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    result, report = convert_model(model, 18)
    assert report.delegated == {"ReduceMean": 1}
    assert_valid(result)
    assert [s.values.name for s in result.graph.sparse_initializer] == ["sp"]
    assert {p.key: p.value for p in result.graph.metadata_props} == {"graph_key": "graph_value"}
    for node in result.graph.node:
        if node.name:
            assert {p.key: p.value for p in node.metadata_props} == {"origin": node.name}
    assert {n.name for n in result.graph.node} >= {"add", "mean", "prod"}
    feeds = {"data": np.arange(6, dtype=np.float32).reshape(2, 3) + 1}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_ir3_model_to_18():
    """IR 3 requires initializers to be graph inputs; the 13->18 adapter adds one, so the IR
    version must be raised with the opset."""
    graph = helper.make_graph(
        [helper.make_node("ReduceProd", ["data"], ["p"], name="prod", axes=[1], keepdims=1),
         helper.make_node("Relu", ["p"], ["out"], name="relu")], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 5)])
    model.ir_version = 3
    onnx.checker.check_model(model, full_check=True)
    result, report = convert_model(model, 18)
    assert result.ir_version >= 8
    assert_valid(result)
    feeds = {"data": np.array([[1, -2, 3], [4, 5, -6]], dtype=np.float32)}
    assert_same_outputs([np.maximum(np.prod(feeds["data"], axis=1, keepdims=True), 0)], run(result, feeds))


def _cast_branch(name, elem):
    return helper.make_graph(
        [helper.make_node("Cast", ["x"], ["d"], to=elem),
         helper.make_node("ReduceProd", ["d"], ["q"], keepdims=0, name=f"prod_{name}"),
         helper.make_node("Cast", ["q"], [f"r_{name}"], to=TensorProto.FLOAT)],
        name, [], [helper.make_tensor_value_info(f"r_{name}", TensorProto.FLOAT, [])])


def test_types_are_per_scope_sibling_branches_may_reuse_a_name():
    """Both branches call their value 'd': bfloat16 in one, float in the other."""
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=_cast_branch("t", TensorProto.BFLOAT16),
                          else_branch=_cast_branch("e", TensorProto.FLOAT))], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with pytest.raises(rewriter.RewriterError, match=r"'prod_t'.*then_branch.*bfloat16"):
        convert_model(model, 12)
    then = next(a for a in graph.node[0].attribute if a.name == "then_branch")
    then.g.CopyFrom(_cast_branch("t", TensorProto.DOUBLE))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    result, _ = convert_model(model, 12)
    assert_valid(result)


def _nested_function_model(axes):
    inner = helper.make_function(
        "local", "Inner", ["a"], ["b"],
        [helper.make_node("ReduceProd", ["a"], ["b"], name="inner_prod", axes=axes, keepdims=1)],
        opset_imports=[helper.make_opsetid("", 13)])
    outer = helper.make_function(
        "local", "Outer", ["x"], ["y"], [helper.make_node("Inner", ["x"], ["y"], domain="local")],
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)])
    graph = helper.make_graph(
        [helper.make_node("Outer", ["data"], ["out"], domain="local")], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[inner, outer], opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("local", 1)])
    model.ir_version = 8
    return _typed(model)


def test_function_called_only_from_a_function_gets_ranks_through_its_caller():
    model = _nested_function_model([-1])
    result, report = convert_model(model, 10)
    assert report.changes["negative axes normalized"] == 1
    assert_valid(result)
    inner = next(f for f in result.functions if f.name == "Inner")
    assert [list(a.ints) for a in inner.node[0].attribute if a.name == "axes"] == [[2]]
    feeds = {"data": sample(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def _attribute_function_model(opset):
    """Function Prod(x) with attribute 'ax' used as ReduceProd's axes; called with ax=[1]."""
    if opset >= 18:
        body = [onnx.parser.parse_node("a = Constant <value_ints: ints = @ax> ()"),
                helper.make_node("ReduceProd", ["x", "a"], ["y"], name="fn_prod", keepdims=0)]
    else:
        prod = helper.make_node("ReduceProd", ["x"], ["y"], name="fn_prod", keepdims=0)
        prod.attribute.append(onnx.AttributeProto(name="axes", ref_attr_name="ax", type=onnx.AttributeProto.INTS))
        body = [prod]
    fn = helper.make_function("local", "Prod", ["x"], ["y"], body,
                              opset_imports=[helper.make_opsetid("", opset)], attributes=["ax"])
    graph = helper.make_graph(
        [helper.make_node("Prod", ["data"], ["out"], domain="local", ax=[1])], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[fn], opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid("local", 1)])
    model.ir_version = 8
    return _typed(model)


@pytest.mark.parametrize("source,target", [(13, 18), (18, 13), (11, 28), (18, 11)])
def test_axes_from_a_function_attribute_convert_as_references(source, target):
    model = _attribute_function_model(source)
    result, _ = convert_model(model, target)
    assert_valid(result)
    refs = [a.ref_attr_name for n in result.functions[0].node for a in n.attribute if a.ref_attr_name]
    assert refs == ["ax"]
    feeds = {"data": sample(np.float32)}
    assert_same_outputs(run(model, feeds), run(result, feeds))


def test_axes_from_a_function_attribute_cannot_go_below_11():
    with pytest.raises(rewriter.RewriterError, match=r"'fn_prod'.*attribute 'ax'"):
        convert_model(_attribute_function_model(13), 10)
