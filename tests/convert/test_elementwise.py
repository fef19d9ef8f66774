"""Binary elementwise ops across opset 7 (legacy broadcast/axis <-> numpy broadcasting), Add/Sub/
Mul/Div across 6, Pow across 12 (the exponent's own type)."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, assert_valid, cases, converts, helper, model, np,
                                        reference, refused, run, run_backend_case)

RNG = np.random.default_rng(0)
_NP = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


def _legacy(op, a, b, node):
    """What an op with broadcast/axis computes, by the pre-7 rule (B placed at axis)."""
    attrs = {x.name: x.i for x in node.attribute}
    if attrs.get("broadcast") and "axis" in attrs:
        axis = attrs["axis"]
        b = b.reshape(list(b.shape) + [1] * (a.ndim - axis - b.ndim))
    return _NP[op](a, b)


def _binary(op, opset, a_shape, b_shape, b_const=False, elem=TensorProto.FLOAT, **attrs):
    b = RNG.uniform(1, 2, size=b_shape).astype(np.float32)
    inits = [helper.make_tensor("b", elem, b_shape, b.flatten().tolist())] if b_const else []
    inputs = [("a", elem, a_shape)] + ([] if b_const else [("b", elem, b_shape)])
    node = helper.make_node(op, ["a", "b"], ["y"], name="op", **attrs)
    return model([node], opset, inputs, [("y", elem, None)], initializers=inits,
                 ir_version=4 if b_const and opset < 7 else None), b


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("b_shape,axis", [([2, 3, 4], None), ([4], None), ([], None), ([3, 1], 1),
                                          ([1, 3, 1], 1), ([1, 4], 2)])
@pytest.mark.parametrize("b_const", [False, True])
def test_numpy_broadcast_down_to_6_and_back(op, b_shape, axis, b_const):
    m, b = _binary(op, 13, [2, 3, 4], b_shape, b_const)
    a = RNG.uniform(1, 2, size=[2, 3, 4]).astype(np.float32)
    feeds = {"a": a} if b_const else {"a": a, "b": b}
    expected = run(m, feeds)
    down, _ = convert_model(m, 6)
    assert_valid(down)
    node = next(n for n in down.graph.node if n.op_type == op)
    attrs = {x.name: x.i for x in node.attribute}
    assert attrs.get("axis") == axis and attrs.get("broadcast", 0) == (b_shape != [2, 3, 4])
    # the old rule, applied by hand to what the converted node reads
    vals = {**feeds, **{t.name: __import__("onnx").numpy_helper.to_array(t) for t in down.graph.initializer}}
    b_read = vals.get(node.input[1])
    if b_read is None:  # a Reshape feeds the node
        b_read = b.reshape([d for d in b_shape if d != 1] or [1])
    np.testing.assert_allclose(_legacy(op, a, b_read, node), expected[0], rtol=1e-6)
    converts(down, 13, feeds, expected=expected)


@pytest.mark.parametrize("op,swapped", [("Add", "Add"), ("Mul", "Mul"), ("Greater", "Less"), ("Less", "Greater")])
def test_first_input_broadcast_is_swapped_when_the_op_allows(op, swapped):
    node = helper.make_node(op, ["a", "b"], ["y"], name="op")
    out = TensorProto.BOOL if op in ("Greater", "Less") else TensorProto.FLOAT
    m = model([node], 13, [("a", TensorProto.FLOAT, [4]), ("b", TensorProto.FLOAT, [3, 4])], [("y", out, [3, 4])])
    feeds = {"a": RNG.normal(size=[4]).astype(np.float32), "b": RNG.normal(size=[3, 4]).astype(np.float32)}
    down, _ = convert_model(m, 6)
    assert_valid(down)
    node = down.graph.node[0]
    assert node.op_type == swapped and list(node.input) == ["b", "a"]
    assert {x.name: x.i for x in node.attribute} == {"broadcast": 1}
    converts(down, 13, feeds, expected=run(m, feeds))


@pytest.mark.parametrize("a_shape,b_shape,why", [
    ([1, 4], [3, 4], "is itself broadcast"), ([2, 3, 5, 4], [3, 1, 4], "stretches dims of 1"),
    (["n", 4], [4, 4], "not static")])
def test_what_the_old_rule_cannot_express_is_refused(a_shape, b_shape, why):
    m, _ = _binary("Sub", 13, a_shape, b_shape)
    refused(m, 6, "'op'", "7 -> 6", "numpy-style broadcasting exists only from opset 7", why)


@pytest.mark.parametrize("op", ["Add", "Mul"])
@pytest.mark.parametrize("b_const", [False, True])
def test_legacy_axis_goes_up_as_trailing_ones(op, b_const):
    m, b = _binary(op, 6, [2, 3, 4, 5], [3, 4], b_const, broadcast=1, axis=1)
    a = RNG.uniform(1, 2, size=[2, 3, 4, 5]).astype(np.float32)
    feeds = {"a": a} if b_const else {"a": a, "b": b}
    expected = [_legacy(op, a, b, m.graph.node[0])]
    for target in (7, 13, LATEST):
        result, report = converts(m, target, feeds, expected=expected)
        assert not report.version_converter_called


def test_legacy_suffix_and_equal_shapes_go_up_unchanged():
    m, b = _binary("Add", 1, [2, 3], [3], broadcast=1, consumed_inputs=[0, 0])
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]))
    a = RNG.uniform(size=[2, 3]).astype(np.float32)
    result, _ = converts(m, 13, {"a": a, "b": b}, expected=[a + b])
    assert not result.graph.node[0].attribute


def test_int_add_is_refused_below_6():
    m, _ = _binary("Add", 13, [2], [2], elem=TensorProto.INT32)
    refused(m, 5, "'op'", "6 -> 1", "tensor(int32)")


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal", "Greater", "Less"])
def test_logical_and_comparison_ops_down_to_1(op):
    elem = TensorProto.BOOL if op in ("And", "Or", "Xor") else (
        TensorProto.INT32 if op == "Equal" else TensorProto.FLOAT)
    dtype = __import__("onnx").helper.tensor_dtype_to_np_dtype(elem)
    node = helper.make_node(op, ["a", "b"], ["y"], name="op")
    m = model([node], 13, [("a", elem, [2, 3]), ("b", elem, [3])], [("y", TensorProto.BOOL, None)])
    feeds = {"a": RNG.integers(0, 2, size=[2, 3]).astype(dtype), "b": RNG.integers(0, 2, size=[3]).astype(dtype)}
    down, _ = convert_model(m, 1)
    assert_valid(down)
    assert {a.name: a.i for a in down.graph.node[0].attribute} == {"broadcast": 1}
    np.testing.assert_array_equal(reference(down, feeds)[0], run(m, feeds)[0])
    converts(down, 13, feeds, expected=run(m, feeds))


def test_pow_exponent_type():
    node = helper.make_node("Pow", ["a", "b"], ["y"], name="pow")
    m = model([node], 15, [("a", TensorProto.FLOAT, [3]), ("b", TensorProto.INT64, [3])],
              [("y", TensorProto.FLOAT, None)])
    refused(m, 11, "'pow'", "12 -> 7", "one type")
    m2 = model([node], 15, [("a", TensorProto.FLOAT, [3]), ("b", TensorProto.FLOAT, [3])],
               [("y", TensorProto.FLOAT, None)])
    feeds = {"a": np.array([1, 2, 3], np.float32), "b": np.array([2, 0.5, -1], np.float32)}
    result, report = converts(m2, 7, feeds)
    assert not report.version_converter_called
    converts(result, LATEST, feeds, expected=run(m2, feeds))


@pytest.mark.parametrize("case", cases("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal",
                                       "Greater", "Less", "Mod"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)


@pytest.mark.parametrize("elem,fmod", [(TensorProto.INT32, 0), (TensorProto.FLOAT, 1), (TensorProto.FLOAT, 0),
                                       (TensorProto.DOUBLE, 0), (TensorProto.INT64, 1), (TensorProto.UINT32, 1)])
def test_mod_below_28_exact_for_every_fmod_and_type(elem, fmod):
    """Below 28 fmod=0 takes integers and fmod=1 floats; the other pairings are rewritten: the
    result must be numpy's floor mod (fmod=0) or C's fmod (fmod=1), signed zeros, inf and NaN too."""
    node = helper.make_node("Mod", ["a", "b"], ["y"], name="mod", fmod=fmod)
    m = model([node], LATEST, [("a", elem, [12]), ("b", elem, [12])], [("y", elem, [12])])
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    if dtype.kind == "f":
        a = np.array([5, -5, 7, -7, 0.0, -0.0, 0.0, 3, -3, np.inf, 2.5, np.nan], dtype)
        b = np.array([3, 3, -2, -2, 3, 3, -3, np.inf, np.inf, 2, -1e-30, 1], dtype)
    else:
        a = np.array([5, -5, 7, -7, 0, 0, 6, -6, 1, -1, 100, -100]).astype(dtype)
        b = np.array([3, 3, -2, -2, 3, -3, 3, 3, -7, 7, 9, -9]).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.mod(a, b) if fmod == 0 else np.fmod(a, b)
    result, report = converts(m, 13, {"a": a, "b": b}, expected=[want])
    got = run(result, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert (len(result.graph.node) == 1) == ((dtype.kind == "f") == bool(fmod))


def test_mod_int8_truncating_is_refused_below_28():
    node = helper.make_node("Mod", ["a", "b"], ["y"], name="mod", fmod=1)
    m = model([node], LATEST, [("a", TensorProto.INT8, [2]), ("b", TensorProto.INT8, [2])],
              [("y", TensorProto.INT8, [2])])
    refused(m, 13, "'mod'", "28 -> 13", "fmod=1 on int8")


def test_pow_type_parameters_per_step():
    """12 split T/T1 (own adapter); 13 and 15 only add bfloat16 to T and T1 (type-only, per input)."""
    node = helper.make_node("Pow", ["a", "b"], ["y"], name="pow")
    m = model([node], 15, [("a", TensorProto.FLOAT, [3]), ("b", TensorProto.INT64, [3])],
              [("y", TensorProto.FLOAT, None)])
    feeds = {"a": np.array([1, 2, 3], np.float32), "b": np.array([2, 0, 3], np.int64)}
    result, report = converts(m, 12, feeds)
    assert report.type_only["Pow"] == 1 and not report.version_converter_called
    mb = model([node], 15, [("a", TensorProto.FLOAT, [3]), ("b", TensorProto.BFLOAT16, [3])],
               [("y", TensorProto.FLOAT, None)])
    refused(mb, 14, "'pow'", "15 -> 13", "tensor(bfloat16)", "Pow-13")


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8,
                                  TensorProto.UINT16, TensorProto.UINT32, TensorProto.INT64])
@pytest.mark.parametrize("target", [7, 9])
def test_equal_below_11_for_every_type(elem, target):
    """Equal-7 compares bool/int32/int64: other integers go through int64, floats through
    Less/Greater with NaN excluded: NaN, infinities, -0.0 == 0.0, broadcasting."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    node = helper.make_node("Equal", ["a", "b"], ["y"], name="eq")
    m = model([node], 13, [("a", elem, [2, 6]), ("b", elem, [6])], [("y", TensorProto.BOOL, [2, 6])])
    if dtype.kind == "f":
        a = np.array([[1, np.nan, np.inf, -np.inf, 0.0, 2], [-0.0, 3, np.inf, np.nan, 5, -np.inf]], dtype)
        b = np.array([1, np.nan, np.inf, np.inf, -0.0, 3], dtype)
    else:
        a = np.array([[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]]).astype(dtype)
        b = np.array([1, 5, 3, 3, 5, 0]).astype(dtype)
    feeds = {"a": a, "b": b}
    expected = [np.equal(a, b)]
    result, report = converts(m, target, feeds, expected=expected)
    assert not report.version_converter_called


@pytest.mark.parametrize("op", ["Greater", "Less"])
@pytest.mark.parametrize("elem,ok", [(TensorProto.INT32, True), (TensorProto.UINT8, True), (TensorProto.INT64, False),
                                     (TensorProto.FLOAT, True)])
def test_integer_comparisons_below_9(op, elem, ok):
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    node = helper.make_node(op, ["a", "b"], ["y"], name="cmp")
    m = model([node], 13, [("a", elem, [2, 3]), ("b", elem, [3])], [("y", TensorProto.BOOL, [2, 3])])
    info = np.iinfo(dtype) if dtype.kind in "iu" else np.finfo(dtype)
    a = np.array([[info.max, info.min, 0], [1, info.max - 1, 2]], dtype)
    b = np.array([info.max - 1, info.min, 1], dtype)
    if ok:
        converts(m, 7, {"a": a, "b": b}, expected=[np.greater(a, b) if op == "Greater" else np.less(a, b)])
    else:
        refused(m, 7, "'cmp'", "9 -> 7", "int64")


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("elem,ok", [(TensorProto.INT32, True), (TensorProto.UINT8, True), (TensorProto.INT64, False),
                                     (TensorProto.FLOAT, True)])
def test_integer_max_min_below_12(op, elem, ok):
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    node = helper.make_node(op, ["a", "b", "c"], ["y"], name="ext")
    m = model([node], 13, [("a", elem, [2, 3]), ("b", elem, [3]), ("c", elem, [1])], [("y", elem, [2, 3])])
    info = np.iinfo(dtype) if dtype.kind in "iu" else np.finfo(dtype)
    feeds = {"a": np.array([[info.max, info.min, 0], [1, info.max - 1, 2]], dtype),
             "b": np.array([info.max - 1, info.min, 1], dtype), "c": np.array([3], dtype)}
    if ok:
        fn = np.maximum if op == "Max" else np.minimum
        result, _ = converts(m, 8, feeds, expected=[fn(fn(feeds["a"], feeds["b"]), feeds["c"])])
        assert next(n for n in result.graph.node if "y" in n.output).name == "ext"
    else:
        refused(m, 8, "'ext'", "12 -> 8", "int64")
