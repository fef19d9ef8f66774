"""tract 0.23 and shapes computed by tf2onnx / paddle2onnx: a shape read from a Shape through a Cast
to int32 and back to int64 is refused while a dim is not static, and a Slice ending at 10^9 ("to the
end") over such a dim is taken to be 10^9 long.  convert --target tract==0.23 reads the chain in
int64 from the Shape itself (``rewrite_forms`` Cast / ``int32_dims_widened``,
rewriter/targets/int32_dims.py) and writes such ends INT64_MAX with int64 index inputs (Slice /
``huge_ends_maximal``, slice_ends.py).  Checked against ONNX Runtime on the models, and in tract's
venv (skipped when absent)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.graph.inferred import LazyInference
from rewriter.targets import parse_target
from rewriter.targets.int32_dims import int32_dims_widened
from rewriter.targets.slice_ends import huge_ends_maximal
from tests.targets.runtime_runs import run_in


def _i(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype), name)


def _head(dims=("n", 3, 4), other_reader=False) -> onnx.ModelProto:
    """PP-OCR's classifier head: y = Reshape(x, Cast64(Concat(Slice(Cast32(Shape(x)), 0, 1), [-1])))."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    nodes = [node("Shape", ["x"], ["s"], name="shape"), node("Cast", ["s"], ["s32"], to=T.INT32, name="cast32"),
             node("Slice", ["s32", "zero", "one"], ["n32"], name="slice"),
             node("Concat", ["n32", "minus_one"], ["shape32"], axis=0, name="concat"),
             node("Cast", ["shape32"], ["shape64"], to=T.INT64, name="cast64"),
             node("Reshape", ["x", "shape64"], ["y"], name="reshape")]
    outputs = [vi("y", T.FLOAT, [None, None])]
    if other_reader:
        nodes.append(node("Cast", ["n32"], ["n_float"], to=T.FLOAT, name="other"))
        outputs.append(vi("n_float", T.FLOAT, [1]))
    graph = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, list(dims))], outputs,
                              [_i("zero", [0]), _i("one", [1]), _i("minus_one", [-1], np.int32)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _slice_to_the_end(end=10 ** 9, dtype=np.int32, steps=True) -> onnx.ModelProto:
    """magika's slice: x[:, :, 0:end] over x [n, 2, l] (int32 index inputs), then a Reshape to
    [n, -1] through Shape."""
    node, vi = helper.make_node, helper.make_tensor_value_info
    inputs = ["x", "starts", "ends", "axes"] + (["steps"] if steps else [])
    nodes = [node("Slice", inputs, ["s"], name="slice"), node("Shape", ["x"], ["sh"], name="shape"),
             node("Slice", ["sh", "zero", "one"], ["n"], name="batch"),
             node("Concat", ["n", "minus_one"], ["target"], axis=0, name="concat"),
             node("Reshape", ["s", "target"], ["y"], name="reshape")]
    inits = [_i("starts", [0, 0], dtype), _i("ends", [end, end], dtype), _i("axes", [1, 2], dtype),
             _i("zero", [0]), _i("one", [1]), _i("minus_one", [-1])]
    if steps:
        inits.append(_i("steps", [1, 1], dtype))
    graph = helper.make_graph(nodes, "g", [vi("x", T.FLOAT, ["n", 2, "l"])], [vi("y", T.FLOAT, [None, None])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _feeds(*shape):
    return {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}


def test_the_chain_is_read_in_int64_and_tract_runs_it():
    model = _head()
    _, plan = convert_for(model, runtime="tract==0.23", plan_only=True)
    assert plan.blockers == []  # (the plan names what convert leaves)
    result, report = convert_for(model, runtime="tract==0.23", inferred=LazyInference(model))
    onnx.checker.check_model(result, full_check=True)
    assert any("1 shape chain(s) computed in int32" in n and "'cast64'" in n for n in report.target_notes)
    reshape = next(n for n in result.graph.node if n.name == "reshape")
    producers = {o: n for n in result.graph.node for o in n.output}
    assert producers[reshape.input[1]].op_type == "Identity" and producers[reshape.input[1]].name == "cast64"
    for shape in ((2, 3, 4), (5, 3, 4), (1, 3, 4)):
        feeds = _feeds(*shape)
        assert np.array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])
    feeds = _feeds(2, 3, 4)
    assert not run_in("tract", "0.23", model, feeds)["ok"]
    got = run_in("tract", "0.23", result, feeds)
    assert got["ok"], got
    assert np.array_equal(got["values"][0], feeds["x"].reshape(2, 12))


def test_other_readers_keep_the_int32_chain_and_arithmetic_is_left():
    model = _head(other_reader=True)
    assert int32_dims_widened(model, "tract 0.23")
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Cast") == 2 and ops.count("Slice") == 2  # the int32 chain stays for "other"
    feeds = _feeds(2, 3, 4)
    want = _ort(_head(other_reader=True), feeds)
    assert all(np.array_equal(a, b) for a, b in zip(_ort(model, feeds), want))
    arith = _head()
    arith.graph.node[2].op_type = "Neg"  # not a move: the values are computed, not the dims
    del arith.graph.node[2].input[1:]
    assert int32_dims_widened(arith, "tract 0.23") == []


def test_a_dim_through_a_float_or_arithmetic_or_no_shape_is_left():
    through_float = _head()
    through_float.graph.node[1].attribute[0].i = T.FLOAT  # Shape -> Cast(float): not the int32 reading
    assert int32_dims_widened(through_float, "tract 0.23") == []
    _, plan = convert_for(_float_head(), runtime="tract==0.23", plan_only=True)
    assert [b.op for b in plan.blockers] == ["Reshape"]  # (still named, by the plan as by convert)
    computed = _head()
    computed.graph.node.insert(0, helper.make_node("Neg", ["minus_one"], ["neg"], name="neg"))
    next(n for n in computed.graph.node if n.op_type == "Concat").input[1] = "neg"
    assert int32_dims_widened(computed, "tract 0.23") == []  # a Concat input computed, not moved
    constants = _head()
    next(n for n in constants.graph.node if n.op_type == "Concat").input[0] = "minus_one"
    assert int32_dims_widened(constants, "tract 0.23") == []  # constants only: no Shape read through a Cast


def _float_head() -> onnx.ModelProto:
    model = _head()
    model.graph.node[1].attribute[0].i = T.FLOAT
    model.graph.initializer[-1].CopyFrom(_i("minus_one", [-1], np.float32))
    return model


@pytest.mark.parametrize(("end", "dtype"), [(10 ** 9, np.int32), (2 ** 31 - 1, np.int32), (10 ** 12, np.int64)])
def test_ends_to_the_end_become_int64_max(end, dtype):
    model = _slice_to_the_end(end, dtype)
    result, report = convert_for(model, runtime="tract==0.23")
    onnx.checker.check_model(result, full_check=True)
    assert any("1 Slice node(s) ending at 10^9 or more" in n for n in report.target_notes)
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in result.graph.node if n.op_type == "Constant"}
    consts.update({t.name: numpy_helper.to_array(t) for t in result.graph.initializer})
    node = next(n for n in result.graph.node if n.name == "slice")
    assert consts[node.input[2]].tolist() == [np.iinfo(np.int64).max] * 2
    assert all(consts[i].dtype == np.int64 for i in node.input[1:])
    for shape in ((2, 2, 5), (1, 2, 1)):
        feeds = _feeds(*shape)
        assert np.array_equal(_ort(result, feeds)[0], _ort(model, feeds)[0])
    got = run_in("tract", "0.23", result, _feeds(2, 2, 5))
    assert got["ok"], got
    assert np.array_equal(got["values"][0], _feeds(2, 2, 5)["x"].reshape(2, 10))


def test_small_ends_negative_steps_and_other_releases_are_left():
    assert huge_ends_maximal(_slice_to_the_end(10 ** 9 - 1), "tract 0.23") == []
    backwards = _slice_to_the_end()
    backwards.graph.initializer[-1].CopyFrom(_i("steps", [1, -1], np.int32))
    assert huge_ends_maximal(backwards, "tract 0.23") == []
    assert huge_ends_maximal(_slice_to_the_end(steps=False), "tract 0.23")  # default steps: 1
    assert huge_ends_maximal(_slice_to_the_end(2 ** 63 - 1, np.int64), "tract 0.23") == []  # already INT64_MAX
    result, _ = convert_for(_slice_to_the_end(), runtime="openvino==2026.4")
    ends = next(t for t in result.graph.initializer if t.name == "ends")
    assert numpy_helper.to_array(ends).tolist() == [10 ** 9] * 2


def test_the_data_names_the_forms():
    forms = parse_target("tract==0.23").rewrite_forms
    assert forms["Cast"]["form"] == "int32_dims_widened" and "ppocr_mobile_cls" in forms["Cast"]["measured"]
    assert forms["Slice"]["form"] == "huge_ends_maximal" and "magika" in forms["Slice"]["measured"]
