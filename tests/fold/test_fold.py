"""FoldReduceProdPass / fold_reduce_prod, checked against ONNX Runtime and onnx.reference.

Oracle: the unfolded model run by ONNX Runtime (opset >= 7; not for bfloat16, uint32,
uint64, which its CPU kernel lacks) or by onnx.reference otherwise; float data is drawn
so that every product is exact, so any evaluation order gives the same bits.
"""

from __future__ import annotations

import logging

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import rewriter
from rewriter import fold
from rewriter.graph import unused_values as unused

DTYPES = {
    "float32": (T.FLOAT, np.float32), "float64": (T.DOUBLE, np.float64),
    "float16": (T.FLOAT16, np.float16), "bfloat16": (T.BFLOAT16, ml_dtypes.bfloat16),
    "int32": (T.INT32, np.int32), "int64": (T.INT64, np.int64),
    "uint32": (T.UINT32, np.uint32), "uint64": (T.UINT64, np.uint64),
}
NOT_IN_ORT = {"bfloat16", "uint32", "uint64"}


# ---------------------------------------------------------------- oracles

def run(model: onnx.ModelProto, feeds=None, use_ort: bool | None = None) -> list[np.ndarray]:
    feeds = feeds or {}
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if use_ort is None:
        types = {t.data_type for t in model.graph.initializer} | {
            v.type.tensor_type.elem_type for v in model.graph.output}
        use_ort = opset >= 7 and not types & {T.BFLOAT16, T.UINT32, T.UINT64}
    if use_ort:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    return ReferenceEvaluator(model).run(None, feeds)


def assert_same(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape, (a, e)
        if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16:
            a64, e64 = a.astype(np.float64), e.astype(np.float64)
            assert np.array_equal(a64, e64, equal_nan=True), (a, e)
            signed = ~np.isnan(e64)  # a NaN's sign bit carries no meaning
            assert np.array_equal(np.signbit(a64[signed]), np.signbit(e64[signed])), (a, e)
        else:
            assert np.array_equal(a, e), (a, e)


def ops(graph) -> list[str]:
    return [n.op_type for n in graph.node]


def fold_and_compare(model, feeds=None, **kwargs):
    """Fold, then check validity and equality of outputs with the unfolded model."""
    onnx.checker.check_model(model, full_check=True)
    before = model.SerializeToString()
    folded, report = fold.fold_model(model, **kwargs)
    assert model.SerializeToString() == before, "the argument was mutated"
    onnx.checker.check_model(folded, full_check=True)
    assert [o.name for o in folded.graph.output] == [o.name for o in model.graph.output]
    assert_same(run(folded, feeds), run(model, feeds))
    return folded, report


# ---------------------------------------------------------------- model builders

def reduce_model(data: np.ndarray, dtype_name: str, opset: int, *, axes=None, keepdims=None,
                 noop=None, as_constant_node=False, output_is_graph_output=True):
    elem, _ = DTYPES[dtype_name]
    # IR 3 (the opset 1 era) has no initializers that are not inputs, and Constant-1 is float only
    ir_version = 3 if opset < 7 and np.dtype(data.dtype).kind == "f" else 8
    nodes, inits, inputs = [], [], ["c"]
    tensor = nh.from_array(data, "c")
    if as_constant_node:
        nodes.append(h.make_node("Constant", [], ["c"], value=tensor))
    else:
        inits.append(tensor)
    attrs = {}
    if keepdims is not None:
        attrs["keepdims"] = int(keepdims)
    if opset >= 18:
        if noop is not None:
            attrs["noop_with_empty_axes"] = int(noop)
        if axes is not None:
            axes_tensor = nh.from_array(np.array(axes, np.int64), "ax")
            if as_constant_node:
                nodes.append(h.make_node("Constant", [], ["ax"], value=axes_tensor))
            else:
                inits.append(axes_tensor)
            inputs.append("ax")
    elif axes is not None:
        attrs["axes"] = list(axes)
    nodes.append(h.make_node("ReduceProd", inputs, ["y"], name="rp", **attrs))
    rank = data.ndim
    if keepdims in (None, 1) or (noop and not axes):
        out_rank = rank
    else:
        out_rank = 0 if not axes else rank - len(axes)
    out = h.make_tensor_value_info("y", elem, [None] * out_rank)
    graph = h.make_graph(nodes, "g", [], [out], inits)
    return h.make_model(graph, ir_version=ir_version, opset_imports=[h.make_opsetid("", opset)])


def exact_values(dtype_name: str):
    """Values whose products stay exact in the type for small tensors."""
    if dtype_name.startswith("uint"):
        return st.sampled_from([0, 1, 2, 3, 5])
    if dtype_name.startswith("int"):
        return st.sampled_from([-3, -2, -1, 0, 1, 2, 3])
    values = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.25, 4.0]
    if dtype_name in ("float32", "float64"):
        values += [1.5, -3.0]
    return st.sampled_from(values)


@st.composite
def reduce_case(draw, dtype_name: str, opset: int):
    _, np_type = DTYPES[dtype_name]
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=3)))
    size = int(np.prod(shape, dtype=np.int64))
    flat = draw(st.lists(exact_values(dtype_name), min_size=size, max_size=size))
    data = np.array(flat, dtype=np.float64 if np_type not in (np.int32, np.int64, np.uint32, np.uint64)
                    else np_type).astype(np_type).reshape(shape)
    rank = len(shape)
    axes = None
    if draw(st.booleans()):
        axes = draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank)) if rank else []
        if opset >= 11:
            axes = [a - rank if draw(st.booleans()) else a for a in axes]
        if not axes and opset < 18:
            axes = None  # an empty attribute list is not a valid attribute form below 18
    keepdims = draw(st.sampled_from([None, 0, 1]))
    noop = draw(st.sampled_from([None, 0, 1])) if opset >= 18 else None
    return data, axes, keepdims, noop


CASES = [(d, o) for d in DTYPES for o in (1, 11, 13, 18) if not (d == "bfloat16" and o < 13)]


@pytest.mark.parametrize("dtype_name,opset", CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fold_matches_runtime_for_every_dtype_and_opset(dtype_name, opset, data):
    values, axes, keepdims, noop = data.draw(reduce_case(dtype_name, opset))
    as_constant = (opset < 7 or data.draw(st.booleans())) and (opset >= 9 or values.dtype.kind == "f")
    model = reduce_model(values, dtype_name, opset, axes=axes, keepdims=keepdims, noop=noop,
                         as_constant_node=as_constant)
    folded, report = fold_and_compare(model)
    assert "ReduceProd" not in ops(folded.graph)
    assert [f.output for f in report.folded] == ["y"] and not report.skipped
    # the data and axes constants were used only by the folded node
    assert {t.name for t in folded.graph.initializer} <= {"y"}
    assert all(n.output[0] == "y" for n in folded.graph.node)


@pytest.mark.parametrize("axes,noop", [([], 1), (None, 1), ([], 0), (None, 0)])
def test_opset18_empty_or_absent_axes(axes, noop):
    values = np.array([[1.5, 2.0], [-4.0, 0.5]], np.float32)
    model = reduce_model(values, "float32", 18, axes=axes, noop=noop, keepdims=0)
    folded, _ = fold_and_compare(model)
    y = nh.to_array(folded.graph.initializer[0])
    expected = values if noop else np.array(np.float32(-6.0))
    assert_same([y], [expected])


def test_special_float_values():
    values = np.array([[np.inf, 0.0], [np.nan, 1.0], [-np.inf, -2.0]], np.float32)
    fold_and_compare(reduce_model(values, "float32", 13, axes=[1], keepdims=1))


def test_ir3_model_gets_constant_nodes_not_initializers():
    model = reduce_model(np.array([2, 3], np.float64), "float64", 1, as_constant_node=True, keepdims=0)
    folded, _ = fold_and_compare(model)
    assert ops(folded.graph) == ["Constant"] and not folded.graph.initializer


def test_ir3_integer_result_that_constant_1_cannot_hold_is_skipped():
    model = parse("""<ir_version: 3, opset_import: ["": 7]>
        g (float[2,3] x) => (int64[1] n) {
          s = Shape(x)
          n = ReduceProd(s)
        }""")
    folded, report = fold_and_compare(model, {"x": np.zeros((2, 3), np.float32)})
    assert not report.folded and "Constant-1 does not support int64" in report.skipped[0].reason


# ---------------------------------------------------------------- structure

def parse(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def test_shared_axes_initializer_is_removed_when_all_users_fold():
    model = parse("""<ir_version: 8, opset_import: ["": 18]>
        g () => (float[2] y1, float[3] y2) <float[2,3] c = {1,2,3,4,5,6}, int64[1] ax = {1}, int64[1] ax0 = {0}> {
          y1 = ReduceProd<keepdims=0>(c, ax)
          y2 = ReduceProd<keepdims=0>(c, ax0)
        }""")
    folded, report = fold_and_compare(model)
    assert len(report.folded) == 2
    assert sorted(t.name for t in folded.graph.initializer) == ["y1", "y2"]


def test_axes_used_elsewhere_stays():
    model = parse("""<ir_version: 8, opset_import: ["": 18]>
        g (float[2] x) => (float[2] y, float[2,1] z) <float[2,3] c = {1,2,3,4,5,6}, int64[1] ax = {1}> {
          y = ReduceProd<keepdims=0>(c, ax)
          z = Unsqueeze(x, ax)
        }""")
    folded, _ = fold_and_compare(model, {"x": np.array([1, 2], np.float32)})
    assert sorted(t.name for t in folded.graph.initializer) == ["ax", "y"]
    assert ops(folded.graph) == ["Unsqueeze"]


def test_initializer_that_is_a_graph_input_is_not_folded():
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] c) => (float[2] y) <float[2,3] c = {1,2,3,4,5,6}> {
          y = ReduceProd<keepdims=0, axes=[1]>(c)
        }""")
    folded, report = fold_and_compare(model)
    assert ops(folded.graph) == ["ReduceProd"] and not report.folded
    assert report.skipped[0].reason == ("data 'c' is not a constant: 'c' is a graph input; its initializer is only "
                                        "a default that a caller may override (--freeze-input-defaults c makes it "
                                        "a constant)")
    override = {"c": np.full((2, 3), 2, np.float32)}
    assert_same(run(folded, override), run(model, override))


def test_graph_output_keeps_its_name_and_intermediate_folds_chain():
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[1] x) => (float[1] out, float[1] also) <float[2,2] c = {1,2,3,4}> {
          mid = ReduceProd<axes=[0], keepdims=0>(c)
          out = ReduceProd<axes=[0], keepdims=1>(mid)
          also = Mul(out, x)
        }""")
    folded, report = fold_and_compare(model, {"x": np.array([3], np.float32)})
    assert [f.output for f in report.folded] == ["mid", "out"]
    assert [t.name for t in folded.graph.initializer] == ["out"]
    assert ops(folded.graph) == ["Mul"]


def test_data_computed_at_run_time_or_axes_not_constant_is_skipped():
    model = parse("""<ir_version: 8, opset_import: ["": 18]>
        g (float[2,3] x, int64[1] ax) => (float[2] y, float[2] z) <float[2,3] c = {1,2,3,4,5,6}> {
          r = Relu(x)
          y = ReduceProd<keepdims=0>(r)
          z = ReduceProd<keepdims=0>(c, ax)
        }""")
    folded, report = fold.fold_model(model)
    reasons = {s.label: s.reason for s in report.skipped}
    assert len(reasons) == 2 and not report.folded
    assert any("computed at run time by a Relu node" in r for r in reasons.values())
    assert any("axes 'ax' is an input of the main graph" in r for r in reasons.values())
    assert folded.SerializeToString() == model.SerializeToString()


def test_constant_node_used_elsewhere_stays_and_unused_one_goes():
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (int64[2] x) => (int64 y, int64[2] z) {
          c = Constant<value = int64[2] {5, 7}>()
          d = Constant<value = int64[3] {2, 3, 4}>()
          y = ReduceProd<keepdims=0>(d)
          z = Add(x, c)
        }""")
    folded, _ = fold_and_compare(model, {"x": np.array([1, 2], np.int64)})
    assert ops(folded.graph) == ["Constant", "Add"]
    assert folded.graph.node[0].output[0] == "c"


def test_subgraph_using_outer_scope_initializer():
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (bool cond) => (float[2] out) <float[2,3] c = {1,2,3,4,5,6}, float[2] other = {9, 9}> {
          out = If(cond) <
            then_branch = t () => (float[2] yt) { yt = ReduceProd<axes=[1], keepdims=0>(c) },
            else_branch = e () => (float[2] ye) { ye = Identity(other) }
          >
        }""")
    for cond in (True, False):
        feeds = {"cond": np.array(cond)}
        folded, report = fold_and_compare(model, feeds)
    then = folded.graph.node[0].attribute[0].g
    assert not then.node and [t.name for t in then.initializer] == ["yt"]
    assert "then_branch" in report.folded[0].label
    assert [t.name for t in folded.graph.initializer] == ["other"]  # 'c' became unused


def test_function_body_gets_a_constant_node():
    model = parse("""<ir_version: 8, opset_import: ["": 18, "local": 1]>
        g (float[2] x) => (float[2] y) {
          y = local.ScaleByProd(x)
        }
        <domain: "local", opset_import: ["": 18]>
        ScaleByProd (x) => (y) {
          c = Constant<value = float[3] {2, 3, 0.5}>()
          ax = Constant<value_ints = [0]>()
          p = ReduceProd<keepdims=0>(c, ax)
          y = Mul(x, p)
        }""")
    folded, report = fold_and_compare(model, {"x": np.array([1, -2], np.float32)})
    body = folded.functions[0].node
    assert [n.op_type for n in body] == ["Constant", "Mul"] and body[0].output[0] == "p"
    assert "function 'local:ScaleByProd'" in report.folded[0].label


@pytest.mark.parametrize("attrs,expected", [
    ("", 24), ("<start=1>", 12), ("<end=-1>", 6), ("<start=-2, end=3>", 12),
    ("<start=-10>", 24), ("<start=2, end=1>", 1), ("<start=5>", 1)])
def test_shape_pattern_number_of_elements(attrs, expected):
    model = parse(f"""<ir_version: 8, opset_import: ["": 18]>
        g (float[2,3,4] x) => (int64 n) {{
          s = Shape{attrs}(x)
          n = ReduceProd<keepdims=0>(s)
        }}""")
    folded, report = fold_and_compare(model, {"x": np.zeros((2, 3, 4), np.float32)})
    assert nh.to_array(folded.graph.initializer[0]) == expected
    assert not folded.graph.node  # the Shape node was left unused and removed


def test_shape_pattern_on_inferred_intermediate_and_dynamic_shape():
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3] x, float[N,3] d) => (int64[1] n, int64[1] m) {
          t = Transpose(x)
          s = Shape(t)
          n = ReduceProd<keepdims=1>(s)
          sd = Shape(d)
          m = ReduceProd<keepdims=1>(sd)
        }""")
    feeds = {"x": np.zeros((2, 3), np.float32), "d": np.zeros((4, 3), np.float32)}
    folded, report = fold_and_compare(model, feeds)
    assert [f.output for f in report.folded] == ["n"]
    assert "Shape of 'd'" in report.skipped[0].reason and "not static" in report.skipped[0].reason


# ---------------------------------------------------------------- integer overflow

OVERFLOW = [("int32", [65536, 65536, 3]), ("int64", [2**40, -(2**40)]), ("uint32", [65536, 65536]),
            ("uint64", [2**40, 2**40])]


@pytest.mark.parametrize("dtype_name,values", OVERFLOW)
def test_overflow_skip_warns_naming_the_node(dtype_name, values, caplog):
    model = reduce_model(np.array(values, DTYPES[dtype_name][1]), dtype_name, 13, keepdims=0)
    with caplog.at_level(logging.WARNING, logger="rewriter.fold"):
        folded, report = fold.fold_model(model)
    assert ops(folded.graph) == ["ReduceProd"] and not report.folded
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "node 'rp'" in warnings[0] and "overflow" in warnings[0]
    assert "saturates" in report.skipped[0].reason


@pytest.mark.parametrize("dtype_name,values", OVERFLOW)
def test_overflow_wrap_matches_reference(dtype_name, values):
    model = reduce_model(np.array(values, DTYPES[dtype_name][1]), dtype_name, 13, keepdims=0)
    folded, _ = fold.fold_model(model, int_overflow="wrap")
    assert_same(run(folded, use_ort=False), ReferenceEvaluator(model).run(None, {}))


@pytest.mark.parametrize("dtype_name,values", [c for c in OVERFLOW if c[0] not in NOT_IN_ORT])
def test_overflow_saturate_matches_onnxruntime(dtype_name, values):
    model = reduce_model(np.array(values, DTYPES[dtype_name][1]), dtype_name, 13, keepdims=0)
    folded, _ = fold.fold_model(model, int_overflow="saturate")
    assert "ReduceProd" not in ops(folded.graph)
    assert_same(run(folded, use_ort=False), run(model, use_ort=True))


@pytest.mark.parametrize("dtype_name", ["uint32", "uint64"])
def test_overflow_saturate_unsigned_clamps_to_max(dtype_name):
    np_type = DTYPES[dtype_name][1]
    model = reduce_model(np.array([2**31, 2**31, 2**31], np_type), dtype_name, 13, keepdims=0)
    folded, _ = fold.fold_model(model, int_overflow="saturate")
    assert nh.to_array(folded.graph.initializer[0]) == np.iinfo(np_type).max


# ---------------------------------------------------------------- API, errors, pass

def test_invalid_axes_raise_naming_the_node():
    model = reduce_model(np.ones((2, 2), np.float32), "float32", 13, axes=[5])
    with pytest.raises(rewriter.RewriterError, match="node 'rp'"):
        fold.fold_model(model)
    with pytest.raises(rewriter.RewriterError, match="int_overflow"):
        rewriter.fold_reduce_prod(model, int_overflow="clamp")


def test_fold_constants_on_proto_and_ir_model_returns_same_kind():
    model = reduce_model(np.array([[1, 2], [3, 4]], np.float32), "float32", 13, axes=[0])
    out = rewriter.fold_reduce_prod(model)
    assert isinstance(out, onnx.ModelProto) and ops(out.graph) == []
    ir_model = ir.serde.deserialize_model(model)
    ir_out = rewriter.fold_reduce_prod(ir_model)
    assert isinstance(ir_out, ir.Model) and len(ir_model.graph) == 1 and len(ir_out.graph) == 0
    assert_same(run(ir.serde.serialize_model(ir_out)), run(model))


def test_pass_composes_and_reports_modified_honestly():
    model = ir.serde.deserialize_model(
        reduce_model(np.array([2.0, 3.0], np.float32), "float32", 13, keepdims=0))
    fold_pass = rewriter.FoldReduceProdPass()
    result = ir.passes.PassManager([fold_pass])(model)
    assert result.modified and fold_pass.report.folded[0].output == "y"
    again = rewriter.FoldReduceProdPass()(result.model)
    assert not again.modified and again.model is not result.model


def test_remove_unused_keeps_names_read_by_subgraphs_and_graph_inputs():
    model = parse("""<ir_version: 8, opset_import: ["": 13]>
        g (bool cond, float[2] i) => (float[2] out) <float[2] a = {1, 2}, float[2] b = {3, 4}, float[2] i = {0, 0}> {
          dead = Neg(b)
          dead2 = Neg(dead)
          out = If(cond) <
            then_branch = t () => (float[2] yt) { unused_inner = Neg(b)
                                                  yt = Identity(a) },
            else_branch = e () => (float[2] ye) { ye = Identity(i) }
          >
        }""")
    removed = unused.remove_unused(model)
    assert len(removed) == 4  # dead, dead2, unused_inner, then b
    assert sorted(t.name for t in model.graph.initializer) == ["a", "i"]
    assert ops(model.graph) == ["If"]
    onnx.checker.check_model(model, full_check=True)


def test_function_constant_from_an_attribute_reference_is_not_folded():
    model = parse("""<ir_version: 8, opset_import: ["": 18, "local": 1]>
        g (float[2] x) => (float[2] y) {
          y = local.ScaleByProd<t = float[3] {2.0, 3.0, 4.0}>(x)
        }
        <domain: "local", opset_import: ["": 18]>
        ScaleByProd <t> (x) => (y) {
          c = Constant<value: tensor = @t>()
          p = ReduceProd<keepdims=0>(c)
          y = Mul(x, p)
        }""")
    folded, report = fold_and_compare(model, {"x": np.array([1, -2], np.float32)})
    assert not report.folded and "attribute reference" in report.skipped[0].reason
    assert [n.op_type for n in folded.functions[0].node] == ["Constant", "ReduceProd", "Mul"]


def test_ir_model_with_external_data(tmp_path):
    model = reduce_model(np.arange(1, 13, dtype=np.float64).reshape(4, 3), "float64", 13, axes=[0], keepdims=0)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    folded = rewriter.fold_reduce_prod(ir.load(path))
    y = folded.graph.initializers["y"].const_value.numpy()
    np.testing.assert_array_equal(y, np.array([280.0, 880.0, 1944.0]))
    assert "c" not in folded.graph.initializers


@settings(max_examples=40, deadline=None)
@given(dims=st.lists(st.integers(0, 5), max_size=4),
       start=st.one_of(st.none(), st.integers(-6, 6)), end=st.one_of(st.none(), st.integers(-6, 6)))
def test_shape15_slice_matches_runtime(dims, start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    graph = h.make_graph(
        [h.make_node("Shape", ["x"], ["s"], **attrs), h.make_node("ReduceProd", ["s"], ["n"], keepdims=1)],
        "g", [h.make_tensor_value_info("x", T.FLOAT, dims)], [h.make_tensor_value_info("n", T.INT64, [1])])
    model = h.make_model(graph, ir_version=8, opset_imports=[h.make_opsetid("", 18)])
    folded, report = fold_and_compare(model, {"x": np.zeros(dims, np.float32)})
    assert not folded.graph.node and len(report.folded) == 1


def test_shape_pattern_ignores_a_stale_static_value_info():
    """x's declared value_info says [2,3,4], but its true first dim is the input's N."""
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["": 13]>
        g (float[N,3,4] a) => (int64 n) <float[2,3,4] x> {
          x = Relu(a)
          s = Shape(x)
          n = ReduceProd<keepdims=0>(s)
        }''')
    result = rewriter.fold_reduce_prod(model)
    assert [n.op_type for n in result.graph.node] == ["Relu", "Shape", "ReduceProd"]
    static = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["": 13]>
        g (float[2,3,4] a) => (int64 n) {
          x = Relu(a)
          s = Shape(x)
          n = ReduceProd<keepdims=0>(s)
        }''')
    folded = rewriter.fold_reduce_prod(static)
    assert [onnx.numpy_helper.to_array(t).tolist() for t in folded.graph.initializer] == [24]
