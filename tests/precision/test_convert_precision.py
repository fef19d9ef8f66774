"""convert --dtype: each bookkeeping point on a small model of its own, run in ONNX Runtime
against the float32 model (relative L2 error), plus refusals and idempotence."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.errors import RewriterError

F16_LOWEST = float(np.finfo(np.float16).min)


def _model(nodes, inputs, outputs, inits=(), opset=17, functions=()):
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)),
                     opset_imports=[h.make_opsetid("", opset)] + [h.make_opsetid(f.domain, 1) for f in functions],
                     functions=list(functions))
    onnx.checker.check_model(m, full_check=True)
    return m


def _vi(name, shape, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, shape)


def _run(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30))


def _check_same(source, result, feeds, limit=1e-2):
    onnx.checker.check_model(result, full_check=True)
    want, got = _run(source, feeds), _run(result, {k: v.astype(_input_dtype(result, k)) for k, v in feeds.items()})
    for w, g in zip(want, got):
        assert np.isfinite(g).all() == np.isfinite(w).all()
        assert _rel_l2(w, g) <= limit, (_rel_l2(w, g), w, g)
    return got


def _input_dtype(model, name):
    v = next(i for i in model.graph.input if i.name == name)
    return onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)


def _nodes(model, op):
    return [n for n in model.graph.node if n.op_type == op]


def _elem(model, name):
    for t in model.graph.initializer:
        if t.name == name:
            return t.data_type
    for v in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        if v.name == name:
            return v.type.tensor_type.elem_type
    return None


RNG = np.random.default_rng(0)


def _matmul_model():
    w = nh.from_array(RNG.standard_normal((8, 8)).astype(np.float32), "W")
    return _model([h.make_node("MatMul", ["x", "W"], ["y"]), h.make_node("Relu", ["y"], ["z"])],
                  [_vi("x", [2, 8])], [_vi("z", [2, 8])], [w])


def test_initializers_become_half_and_io_stays_float32():
    m = _matmul_model()
    r = rewriter.convert_precision(m, "float16")
    assert _elem(r, "W") == T.FLOAT16
    assert _elem(r, "x") == T.FLOAT and _elem(r, "z") == T.FLOAT
    assert [n.op_type for n in r.graph.node] == ["Cast", "MatMul", "Relu", "Cast"]
    _check_same(m, r, {"x": RNG.standard_normal((2, 8)).astype(np.float32)})
    assert r.graph.initializer[0].ByteSize() < 0.6 * m.graph.initializer[0].ByteSize()


def test_no_keep_io_types_makes_inputs_and_outputs_half():
    m = _matmul_model()
    r = rewriter.convert_precision(m, "float16", keep_io_types=False)
    assert _elem(r, "x") == T.FLOAT16 and _elem(r, "z") == T.FLOAT16
    assert not _nodes(r, "Cast")
    _check_same(m, r, {"x": RNG.standard_normal((2, 8)).astype(np.float32)})


@pytest.mark.parametrize("attr", ["value", "value_float", "value_floats"])
def test_constant_node_values_are_converted(attr):
    value = {"value": nh.from_array(np.array([1.5, -2.25], np.float32)), "value_float": 1.5,
             "value_floats": [1.5, -2.25]}[attr]
    m = _model([h.make_node("Constant", [], ["c"], **{attr: value}), h.make_node("Mul", ["x", "c"], ["y"])],
               [_vi("x", [2])], [_vi("y", [2])])
    r = rewriter.convert_precision(m, "float16")
    const = _nodes(r, "Constant")[0]
    assert [a.name for a in const.attribute] == ["value"] and const.attribute[0].t.data_type == T.FLOAT16
    assert np.ravel(nh.to_array(const.attribute[0].t)).astype(np.float32).tolist() == (
        [1.5] if attr == "value_float" else [1.5, -2.25])
    _check_same(m, r, {"x": np.array([3.0, 4.0], np.float32)}, limit=1e-3)


def test_constant_of_shape_and_cast_targets():
    m = _model([h.make_node("Shape", ["x"], ["s"]),
                h.make_node("ConstantOfShape", ["s"], ["c"], value=nh.from_array(np.array([0.5], np.float32))),
                h.make_node("Cast", ["n"], ["nf"], to=T.FLOAT),
                h.make_node("Add", ["c", "nf"], ["a"]), h.make_node("Add", ["a", "x"], ["y"])],
               [_vi("x", [3, 3]), _vi("n", [3, 3], T.INT32)], [_vi("y", [3, 3])])
    r = rewriter.convert_precision(m, "float16")
    assert _nodes(r, "ConstantOfShape")[0].attribute[0].t.data_type == T.FLOAT16
    cast_n = next(n for n in _nodes(r, "Cast") if n.input[0] == "n")
    assert cast_n.attribute[0].i == T.FLOAT16
    feeds = {"x": RNG.standard_normal((3, 3)).astype(np.float32), "n": np.arange(9, dtype=np.int32).reshape(3, 3)}
    _check_same(m, r, feeds, limit=1e-3)


def test_random_and_eye_like_dtypes():
    from onnx.reference import ReferenceEvaluator

    m = _model([h.make_node("RandomNormalLike", ["x"], ["rnd"], scale=0.0),
                h.make_node("RandomUniform", [], ["u"], shape=[3, 3], low=0.0, high=0.0),
                h.make_node("EyeLike", ["x"], ["eye"]),
                h.make_node("Add", ["rnd", "eye"], ["a"]), h.make_node("Add", ["a", "u"], ["y"])],
               [_vi("x", [3, 3])], [_vi("y", [3, 3])])
    r = rewriter.convert_precision(m, "float16")
    for n in r.graph.node:
        if n.op_type in ("RandomNormalLike", "RandomUniform", "EyeLike"):
            assert {a.name: a.i for a in n.attribute}["dtype"] == T.FLOAT16, n.op_type
    got = ReferenceEvaluator(r).run(None, {"x": np.zeros((3, 3), np.float32)})[0]
    assert got.dtype == np.float32 and np.array_equal(got, np.eye(3, dtype=np.float32))


def test_initializer_read_in_both_types_is_stored_once_per_type():
    w = nh.from_array(RNG.standard_normal((4,)).astype(np.float32), "W")
    m = _model([h.make_node("Add", ["x", "W"], ["a"], name="half_add"),
                h.make_node("Mul", ["a", "W"], ["y"], name="kept_mul")],
               [_vi("x", [4])], [_vi("y", [4])], [w])
    r = rewriter.convert_precision(m, "float16", keep_nodes=["kept_mul"])
    types = sorted(t.data_type for t in r.graph.initializer)
    assert types == [T.FLOAT, T.FLOAT16]
    add = next(n for n in r.graph.node if n.name == "half_add")
    mul = next(n for n in r.graph.node if n.name == "kept_mul")
    assert _elem(r, add.input[1]) == T.FLOAT16 and mul.input[1] == "W" and _elem(r, "W") == T.FLOAT
    _check_same(m, r, {"x": RNG.standard_normal(4).astype(np.float32)})


def test_keep_op_types_and_reasons():
    m = _matmul_model()
    r, report = _proto_report(m, keep_op_types=("Relu",))
    assert [(k.code, k.reason) for k in report.kept] == [("keep-op-types", "--keep-op-types")]
    relu = _nodes(r, "Relu")[0]
    assert _elem_of_value(r, relu.input[0]) == T.FLOAT  # a Cast back to float32 feeds it
    _check_same(m, r, {"x": RNG.standard_normal((2, 8)).astype(np.float32)})


def _elem_of_value(model, name):
    inferred = onnx.shape_inference.infer_shapes(model)
    return {v.name: v.type.tensor_type.elem_type
            for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
            }.get(name, _elem(model, name))


def _proto_report(m, dtype="float16", **kw):
    from rewriter.precision import convert_precision_proto

    return convert_precision_proto(m, dtype, **kw)


def test_no_cast_pair_that_cancels():
    # a half input cast to float32 by the model itself: the halved Relu reads the half value directly
    m = _model([h.make_node("Cast", ["x"], ["xf"], to=T.FLOAT), h.make_node("Relu", ["xf"], ["y"])],
               [_vi("x", [3], T.FLOAT16)], [_vi("y", [3])])
    r = rewriter.convert_precision(m, "float16")
    relu = _nodes(r, "Relu")[0]
    assert relu.input[0] == "x"
    producers = {o: n for n in r.graph.node for o in n.output}
    for n in _nodes(r, "Cast"):
        src = producers.get(n.input[0])
        assert not (src is not None and src.op_type == "Cast" and n.attribute[0].i == T.FLOAT16
                    and _elem_of_value(r, src.input[0]) == T.FLOAT16), onnx.printer.to_text(r.graph)
    x = np.array([-1.0, 0.5, 2.0], np.float16)
    assert np.array_equal(_run(r, {"x": x})[0], _run(m, {"x": x})[0])


def test_resize_scales_stay_float32():
    scales = nh.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    m = _model([h.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")],
               [_vi("x", [1, 1, 2, 2])], [_vi("y", [1, 1, 4, 4])], [scales])
    r = rewriter.convert_precision(m, "float16")
    assert _elem(r, "scales") == T.FLOAT
    resize = _nodes(r, "Resize")[0]
    assert _elem_of_value(r, resize.input[0]) == T.FLOAT16
    _check_same(m, r, {"x": RNG.standard_normal((1, 1, 2, 2)).astype(np.float32)})


@pytest.mark.parametrize("fill", [-1e9, float(np.finfo(np.float32).min)])
def test_additive_mask_before_softmax_is_clamped(fill):
    mask = np.where(np.arange(6).reshape(1, 6) % 3 == 0, fill, 0.0).astype(np.float32)
    m = _model([h.make_node("Add", ["s", "mask"], ["a"]), h.make_node("Softmax", ["a"], ["y"], axis=-1)],
               [_vi("s", [2, 6])], [_vi("y", [2, 6])], [nh.from_array(mask, "mask")])
    r, report = _proto_report(m)
    assert report.applied.constants_clamped == 1 and not report.kept
    half = nh.to_array(next(t for t in r.graph.initializer if t.name == "mask"))
    assert half.dtype == np.float16 and half.min() == F16_LOWEST and np.isfinite(half).all()
    got = _check_same(m, r, {"s": RNG.standard_normal((2, 6)).astype(np.float32)})
    assert np.all(got[0][:, ::3] == 0)


def test_huge_constant_elsewhere_keeps_its_reader_float32():
    big = nh.from_array(np.array([1e6, 2.0], np.float32), "big")
    m = _model([h.make_node("Add", ["x", "big"], ["a"], name="add_big"), h.make_node("Relu", ["a"], ["y"])],
               [_vi("x", [2])], [_vi("y", [2])], [big])
    r, report = _proto_report(m)
    assert [(k.label, k.reason) for k in report.kept] == [
        ("node 'add_big' (Add)", "constant 'big' is outside float16's range")]
    assert _elem(r, "big") == T.FLOAT
    _check_same(m, r, {"x": np.array([1.0, -3.0], np.float32)}, limit=1e-3)


def test_tiny_constant_that_would_flush_to_zero_keeps_its_reader_float32():
    eps = nh.from_array(np.array(1e-12, np.float32), "eps")
    m = _model([h.make_node("Add", ["x", "eps"], ["a"]), h.make_node("Reciprocal", ["a"], ["y"])],
               [_vi("x", [2])], [_vi("y", [2])], [eps])
    r, report = _proto_report(m)
    assert [(k.op, k.code) for k in report.kept] == [("Add", "out-of-range")]
    _check_same(m, r, {"x": np.array([0.0, 2.0], np.float32)}, limit=1e-3)


def test_tiny_biases_are_halved_and_tiny_scales_are_not():
    """All-tiny biases (BatchNorm folded on random weights gives 1e-8) flush to 0 beside the
    sums they are added to; a tiny per-channel scale flushing to 0 would zero its channel."""
    w = nh.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    b = nh.from_array((RNG.standard_normal(4) * 1e-8).astype(np.float32), "B")
    shift = nh.from_array((RNG.standard_normal((1, 4, 1, 1)) * 1e-9).astype(np.float32), "shift")
    scale = nh.from_array((RNG.random((1, 4, 1, 1)) * 1e-6 + 1e-7).astype(np.float32), "scale")
    m = _model([h.make_node("Conv", ["x", "W", "B"], ["c"], name="conv"),
                h.make_node("Add", ["c", "shift"], ["a"], name="shifted"),
                h.make_node("Mul", ["a", "scale"], ["y"], name="scaled")],
               [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 4, 6, 6])], [w, b, shift, scale])
    r, report = _proto_report(m)
    assert [(k.label, k.reason) for k in report.kept] == [
        ("node 'scaled' (Mul)", "constant 'scale' is outside float16's range")]
    assert _elem(r, "B") == _elem(r, "shift") == T.FLOAT16 and _elem(r, "scale") == T.FLOAT
    _check_same(m, r, {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)})


def test_shape_arithmetic_stays_float32():
    m = _model([h.make_node("Shape", ["x"], ["s"]), h.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
                h.make_node("Mul", ["sf", "k"], ["m"]), h.make_node("Floor", ["m"], ["fl"]),
                h.make_node("Cast", ["fl"], ["si"], to=T.INT64), h.make_node("Relu", ["x"], ["r"]),
                h.make_node("Expand", ["r", "si"], ["y"])],
               [_vi("x", [1, 3])], [_vi("y", [1, 3])], [nh.from_array(np.array([1.0, 1.0], np.float32), "k")])
    r, report = _proto_report(m)
    kept = sorted(k.op for k in report.kept if k.code == "shape-arithmetic")
    assert kept == ["Cast", "Floor", "Mul"]
    assert report.half_by_op == {"Expand": 1, "Relu": 1}


def test_if_branches_are_converted():
    then = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [], [_vi("t", [2])],
                        [nh.from_array(np.array([2.0, 2.0], np.float32), "two")])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", [2])])
    m = _model([h.make_node("Relu", ["x0"], ["x"]), h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
               [_vi("x0", [2]), _vi("c", [], T.BOOL)], [_vi("y", [2])])
    r, report = _proto_report(m)
    assert report.half_by_op == {"Mul": 1, "Neg": 1, "Relu": 1}
    if_node = _nodes(r, "If")[0]
    then_g = if_node.attribute[0].g if if_node.attribute[0].name == "then_branch" else if_node.attribute[1].g
    assert then_g.initializer[0].data_type == T.FLOAT16
    for c in (True, False):
        _check_same(m, r, {"x0": np.array([1.5, -2.0], np.float32), "c": np.array(c)}, limit=1e-3)


def test_loop_and_scan_bodies_are_converted():
    from onnx.backend.test.case.node import collect_testcases

    cases = {c.name: c for c in collect_testcases() if c.name in ("test_scan_sum", "test_loop11", "test_scan9_sum")}
    assert len(cases) == 3
    for case in cases.values():
        r, report = _proto_report(case.model)
        assert report.half_nodes >= 1
        inputs, outputs = case.data_sets[0]
        got = _run(r, {i.name: v for i, v in zip(case.model.graph.input, inputs)})
        for g, w in zip(got, outputs):  # the case's own expected outputs
            assert _rel_l2(w, g) <= 1e-2


def _scaled_function():
    """A local function with a Constant (value_float), a Cast to float and an attribute
    reference: every float32 place a body has."""
    alpha = h.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    leaky = h.make_node("LeakyRelu", ["a"], ["l"])
    leaky.attribute.append(alpha)
    body = [leaky, h.make_node("Constant", [], ["eps"], value_float=0.5),
            h.make_node("Add", ["l", "eps"], ["s"]), h.make_node("Cast", ["s"], ["c"], to=T.FLOAT),
            h.make_node("Mul", ["c", "a"], ["b"])]
    return h.make_function("local", "Scaled", ["a"], ["b"], body, [h.make_opsetid("", 17)], attributes=["alpha"])


def test_sibling_bodies_defining_the_same_names():
    """Two Loops whose bodies define the same value names (tf2onnx exports each LSTM direction
    so): each body's Casts land in its own body."""
    def body():
        w = nh.from_array(np.full((4,), 0.5, np.float32), "w")
        nodes = [h.make_node("Identity", ["cond_in"], ["cond_out"]),
                 h.make_node("Mul", ["acc_in", "w"], ["scaled"]), h.make_node("Tanh", ["scaled"], ["acc_out"])]
        return h.make_graph(nodes, "body", [h.make_tensor_value_info("i", T.INT64, []),
                                            h.make_tensor_value_info("cond_in", T.BOOL, []),
                                            _vi("acc_in", [4])],
                            [h.make_tensor_value_info("cond_out", T.BOOL, []), _vi("acc_out", [4])], [w])

    trip = nh.from_array(np.array(3, np.int64), "trip")
    cond = nh.from_array(np.array(True), "cond")
    m = _model([h.make_node("Relu", ["x"], ["r"]),
                h.make_node("Loop", ["trip", "cond", "r"], ["y1"], body=body(), name="forward"),
                h.make_node("Loop", ["trip", "cond", "r"], ["y2"], body=body(), name="backward")],
               [_vi("x", [4])], [_vi("y1", [4]), _vi("y2", [4])], [trip, cond])
    r, report = _proto_report(m)
    assert report.half_nodes >= 4
    bodies = [n.attribute[0].g for n in r.graph.node if n.op_type == "Loop"]
    names = [{o for n in b.node for o in n.output} | {i.name for i in b.input} for b in bodies]
    assert not names[0] & names[1]  # the second body's values were renamed
    _check_same(m, r, {"x": np.array([1.0, -2.0, 0.5, 3.0], np.float32)}, limit=2e-3)


def _carried_weight_loop():
    """A Loop carrying a weight through its body unchanged (as tf2onnx exports LSTMs):
    state (acc, w) -> (tanh(acc @ w), w)."""
    nodes = [h.make_node("Identity", ["cond_in"], ["cond_out"]),
             h.make_node("MatMul", ["acc_in", "w_in"], ["prod"], name="step"), h.make_node("Tanh", ["prod"], ["acc_out"])]
    body = h.make_graph(nodes, "body", [h.make_tensor_value_info("i", T.INT64, []),
                                        h.make_tensor_value_info("cond_in", T.BOOL, []), _vi("acc_in", [1, 8]),
                                        _vi("w_in", [8, 8])],
                        [h.make_tensor_value_info("cond_out", T.BOOL, []), _vi("acc_out", [1, 8]), _vi("w_in", [8, 8])])
    w = nh.from_array((RNG.standard_normal((8, 8)) * 0.5).astype(np.float32), "W")
    trip = nh.from_array(np.array(4, np.int64), "trip")
    cond = nh.from_array(np.array(True), "cond")
    return _model([h.make_node("Loop", ["trip", "cond", "x", "W"], ["y", "w_last"], body=body, name="loop")],
                  [_vi("x", [1, 8])], [_vi("y", [1, 8]), _vi("w_last", [8, 8])], [w, trip, cond])


def test_loop_carried_weights_are_carried_in_half():
    m = _carried_weight_loop()
    r, report = _proto_report(m)
    assert report.applied.constants_duplicated == 0 and _elem(r, "W") == T.FLOAT16
    body = r.graph.node[-1].attribute[0].g if r.graph.node[-1].op_type == "Loop" else \
        next(n for n in r.graph.node if n.op_type == "Loop").attribute[0].g
    assert next(v for v in body.input if v.name == "w_in").type.tensor_type.elem_type == T.FLOAT16
    assert next(v for v in body.output if v.name == "w_in").type.tensor_type.elem_type == T.FLOAT16
    assert not [n for n in body.node if n.op_type == "Cast" and "w_in" in n.input]  # not cast on each iteration
    got = _check_same(m, r, {"x": RNG.standard_normal((1, 8)).astype(np.float32)}, limit=5e-3)
    assert got[1].dtype == np.float32  # the carried weight's final value: a float32 output still


def test_loop_state_with_a_constant_start_that_the_body_changes():
    nodes = [h.make_node("Identity", ["cond_in"], ["cond_out"]),
             h.make_node("Mul", ["acc_in", "x"], ["prod"]), h.make_node("Tanh", ["prod"], ["acc_out"])]
    body = h.make_graph(nodes, "body", [h.make_tensor_value_info("i", T.INT64, []),
                                        h.make_tensor_value_info("cond_in", T.BOOL, []), _vi("acc_in", [8])],
                        [h.make_tensor_value_info("cond_out", T.BOOL, []), _vi("acc_out", [8])])
    start = nh.from_array(np.linspace(0.5, 1.5, 8).astype(np.float32), "start")
    trip = nh.from_array(np.array(3, np.int64), "trip")
    cond = nh.from_array(np.array(True), "cond")
    m = _model([h.make_node("Loop", ["trip", "cond", "start"], ["y"], body=body)], [_vi("x", [8])], [_vi("y", [8])],
               [start, trip, cond])
    r, _ = _proto_report(m)
    body = next(n for n in r.graph.node if n.op_type == "Loop").attribute[0].g
    assert body.input[2].type.tensor_type.elem_type == T.FLOAT  # a changing state keeps the Loop's boundary
    _check_same(m, r, {"x": RNG.standard_normal(8).astype(np.float32)}, limit=5e-3)


def test_loop_carried_weight_read_in_float32_stays_float32():
    m = _carried_weight_loop()
    r, report = _proto_report(m, keep_nodes=["step"])
    assert _elem(r, "W") == T.FLOAT
    body = next(n for n in r.graph.node if n.op_type == "Loop").attribute[0].g
    assert next(v for v in body.input if v.name == "w_in").type.tensor_type.elem_type == T.FLOAT
    _check_same(m, r, {"x": RNG.standard_normal((1, 8)).astype(np.float32)}, limit=5e-3)


def test_function_calls_run_in_half_through_specialized_copies():
    fn = _scaled_function()
    nodes = [h.make_node("Relu", ["x"], ["r"]),
             h.make_node("Scaled", ["r"], ["y1"], domain="local", name="one", alpha=0.1),
             h.make_node("Scaled", ["r"], ["y2"], domain="local", name="two", alpha=0.2),
             h.make_node("Scaled", ["r"], ["y3"], domain="local", name="three", alpha=0.1)]
    m = _model(nodes, [_vi("x", [4])], [_vi("y1", [4]), _vi("y2", [4]), _vi("y3", [4])], functions=[fn])
    r, report = _proto_report(m)
    assert report.kept == [] and report.applied.function_calls == 3
    calls = {n.name: n for n in r.graph.node if n.domain == "local"}
    assert calls["one"].op_type == calls["three"].op_type != calls["two"].op_type  # one copy per alpha
    assert all(not n.attribute for n in calls.values())
    copies = {f.name: f for f in r.functions}
    assert set(copies) == {calls["one"].op_type, calls["two"].op_type}  # the original: no call names it now
    for f in copies.values():
        const = next(n for n in f.node if n.op_type == "Constant")
        assert const.attribute[0].t.data_type == T.FLOAT16
        assert [a.i for n in f.node if n.op_type == "Cast" for a in n.attribute] == [T.FLOAT16]
        assert not any(a.ref_attr_name for n in f.node for a in n.attribute)
    # the calls read and make float16: the Casts are at the model's edge only
    assert [n.attribute[0].i for n in r.graph.node if n.op_type == "Cast"] == [T.FLOAT16] + [T.FLOAT] * 3
    x = np.array([1.5, -2.0, 0.25, -0.5], np.float32)
    got = _check_same(m, r, {"x": x}, limit=1e-3)
    assert np.allclose(got[0], np.where(x > 0, x, 0) * (np.where(x > 0, x, 0) + 0.5), rtol=1e-3)
    twice = rewriter.convert_precision(r, "float16")
    assert twice.SerializeToString() == r.SerializeToString()


def test_function_call_kept_by_the_user_keeps_the_original():
    fn = _scaled_function()
    nodes = [h.make_node("Scaled", ["x"], ["y1"], domain="local", name="one", alpha=0.1),
             h.make_node("Scaled", ["x"], ["y2"], domain="local", name="two", alpha=0.1)]
    m = _model(nodes, [_vi("x", [4])], [_vi("y1", [4]), _vi("y2", [4])], functions=[fn])
    r, report = _proto_report(m, keep_nodes=["two"])
    assert [(k.label, k.code) for k in report.kept] == [("node 'two' (Scaled)", "keep-nodes")]
    names = {f.name for f in r.functions}
    assert names == {"Scaled", "Scaled_float16"}
    assert {n.name: n.op_type for n in r.graph.node if n.domain == "local"} == {"one": "Scaled_float16",
                                                                                 "two": "Scaled"}
    _check_same(m, r, {"x": np.array([1.5, -2.0, 0.25, -0.5], np.float32)}, limit=1e-3)


def test_nested_function_calls_get_copies_at_every_level():
    inner = h.make_function("local", "Inner", ["a"], ["b"],
                            [h.make_node("Constant", [], ["k"], value_floats=[3.0]),
                             h.make_node("Mul", ["a", "k"], ["b"])], [h.make_opsetid("", 17)])
    outer = h.make_function("local", "Outer", ["a"], ["b"],
                            [h.make_node("Inner", ["a"], ["t"], domain="local"), h.make_node("Sqrt", ["t"], ["b"])],
                            [h.make_opsetid("", 17), h.make_opsetid("local", 1)])
    m = _model([h.make_node("Outer", ["x"], ["y"], domain="local")], [_vi("x", [3])], [_vi("y", [3])],
               functions=[inner, outer])
    r, report = _proto_report(m)
    assert report.kept == []
    assert sorted(f.name for f in r.functions) == ["Inner_float16", "Outer_float16"]
    body = next(f for f in r.functions if f.name == "Outer_float16")
    assert [n.op_type for n in body.node] == ["Inner_float16", "Sqrt"]
    _check_same(m, r, {"x": np.array([1.0, 4.0, 9.0], np.float32)}, limit=1e-3)


def test_function_with_nothing_in_half_stays_float32():
    fn = h.make_function("local", "Positions", ["n"], ["p"],
                         [h.make_node("Constant", [], ["zero"], value_float=0.0),
                          h.make_node("Constant", [], ["one"], value_float=1.0),
                          h.make_node("Range", ["zero", "n", "one"], ["p"])], [h.make_opsetid("", 17)])
    m = _model([h.make_node("Positions", ["x"], ["y"], domain="local")], [_vi("x", [])], [_vi("y", [None])],
               functions=[fn])
    r, report = _proto_report(m)
    assert [(k.op, k.reason) for k in report.kept] == [
        ("Positions", "no node of its function 'Positions' runs in float16")]
    assert list(r.functions) == list(m.functions)
    _check_same(m, r, {"x": np.array(4.0, np.float32)}, limit=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_converting_again_changes_nothing(dtype):
    m = _matmul_model()
    once = rewriter.convert_precision(m, dtype)
    twice = rewriter.convert_precision(once, dtype)
    assert twice.SerializeToString() == once.SerializeToString()


def test_bfloat16_is_exact_bookkeeping():
    m = _matmul_model()
    r = rewriter.convert_precision(m, "bfloat16")
    assert _elem(r, "W") == T.BFLOAT16
    import ml_dtypes

    w = nh.to_array(next(t for t in r.graph.initializer if t.name == "W")).astype(np.float64)
    src = nh.to_array(m.graph.initializer[0]).astype(np.float64)
    nearest = src.astype(ml_dtypes.bfloat16).astype(np.float64)
    # each value within one bfloat16 step of its source (rounded to nearest, or the other way to
    # keep MatMul's column sums: no worse than rounding to nearest)
    assert np.all(np.abs(w - src) <= 2.0 ** -7 * np.abs(src))
    assert np.all(np.abs((w - src).sum(axis=0)) <= np.abs((nearest - src).sum(axis=0)))
    from onnx.reference import ReferenceEvaluator

    x = RNG.standard_normal((2, 8)).astype(np.float32)
    got = ReferenceEvaluator(r).run(None, {"x": x})[0]
    assert _rel_l2(_run(m, {"x": x})[0], got) <= 2e-2


def test_refusals():
    m = _matmul_model()
    with pytest.raises(RewriterError, match="dtype must be one of float16, bfloat16"):
        rewriter.convert_precision(m, "float8")
    with pytest.raises(RewriterError, match="no node named 'nope'"):
        rewriter.convert_precision(m, "float16", keep_nodes=["nope"])


def test_calibration_keeps_overflowing_nodes_float32():
    from rewriter.precision.calibrate import measure

    k = nh.from_array(np.array(1000.0, np.float32), "k")
    m = _model([h.make_node("Mul", ["x", "k"], ["a"], name="scale"), h.make_node("Mul", ["a", "a"], ["sq"], name="square"),
                h.make_node("ReduceMean", ["sq"], ["mean"], keepdims=0), h.make_node("Sqrt", ["mean"], ["y"])],
               [_vi("x", [16])], [_vi("y", [])], [k])
    x = np.full(16, 0.9, np.float32)
    plain = rewriter.convert_precision(m, "float16")
    from onnx.reference import ReferenceEvaluator  # computes in float16 (ONNX Runtime's CPU may cast back)

    assert not np.isfinite(ReferenceEvaluator(plain).run(None, {"x": x})[0])  # 900^2 overflows float16
    measured = measure(m, None, feeds={"x": x})
    assert set(measured) == {"sq", "mean"}
    # 190^2 = 36100 fits float16 (65504) but not the margin its rounding and sums need (half of it)
    assert set(measure(m, None, feeds={"x": np.full(16, 0.19, np.float32)})) == {"sq", "mean"}
    assert measure(m, None, feeds={"x": np.full(16, 0.17, np.float32)}) == {}  # 170^2 = 28900
    r, report = _proto_report(m, measured=measured)
    assert sorted(k.op for k in report.kept if k.code == "calibration") == [
        "Mul", "ReduceMean", "Sqrt"]
    _check_same(m, r, {"x": x}, limit=1e-3)


def test_calibration_keeps_values_float32_and_stores_the_weights_in_half():
    """A node kept float32 because its values overflow computes from its weights stored in half
    (a Cast each) when they fit float16; a weight that does not fit stays float32."""
    w = nh.from_array(RNG.uniform(0.5, 1.0, (8, 8)).astype(np.float32), "W")
    big = nh.from_array(np.full((8,), 1e5, np.float32), "big")
    m = _model([h.make_node("MatMul", ["x", "W"], ["a"], name="project"),
                h.make_node("Add", ["a", "big"], ["b"], name="shift"),
                h.make_node("Div", ["b", "big"], ["y"], name="back")],
               [_vi("x", [2, 8])], [_vi("y", [2, 8])], [w, big])
    x = np.full((2, 8), 3000.0, np.float32)  # MatMul sums 8 * 3000 * 0.75: ~2e4 each, a's range kept
    r, report = _proto_report(m, measured={"a": 7e4, "b": 1e5})
    kept = {k.label.split("'")[1]: k.reason for k in report.kept}
    assert kept["project"].startswith("calibration") and kept["shift"].startswith("calibration")
    assert _elem(r, "W") == T.FLOAT16 and _elem(r, "big") == T.FLOAT  # 1e5 is beyond float16
    project = next(n for n in r.graph.node if n.name == "project")
    cast = next(n for n in r.graph.node if n.output[0] == project.input[1])
    assert cast.op_type == "Cast" and cast.input[0] == "W"
    _check_same(m, r, {"x": x}, limit=1e-3)


def _overflowing_model():
    k = nh.from_array(np.array(1000.0, np.float32), "k")
    return _model([h.make_node("Mul", ["x", "k"], ["a"], name="scale"),
                   h.make_node("Mul", ["a", "a"], ["sq"], name="square"),
                   h.make_node("ReduceMean", ["sq"], ["mean"], keepdims=0), h.make_node("Sqrt", ["mean"], ["y"])],
                  [_vi("x", [16])], [_vi("y", [])], [k])


def test_cli_calibration_data_takes_the_largest_over_samples(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(_overflowing_model(), src)
    small, big = tmp_path / "small.npz", tmp_path / "big.npz"
    np.savez(small, x=np.full(16, 0.01, np.float32))
    np.savez(big, x=np.full(16, 0.9, np.float32))

    def kept(*samples):
        out = tmp_path / "out.onnx"
        args = [a for npz in samples for a in ("--calibration-data", str(npz))]
        r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out),
                            "--json", *args], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        return sorted(k["op"] for k in doc["changes"]["precision"]["kept"] if k["code"] == "calibration")

    assert kept(small) == []
    assert kept(small, big) == kept(big, small) == ["Mul", "ReduceMean", "Sqrt"]
    medium = tmp_path / "medium.npz"
    np.savez(medium, x=np.full(16, 0.5, np.float32))  # 500^2 = 250000: beyond too, but less
    out = tmp_path / "out.onnx"
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out),
                        "--json", "--calibration-data", str(big), "--calibration-data", str(medium)],
                       capture_output=True, text=True)
    reasons = [k["reason"] for k in json.loads(r.stdout)["changes"]["precision"]["kept"]]
    assert "calibration: 'sq' reached 8.1e+05, beyond float16's range" in reasons  # the largest over samples
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, y=np.zeros(16, np.float32))
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o",
                        str(tmp_path / "o.onnx"), "--calibration-data", str(wrong)], capture_output=True, text=True)
    assert r.returncode != 0 and "no graph input named 'y'" in r.stderr and "no array for 'x'" in r.stderr
    assert not (tmp_path / "o.onnx").exists()
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "bfloat16", "-o",
                        str(tmp_path / "o.onnx"), "--calibration-data", str(big)], capture_output=True, text=True)
    assert r.returncode == 2 and "--calibration-data: bfloat16 has float32's range" in r.stderr


def test_cli_convert_dtype_verify_and_json(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "m16.onnx"
    onnx.save(_matmul_model(), src)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out),
                          "--verify", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["changes"]["precision"]["half_nodes"] == 2
    assert all(o["ok"] and "relative L2" in o["tolerance"] for o in doc["verification"]["numerics"]["outputs"])
    assert onnx.load(out).graph.initializer[0].data_type == T.FLOAT16


def test_cli_refuses_precision_flags_without_dtype(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(_matmul_model(), src)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--opset", "18", "--keep-op-types",
                          "Relu", "-o", str(tmp_path / "o.onnx")], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.strip() == "error: --keep-op-types: only for --dtype, which is not given"
    assert not (tmp_path / "o.onnx").exists()


def test_verify_by_relative_l2_catches_wrong_results():
    from rewriter.verify.numerics import verify_numerics

    m = _model([h.make_node("Relu", ["x"], ["y"])], [_vi("x", [64])], [_vi("y", [64])])
    k = nh.from_array(np.array(1.05, np.float32), "k")
    off = _model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Mul", ["r", "k"], ["y"])],
                 [_vi("x", [64])], [_vi("y", [64])], [k])
    half = rewriter.convert_precision(m, "float16", keep_io_types=False)
    assert verify_numerics(m, half, rel_l2=1e-2).ok  # float16 inputs and outputs compared with float32
    report = verify_numerics(m, off, rel_l2=1e-2)
    assert not report.ok and "relative L2 <= 0.01" in report.outputs[0].tolerance
    assert verify_numerics(m, off, rel_l2=0.1).ok
    inf = nh.from_array(np.array(np.inf, np.float32), "k")
    blown = _model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Add", ["r", "k"], ["y"])],
                   [_vi("x", [64])], [_vi("y", [64])], [inf])
    assert verify_numerics(m, blown, rel_l2=1e-2).outputs[0].reason == "infinities differ"


def test_graph_output_also_read_inside_the_graph():
    # the output's producer runs in half: it is renamed, a Cast makes the output's name, and the
    # other reader takes the half value (nudenet's output0 is read by a Shape too)
    m = _model([h.make_node("Relu", ["x"], ["z"]), h.make_node("Neg", ["z"], ["n"]), h.make_node("Shape", ["z"], ["s"])],
               [_vi("x", [2, 3])], [_vi("z", [2, 3]), _vi("n", [2, 3]), _vi("s", [2], T.INT64)])
    m.graph.value_info.append(_vi("z", [2, 3]))  # exporters list outputs in value_info too
    r = rewriter.convert_precision(m, "float16")
    assert [o.name for o in r.graph.output] == ["z", "n", "s"]
    neg = _nodes(r, "Neg")[0]
    assert _elem_of_value(r, neg.input[0]) == T.FLOAT16
    got = _check_same(m, r, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})
    assert got[2].tolist() == [2, 3]


def test_target_keeps_ops_without_a_half_kernel_float32():
    # ONNX Runtime's CPU provider has no float16 EyeLike: without a target the result does not
    # load there; for the installed release it keeps EyeLike float32 and loads
    m = _model([h.make_node("EyeLike", ["x"], ["e"]), h.make_node("Add", ["e", "x"], ["y"])],
               [_vi("x", [3, 3])], [_vi("y", [3, 3])])
    with pytest.raises(Exception, match="Could not find an implementation for EyeLike"):
        _run(rewriter.convert_precision(m, "float16"), {"x": np.ones((3, 3), np.float32)})
    release = ".".join(ort.__version__.split(".")[:2])
    r, report = _proto_report(m, target=__import__("rewriter.targets", fromlist=["parse_target"]).parse_target(
        f"onnxruntime=={release}"))
    assert any(k.op == "EyeLike" and k.code == "no-kernel" and "no float16 CPU kernel" in k.reason for k in report.kept)
    _check_same(m, r, {"x": RNG.standard_normal((3, 3)).astype(np.float32)}, limit=1e-6)


@pytest.mark.parametrize("how", [["--opset", "18"], ["--target", "onnxruntime==1.17"]])
def test_cli_migrates_and_halves_in_one_run(tmp_path, how):
    w = nh.from_array(RNG.standard_normal((6, 4)).astype(np.float32), "W")
    m = _model([h.make_node("MatMul", ["x", "W"], ["xw"]),
                h.make_node("ReduceSum", ["xw"], ["s"], axes=[1], keepdims=0),  # axes: attribute at 12
                h.make_node("Relu", ["s"], ["y"])],
               [_vi("x", [3, 6])], [_vi("y", [3])], [w], opset=12)
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(m, src)
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), *how, "--dtype", "float16",
                        "-o", str(out), "--verify"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = onnx.load(out)
    opset = next(o.version for o in got.opset_import if o.domain in ("", "ai.onnx"))
    reduce = next(n for n in got.graph.node if n.op_type == "ReduceSum")
    if how[0] == "--opset":
        assert opset == 18 and len(reduce.input) == 2 and not reduce.attribute[0].name == "axes"
    else:  # a release that loads opset 12 keeps it
        assert opset == 12 and got.ir_version <= 9 and "onnxruntime 1.17" in r.stdout
    if how[0] == "--opset":
        assert _elem(got, "W") == T.FLOAT16
    else:  # ONNX Runtime's CPU provider has no float16 MatMul: it computes in float32 for that release,
        # from its weight stored in half (a Cast, which ONNX Runtime folds at load)
        assert _elem(got, "W") == T.FLOAT16 and "no float16 CPU kernel for MatMul-9" in r.stdout
        matmul = next(n for n in got.graph.node if n.op_type == "MatMul")
        cast = next(n for n in got.graph.node if n.output[0] == matmul.input[1])
        assert cast.op_type == "Cast" and cast.input[0] == "W" and cast.attribute[0].i == T.FLOAT
    # the first line says what became of the model: halved, or nothing in half for that release
    head = next(x for x in r.stdout.splitlines() if "written to" in x)
    assert ("float32 -> float16, " if how[0] == "--opset" else "float32 -> float16 weights (no node runs in float16)") \
        in head
    _check_same(m, got, {"x": RNG.standard_normal((3, 6)).astype(np.float32)})


def test_cli_optimize_first_folds_batchnorm_before_halving(tmp_path):
    c = 4
    params = [nh.from_array(RNG.standard_normal((c, 3, 3, 3)).astype(np.float32), "W"),
              nh.from_array(RNG.random(c).astype(np.float32) + 0.5, "gamma"),
              nh.from_array(RNG.standard_normal(c).astype(np.float32), "beta"),
              nh.from_array(RNG.standard_normal(c).astype(np.float32), "mean"),
              nh.from_array(RNG.random(c).astype(np.float32) + 0.5, "var")]
    m = _model([h.make_node("Conv", ["x", "W"], ["c"]),
                h.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"]),
                h.make_node("Relu", ["b"], ["y"])],
               [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, c, 6, 6])], params)
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(m, src)
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "--optimize",
                        "-o", str(out), "--verify"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "optimized first: 3 -> 2 nodes" in r.stdout
    got = onnx.load(out)
    assert [n.op_type for n in got.graph.node if n.op_type != "Cast"] == ["Conv", "Relu"]
    assert all(t.data_type == T.FLOAT16 for t in got.graph.initializer)
    _check_same(m, got, {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)})
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--opset", "18", "--optimize",
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "--optimize: only for --dtype" in r.stderr


def test_an_earlier_model_does_not_change_what_a_later_one_gets():
    """The one-node inference probe's answer is cached: by what it is given (attributes, element
    types, ranks), so a model with clashing dims first does not keep a later model's op float32."""
    from rewriter.precision import plan

    plan._INFERS.clear()  # as in a new process: the clashing model is probed first
    bad = h.make_model(h.make_graph([h.make_node("MatMul", ["x", "W"], ["y"])], "g", [_vi("x", [2, 3])],
                                    [_vi("y", None)], [nh.from_array(np.ones((4, 5), np.float32), "W")]),
                       opset_imports=[h.make_opsetid("", 17)])
    try:
        _proto_report(bad, "bfloat16")
    except RewriterError:
        pass
    r, report = _proto_report(_matmul_model(), "bfloat16")
    assert report.half_by_op.get("MatMul") == 1 and _elem(r, "W") == T.BFLOAT16
    # Gemm's inference needs rank 2: a rank-3 Gemm refused first does not refuse a rank-2 one
    w = nh.from_array(np.ones((4, 5), np.float32), "W")
    rank3 = _model_unchecked([h.make_node("Gemm", ["x", "W"], ["y"])], [_vi("x", [2, 3, 4])], [_vi("y", None)], [w])
    try:
        _proto_report(rank3, "bfloat16")
    except RewriterError:
        pass
    gemm = _model([h.make_node("Gemm", ["x", "W"], ["y"])], [_vi("x", [2, 4])], [_vi("y", [2, 5])], [w])
    r, report = _proto_report(gemm, "bfloat16")
    assert report.half_by_op.get("Gemm") == 1 and _elem(r, "W") == T.BFLOAT16


def _model_unchecked(nodes, inputs, outputs, inits=()):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[h.make_opsetid("", 17)])
