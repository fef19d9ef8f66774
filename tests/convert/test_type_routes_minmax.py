"""Integer Max/Min (12 -> 8) and Clip (12 -> 11) below opset 12, edge values one by one.

Oracles: numpy's exact integer maximum/minimum/clip, ONNX Runtime on the original model (opset
13) and on the result, onnx.reference on the result; the checker with full_check. Values beyond
2**53 that differ by 1 are where a route through double would be wrong."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model
from tests.convert.support.expressible import why_inexpressible
from tests.convert.support.feature_util import model, reference, refused
from tests.oracle import assert_valid, run

I64, U64 = TensorProto.INT64, TensorProto.UINT64
BIG = 2 ** 53


def _extreme_model(op, shapes, elem=I64):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node(op, names, ["y"], name="ext")
    return model([node], 13, [(n, elem, s) for n, s in zip(names, shapes)], [("y", elem, None)])


def _check(m, target, feeds, want):
    result, report = convert_model(m, target)
    assert_valid(result)
    assert result.opset_import[0].version == target
    for got in (run(result, feeds)[0], reference(result, feeds)[0], run(m, feeds)[0]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    return result, report


def _fold(op, arrays):
    fn = np.maximum if op == "Max" else np.minimum
    out = arrays[0]
    for a in arrays[1:]:
        out = fn(out, a)
    return out


@pytest.mark.parametrize("target", [9, 10, 11])
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_int64_beyond_2_53_equal_values_and_extremes(op, target):
    info = np.iinfo(np.int64)
    a = np.array([BIG + 1, BIG, -BIG - 1, info.max, info.min, 7, 7, -3], np.int64)
    b = np.array([BIG, BIG + 1, -BIG, info.max - 1, info.min + 1, 7, -7, -3], np.int64)
    m = _extreme_model(op, [[8], [8]])
    result, report = _check(m, target, {"x0": a, "x1": b}, _fold(op, [a, b]))
    assert sorted(n.op_type for n in result.graph.node) == ["Less", "Where"]
    assert [n.name for n in result.graph.node if "y" in n.output] == ["ext"]
    assert report.changes[f"{op} on 64-bit integers -> Where/Less"] == 1


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_uint64_beyond_int64(op):
    info = np.iinfo(np.uint64)
    a = np.array([info.max, 2 ** 63, 2 ** 63 + 1, 0, BIG + 1], np.uint64)
    b = np.array([info.max - 1, 2 ** 63 + 1, 2 ** 63, 0, BIG], np.uint64)
    m = _extreme_model(op, [[5], [5]], U64)
    feeds = {"x0": a, "x1": b}
    result, _ = convert_model(m, 11)
    assert_valid(result)
    np.testing.assert_array_equal(reference(result, feeds)[0], _fold(op, [a, b]))  # ORT lacks uint64 Max/Less


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("shapes", [[[2, 1, 3], [4, 1]], [[1], [3, 2]], [[], [2, 2]], [[2, 3], [3], [1], [2, 1]],
                                    [[4], [4], [4]]])
def test_broadcasting_and_three_or_more_inputs(op, shapes):
    rng = np.random.default_rng(len(shapes))
    arrays = [np.asarray(rng.integers(-5, 5, size=s) + BIG).astype(np.int64) for s in shapes]
    m = _extreme_model(op, shapes)
    result, _ = _check(m, 11, {f"x{i}": a for i, a in enumerate(arrays)}, _fold(op, arrays))
    assert sum(n.op_type == "Where" for n in result.graph.node) == len(shapes) - 1


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_one_input_is_an_identity(op):
    a = np.array([BIG + 1, -1], np.int64)
    result, _ = _check(_extreme_model(op, [[2]]), 9, {"x0": a}, a)
    assert [n.op_type for n in result.graph.node] == ["Identity"]


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("target", [7, 8])
def test_int64_below_9_is_refused(op, target):
    m = _extreme_model(op, [[2], [2]])
    refused(m, target, "'ext'", f"{op} 12 -> 8", "int64", "Where", "opset 9")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-2 ** 63, 2 ** 63 - 1), st.integers(-2 ** 63, 2 ** 63 - 1),
                          st.integers(-2 ** 63, 2 ** 63 - 1)), min_size=1, max_size=6))
def test_hypothesis_int64_max_min_and_clip(rows):
    a, b, c = (np.array([r[i] for r in rows], np.int64) for i in range(3))
    for op in ("Max", "Min"):
        m = _extreme_model(op, [[len(rows)]] * 3)
        result, _ = convert_model(m, 11)
        np.testing.assert_array_equal(run(result, {"x0": a, "x1": b, "x2": c})[0], _fold(op, [a, b, c]))
    lo, hi = np.int64(min(b[0], c[0])), np.int64(max(b[0], c[0]))
    clip = _clip_model(["x", "lo", "hi"], I64, [len(rows)])
    result, _ = convert_model(clip, 11)
    np.testing.assert_array_equal(run(result, {"x": a, "lo": np.array(lo), "hi": np.array(hi)})[0], np.clip(a, lo, hi))


# ---------------------------------------------------------------- Clip

def _clip_model(inputs, elem, shape, constants=None):
    constants = constants or {}
    node = helper.make_node("Clip", inputs, ["y"], name="clip")
    graph_inputs = [("x", elem, shape)] + [(n, elem, []) for n in inputs[1:] if n and n not in constants]
    inits = [numpy_helper.from_array(np.asarray(v, helper.tensor_dtype_to_np_dtype(elem)), n)
             for n, v in constants.items()]
    return model([node], 13, graph_inputs, [("y", elem, None)], initializers=inits)


X64 = np.array([[BIG + 1, BIG, BIG - 1], [-BIG - 1, 2 ** 63 - 1, -2 ** 63]], np.int64)


@pytest.mark.parametrize("target", [9, 10, 11])
@pytest.mark.parametrize("lo, hi", [(BIG, BIG), (-BIG, BIG), (BIG + 1, BIG - 1), (-2 ** 63, 2 ** 63 - 1)])
@pytest.mark.parametrize("constant", [False, True])
def test_int64_clip_bounds(lo, hi, constant, target):
    """min > max gives max everywhere (Clip-13: Min(max, Max(x, min)))."""
    m = _clip_model(["x", "lo", "hi"], I64, [2, 3], {"lo": lo, "hi": hi} if constant else None)
    feeds = {"x": X64} if constant else {"x": X64, "lo": np.array(lo, np.int64), "hi": np.array(hi, np.int64)}
    want = np.minimum(np.int64(hi), np.maximum(X64, np.int64(lo)))
    result, _ = _check(m, target, feeds, want)
    assert sorted(n.op_type for n in result.graph.node) == ["Less", "Less", "Where", "Where"]
    assert [n.name for n in result.graph.node if "y" in n.output] == ["clip"]


@pytest.mark.parametrize("inputs, want", [
    (["x", "lo"], np.maximum(X64, np.int64(BIG))),
    (["x", "", "hi"], np.minimum(X64, np.int64(BIG))),
    (["x"], X64), (["x", "", ""], X64)])
def test_int64_clip_absent_bounds(inputs, want):
    m = _clip_model(inputs, I64, [2, 3])
    feeds = {"x": X64} | {n: np.array(BIG, np.int64) for n in inputs[1:] if n}
    result, _ = _check(m, 11, feeds, want)
    assert sum(n.op_type == "Where" for n in result.graph.node) == sum(bool(n) for n in inputs[1:])


def test_clip_bounds_of_shape_1_do_not_broadcast_a_scalar():
    """A constant bound of one element becomes a scalar: the result of a 0-D x stays 0-D."""
    m = _clip_model(["x", "lo"], I64, [], {})
    m.graph.initializer.append(numpy_helper.from_array(np.array([BIG], np.int64), "lo"))
    del m.graph.input[1:]
    result, _ = convert_model(m, 11)
    got = reference(result, {"x": np.array(BIG - 5, np.int64)})[0]
    assert got.shape == () and got == BIG


@pytest.mark.parametrize("elem", [TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32, TensorProto.UINT32,
                                  TensorProto.INT16, TensorProto.UINT64])
@pytest.mark.parametrize("target", [9, 11])
def test_other_integer_clips_at_9_and_later(elem, target):
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 0, 5, info.max - 1], dtype)
    lo, hi = dtype.type(info.min + 1 if info.min else 1), dtype.type(info.max - 1)
    m = _clip_model(["x", "lo", "hi"], elem, [5])
    feeds = {"x": x, "lo": np.array(lo), "hi": np.array(hi)}
    result, _ = convert_model(m, target)
    assert_valid(result)
    np.testing.assert_array_equal(reference(result, feeds)[0], np.clip(x, lo, hi))


@pytest.mark.parametrize("elem", [TensorProto.INT8, TensorProto.INT32, TensorProto.UINT16])
@pytest.mark.parametrize("target", [7, 8])
def test_small_integer_clip_below_9_goes_through_float_or_double(elem, target):
    """8/16-bit integers through float (ONNX Runtime's Clip-6 takes float only), 32-bit through
    double (onnx.reference runs it)."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 0, 5, 2], dtype)
    m = _clip_model(["x", "lo", "hi"], elem, [5], {"lo": 1, "hi": 100})
    want = np.clip(x, dtype.type(1), dtype.type(100))
    result, report = convert_model(m, target)
    assert_valid(result)
    np.testing.assert_array_equal(reference(result, {"x": x})[0], want)
    wide = "float" if dtype.itemsize <= 2 else "double"
    if wide == "float":
        np.testing.assert_array_equal(run(result, {"x": x})[0], want)
    assert [n.op_type for n in result.graph.node] == ["Cast", "Clip", "Cast"]
    assert {a.name: a.f for a in result.graph.node[1].attribute} == {"min": 1.0, "max": 100.0}
    assert report.changes[f"integer Clip -> through {wide}"] == 1


def test_refusals_below_9():
    m = _clip_model(["x", "lo"], I64, [2])
    refused(m, 8, "'clip'", "Clip 12 -> 11", "int64", "Where", "opset 9")
    big = _clip_model(["x", "lo"], TensorProto.INT32, [2], {"lo": 2 ** 31 - 1})
    refused(big, 8, "'clip'", "Clip 12 -> 11", "2147483647", "float32")  # Clip-6's float attribute cannot hold 2**31 - 1
    computed = _clip_model(["x", "lo"], TensorProto.INT32, [2])
    refused(computed, 8, "'clip'", "Clip 12 -> 11", "'lo' is not a constant")


# ---------------------------------------------------------------- the oracle agrees

def _oracle(m, target):
    inferred = onnx.shape_inference.infer_shapes(m)
    g = inferred.graph
    types = {vi.name: vi.type for vi in [*g.input, *g.output, *g.value_info]}
    types.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    return why_inexpressible(g.node[0], 13, target, types.get, consts.get)


@pytest.mark.parametrize("target", [7, 8, 9, 10, 11])
@pytest.mark.parametrize("m", [
    _extreme_model("Max", [[2], [2]]), _extreme_model("Min", [[2], [2]], U64),
    _extreme_model("Min", [[2], [2]], TensorProto.INT32), _extreme_model("Max", [[3], [3]], TensorProto.UINT8),
    _clip_model(["x", "lo", "hi"], I64, [2]), _clip_model(["x", "lo"], TensorProto.INT32, [2]),
    _clip_model(["x", "lo"], TensorProto.INT32, [2], {"lo": 2 ** 31 - 1}),
    _clip_model(["x", "", "hi"], TensorProto.INT8, [2], {"hi": 3}), _clip_model(["x"], U64, [2])],
    ids=lambda m: f"{m.graph.node[0].op_type}-{m.graph.input[0].type.tensor_type.elem_type}-{len(m.graph.input)}")
def test_oracle_routes_match_the_converter(m, target):
    try:
        convert_model(m, target)
        converted = True
    except Exception:  # noqa: BLE001
        converted = False
    assert converted == (_oracle(m, target) is None), _oracle(m, target)
