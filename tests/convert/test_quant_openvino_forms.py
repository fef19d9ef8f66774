"""What OpenVINO's ``quantized_forms`` needed beyond the threshold table for the QOperator models of
the corpus (2026-12-06): a QuantizeLinear of constant weights folded to ONNX Runtime's codes (ppocr's
QOperator models quantize Constant weights in the graph), a weight zero point that does not fold into
8 bits passed as ConvInteger's / MatMulInteger's input (ppocr's uint8 weights, zero point 122),
QLinearAdd read from a table of ONNX Runtime's 65,536 codes (OpenVINO computes the double
fused multiply-add emulation in float32: nudenet's QOperator models), and the refusal of a
QuantizeLinear of a QDQ group's float Conv / MatMul (OpenVINO's sum differs from both of ONNX
Runtime's results). Each against ONNX Runtime; in OpenVINO where its venvs are."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from rewriter.convert.lower_ops import lower_ops
from rewriter.convert.lowering.contrib_quant import add_table
from rewriter.convert.lowering.quant_explicit import rewrite_quantized
from rewriter.convert.lowering.quant_table import REDUCTIONS, quantized_constant
from tests.convert.quant_models import ort_run as _run
from tests.convert.quant_models import quant_model as _model
from tests.convert.support.contrib_oracle import com_model, every_byte, qparams

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
RELEASES = ["2026.4", "2024.6"]
TABLE = {"QuantizeLinear": "threshold_table", "QLinearConv": "integer", "QLinearMatMul": "integer"}


def _rewritten(model, forms=TABLE):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    count, blockers = rewrite_quantized(copy, forms, "R 1.0")
    assert not blockers and count >= 1, blockers
    onnx.checker.check_model(copy, full_check=True)
    return copy


def _weights_quantized_in_graph(rng, per_channel: bool):
    """QuantizeLinear(Constant float weights) -> QLinearConv, as ppocr's QOperator models have it;
    weights at ties (k + 0.5) * s and saturating both ends."""
    s = (rng.uniform(0.002, 0.01, 4) if per_channel else rng.uniform(0.002, 0.01, 1)).astype(np.float32)
    k = rng.integers(-140, 140, (4, 3, 3, 3))
    wf = ((k + rng.choice([0.0, 0.5], k.shape)) * s.reshape(-1, 1, 1, 1)).astype(np.float32)
    zw = np.zeros(s.size, np.int8)
    const = helper.make_node("Constant", [], ["wf"], value=numpy_helper.from_array(wf, "wf"))
    quant = helper.make_node("QuantizeLinear", ["wf", "sw", "zw"], ["wq"], axis=0, name="wq_quant")
    conv = helper.make_node("QLinearConv", ["x", "sx", "zx", "wq", "sw", "zw", "sy", "zy"], ["y"], pads=[1, 1, 1, 1])
    inits = [("sx", np.float32(0.02)), ("zx", np.uint8(120)), ("sw", s if per_channel else s[0]),
             ("zw", zw if per_channel else zw[0]), ("sy", np.float32(0.05)), ("zy", np.uint8(128))]
    model = _model([const, quant, conv], [helper.make_tensor_value_info("x", T.UINT8, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", T.UINT8, [1, 4, 8, 8])], inits)
    return model, {"x": rng.integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)}, (wf, s, zw)


@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_of_constant_weights_folded_to_onnx_runtime_codes(per_channel):
    model, feeds, (wf, s, zw) = _weights_quantized_in_graph(np.random.default_rng(7 + per_channel), per_channel)
    got = _rewritten(model)
    assert {n.op_type for n in got.graph.node} == {"ConvInteger", "Cast", "Mul", "Clip", "Round", "Add"}  # no table
    np.testing.assert_array_equal(_run(got, feeds), _run(model, feeds))
    shape = (-1, 1, 1, 1) if per_channel else ()
    codes = quantized_constant(wf, s, zw.astype(np.int64), T.INT8, shape)
    want = _run(_model([helper.make_node("QuantizeLinear", ["w", "s", "z"], ["q"], axis=0)], [], [
        helper.make_tensor_value_info("q", T.INT8, list(wf.shape))], [("w", wf), ("s", s if per_channel else s[0]),
                                                                     ("z", zw if per_channel else zw[0])]), {})
    np.testing.assert_array_equal(codes, want)  # the ties rounded to even, both ends saturated
    assert codes.dtype == np.int8 and codes.min() == -128 and codes.max() == 127


def _unfoldable_weights(rng, op: str):
    """uint8 weights over 0..255 with zero point 122: w - zp needs 9 bits (ppocr_mobile_cls_qop)."""
    if op == "QLinearConv":
        w = rng.integers(0, 256, (5, 3, 3, 3)).astype(np.uint8)
        x = rng.integers(0, 256, (1, 3, 7, 7)).astype(np.uint8)
        out = [1, 5, 5, 5]
    else:
        w = rng.integers(0, 256, (24, 6)).astype(np.uint8)
        x = rng.integers(0, 256, (2, 3, 24)).astype(np.uint8)
        out = [2, 3, 6]
    w[0, 0], w[-1, -1] = 0, 255
    inits = [("sx", np.float32(0.03)), ("zx", np.uint8(110)), ("w", w), ("sw", np.float32(0.004)),
             ("zw", np.uint8(122)), ("sy", np.float32(0.02)), ("zy", np.uint8(100))]
    node = helper.make_node(op, ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("x", T.UINT8, list(x.shape))],
                   [helper.make_tensor_value_info("y", T.UINT8, out)], inits)
    return model, {"x": x}


@pytest.mark.parametrize("op,integer_op", [("QLinearConv", "ConvInteger"), ("QLinearMatMul", "MatMulInteger")])
def test_weight_zero_point_that_does_not_fold_is_the_ops_input(op, integer_op):
    model, feeds = _unfoldable_weights(np.random.default_rng(3), op)
    got = _rewritten(model)
    (node,) = [n for n in got.graph.node if n.op_type == integer_op]
    inits = {t.name: numpy_helper.to_array(t) for t in got.graph.initializer}
    assert len(node.input) == 4 and inits[node.input[3]] == np.uint8(122) and inits[node.input[1]].max() == 255
    want = _run(model, feeds)
    np.testing.assert_array_equal(_run(got, feeds), want)
    assert want.min() == 0 and want.max() == 255  # saturating both ends


def test_per_channel_zero_points_that_do_not_fold_are_refused():
    model, _ = _unfoldable_weights(np.random.default_rng(3), "QLinearConv")
    init = {t.name: t for t in model.graph.initializer}
    init["zw"].CopyFrom(numpy_helper.from_array(np.uint8([122, 0, 1, 2, 3]), "zw"))
    init["sw"].CopyFrom(numpy_helper.from_array(np.float32([0.004] * 5), "sw"))
    count, blockers = rewrite_quantized(model, TABLE, "R 1.0")
    assert count == 0 and len(blockers) == 1 and "does not fit 8 bits" in blockers[0][3]


_SHAPES = {"Conv": ([1, 2, 4, 4], [3, 2, 1, 1], [1, 3, 4, 4]), "MatMul": ([4, 4], [4, 3], [4, 3]),
           "Add": ([1, 2, 4, 4], [1, 2, 4, 4], [1, 2, 4, 4])}


def _qdq(op: str, between_dq: bool = True):
    """DequantizeLinear(x), DequantizeLinear(w) -> op -> QuantizeLinear (a QDQ group); with
    ``between_dq`` False its inputs are a float graph input and float weights instead."""
    xs, ws, out = _SHAPES[op]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], name="dq_w"),
             helper.make_node(op, ["xf", "wf"] if between_dq else ["f", "wc"], ["v"], name="the_op"),
             helper.make_node("QuantizeLinear", ["v", "s", "z"], ["y"], name="q_out")]
    inputs = [helper.make_tensor_value_info("x", T.UINT8, xs)]
    if not between_dq:
        inputs.append(helper.make_tensor_value_info("f", T.FLOAT, xs))
    w = np.arange(int(np.prod(ws))).reshape(ws).astype(np.uint8) * 7
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", T.UINT8, out)],
                  [("w", w), ("s", np.float32(0.1)), ("z", np.uint8(128)), ("wc", w.astype(np.float32))])


@pytest.mark.parametrize("op", ["Conv", "MatMul"])
def test_quantize_of_a_qdq_float_reduction_is_refused_by_name(op):
    count, blockers = rewrite_quantized(_qdq(op), {"QuantizeLinear": "threshold_table"}, "R 1.0")
    assert count == 0 and [b[2] for b in blockers] == ["q_out"]
    assert f"float {op} ('the_op') of DequantizeLinear outputs" in blockers[0][3] and REDUCTIONS[op] in blockers[0][3]
    got = _rewritten(_qdq(op, between_dq=False), {"QuantizeLinear": "threshold_table"})  # a float input: written
    assert "QuantizeLinear" not in {n.op_type for n in got.graph.node}


def test_quantize_of_other_float_ops_of_dequantized_codes_is_written():
    """An elementwise op of dequantized codes is not refused (the QOperator models' float ops: OpenVINO
    computes them as ONNX Runtime does there)."""
    model = _qdq("Add")
    got = _rewritten(model, {"QuantizeLinear": "threshold_table"})
    feeds = {"x": (np.arange(32) * 8).reshape(1, 2, 4, 4).astype(np.uint8)}
    np.testing.assert_array_equal(_run(got, feeds), _run(model, feeds))


def _add_every_pair(elem, rng, params=None):
    a = np.repeat(every_byte(elem), 256).reshape(256, 256)
    b = np.tile(every_byte(elem), 256).reshape(256, 256)
    sa, sb, sc = (np.float32(np.exp(rng.uniform(-6, 1))) for _ in range(3))
    z = [int(v) for v in rng.integers(0, 100, 3)]
    if params:
        (sa, z[0]), (sb, z[1]), (sc, z[2]) = params
    inits = qparams("a", sa, z[0], elem) + qparams("b", sb, z[1], elem) + qparams("c", sc, z[2], elem)
    model = com_model("QLinearAdd", [("A", elem, [256, 256]), "a_s", "a_z", ("B", elem, [256, 256]), "b_s", "b_z",
                                     "c_s", "c_z"], [("C", elem, [256, 256])], initializers=inits)
    return model, {"A": a, "B": b}, (sa, z[0], sb, z[1], sc, z[2])


@pytest.mark.parametrize("elem", [T.UINT8, T.INT8])
def test_qlinear_add_table_is_onnx_runtimes_every_pair(elem):
    model, feeds, (sa, za, sb, zb, sc, zc) = _add_every_pair(elem, np.random.default_rng(elem))
    want = _run(model, feeds, optimized=True)
    table = add_table(elem, (np.float32(sa / sc), za), (np.float32(sb / sc), zb), zc, False)
    order = np.argsort(every_byte(elem))  # table rows and columns: codes from the minimum up
    np.testing.assert_array_equal(table.reshape(256, 256), want[np.ix_(order, order)])


@pytest.mark.parametrize("params", [((1.8126534, 51), (0.031929377, 162), (1.0, 27)),
                                    ((1.184298, 162), (0.0884733, 88), (1.0, 146))])
def test_qlinear_add_fixed_part_rounded_once(params):
    """Scales where F = zC - fma(rA, zA, rB * zB) rounded twice (no fused multiply-add) moves a code."""
    params = [(np.float32(s), z) for s, z in params]
    model, feeds, _ = _add_every_pair(T.UINT8, np.random.default_rng(0), params)
    (ra, za), (rb, zb), (_, zc) = params
    table = add_table(T.UINT8, (ra, za), (rb, zb), zc, False)
    np.testing.assert_array_equal(table.reshape(256, 256), _run(model, feeds, optimized=True))


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("elem", [T.UINT8, T.INT8])
def test_qlinear_add_lowered_in_openvino(release, elem):
    """Every pair of codes (nudenet_320n_qop's first differing code was a lowered QLinearAdd's)."""
    from tests.targets.runtime_runs import run_in

    model, feeds, _ = _add_every_pair(elem, np.random.default_rng(10 + elem))
    lowered, _ = lower_ops(model, {("com.microsoft", "QLinearAdd")})
    result = run_in("openvino", release, lowered, feeds)
    assert result.get("ok"), result
    np.testing.assert_array_equal(np.asarray(result["values"][0]).reshape(256, 256), _run(model, feeds))


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", ["folded_weights", "QLinearConv", "QLinearMatMul"])
def test_forms_in_openvino(release, case):
    from tests.targets.runtime_runs import run_in

    rng = np.random.default_rng(21)
    model, feeds = (_weights_quantized_in_graph(rng, True)[:2] if case == "folded_weights"
                    else _unfoldable_weights(rng, case))
    want = _run(model, feeds)
    result = run_in("openvino", release, _rewritten(model), feeds)
    assert result.get("ok"), result
    np.testing.assert_array_equal(np.asarray(result["values"][0]).reshape(want.shape), want)


def _softmax(d: int, dynamic: bool = True):
    """QLinearSoftmax over a last axis of length ``d`` (unknown to the lowering when ``dynamic``)."""
    from tests.convert.support.contrib_oracle import random_q

    inits = qparams("x", np.float32(0.0625), 0, T.UINT8) + qparams("y", np.float32(1 / 256), 0, T.UINT8)
    dims = ["n", "d"] if dynamic else [64, d]
    model = com_model("QLinearSoftmax", [("X", T.UINT8, dims), "x_s", "x_z", "y_s", "y_z"], [("Y", T.UINT8, dims)],
                      initializers=inits, axis=-1, opset=13)
    return model, {"X": random_q(np.random.default_rng(d), T.UINT8, (64, d))}


@pytest.mark.parametrize("d", [1, 16, 256, 257])
def test_softmax_of_a_run_time_length_reads_the_built_tables(d):
    """D up to 256 reads the table built here for it, beyond that the double computation: ONNX Runtime's
    codes both ways."""
    from tests.convert.support.lowering_oracle import check_lowering

    model, feeds = _softmax(d)
    check_lowering(model, feeds)
    lowered, _ = lower_ops(model, {("com.microsoft", "QLinearSoftmax")})
    tables = [numpy_helper.to_array(t) for t in lowered.graph.initializer if t.name.endswith("tables")]
    assert len(tables) == 1 and tables[0].size == 256 * 256


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("d", [16, 256])
def test_softmax_of_a_run_time_length_in_openvino(release, d):
    """OpenVINO computes the double table in float32 (nudenet_320n_qop_pc's D = 16: 252 of 256 entries,
    6 of 134,400 codes off); the built tables are read exactly (the table the graph reads is exposed)."""
    from rewriter.convert.lowering.contrib_quant_pool import softmax_table
    from tests.targets.runtime_runs import run_in

    model, feeds = _softmax(d)
    lowered, _ = lower_ops(model, {("com.microsoft", "QLinearSoftmax")})
    (table,) = [n.output[0] for n in lowered.graph.node if n.op_type == "Where"]
    lowered.graph.output.append(helper.make_tensor_value_info(table, T.FLOAT, [256]))
    result = run_in("openvino", release, lowered, feeds)
    assert result.get("ok"), result
    np.testing.assert_array_equal(np.asarray(result["values"][0]), _run(model, feeds, optimized=True))
    np.testing.assert_array_equal(np.asarray(result["values"][1]), softmax_table(np.float32(0.0625), d))


def test_softmax_tables_pass_the_shape_check_with_data_propagation():
    """The shape check strips initializers over 1 KiB and propagates data when a ReduceProd is there: the
    tables' rows are read through Range, not through a constant index it would see empty (piper_tashkeel
    was refused so)."""
    from rewriter.verify.shapes import verify_shapes

    model, _ = _softmax(16)
    model.graph.node.append(helper.make_node("ReduceProd", ["x_s"], ["p"], keepdims=0))
    model.graph.output.append(helper.make_tensor_value_info("p", T.FLOAT, []))
    lowered, _ = lower_ops(model, {("com.microsoft", "QLinearSoftmax")})
    assert verify_shapes(lowered) == []
