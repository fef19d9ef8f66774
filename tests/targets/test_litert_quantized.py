"""LiteRT 2.6's ``quantized_forms`` (rewriter/targets/data/litert.json, measured 2026-12-06 with
tools/runtime_probe_quant.py litert-2.6): onnx2tf converts QLinearConv / QLinearMatMul but computes
other codes than ONNX Runtime, and its QuantizeLinear (and a Div by a constant) other codes at the
thresholds, so convert --target litert==2.6 keeps those nodes through the conversion
(quant_written.written_out) and writes them as ConvInteger / MatMulInteger + ONNX Runtime's
requantization and x / (s + 0 * Sign(x)); the form's Where(IsNaN(x), qmin, codes) has integer
branches, which hold no NaN, so the untaken-NaN refusal leaves it.  Each result against ONNX
Runtime; in LiteRT where its venv is (skipped when absent)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from rewriter.convert.for_target import convert_for
from rewriter.convert.lowering.quant_written import written_out
from rewriter.targets import parse_target
from rewriter.targets.measured_verdicts import untaken_nan_blockers
from tests.convert.quant_models import ort_run as _ort
from tests.convert.quant_models import qlinear_conv
from tests.convert.quant_models import quant_model as _model
from tests.targets.runtime_runs import run_in

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _qlinear_conv(rng, per_channel):
    return qlinear_conv(rng, per_channel, cin=8, size=10, sy=0.9, w_bound=120)


def _qlinear_matmul(rng):
    inits = [("sa", np.float32(0.5)), ("za", np.uint8(128)), ("b", rng.integers(-3, 4, (16, 32)).astype(np.int8)),
             ("sb", np.float32(1 / 64)), ("zb", np.int8(0)), ("sy", np.float32(1 / 64)), ("zy", np.uint8(128))]
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"], name="qmm")
    model = _model([node], [helper.make_tensor_value_info("a", T.UINT8, [64, 16])],
                   [helper.make_tensor_value_info("y", T.UINT8, [64, 32])], inits)
    return model, {"a": rng.integers(0, 256, (64, 16)).astype(np.uint8)}  # combined scale 0.5: ties


def _quantize(rng, elem):
    """QuantizeLinear per axis at the ties (k + 0.5) * s, saturating both ends, NaN, +-inf, -0."""
    s = rng.uniform(0.01, 0.05, 4).astype(np.float32)
    zp = (rng.integers(0, 256, 4).astype(np.uint8) if elem == T.UINT8 else rng.integers(-128, 128, 4).astype(np.int8))
    k = rng.integers(-400, 400, (1, 4, 500))
    x = ((k + rng.choice([0.0, 0.5], k.shape)) * s.reshape(1, -1, 1)).astype(np.float32)
    x[0, :, :5] = np.float32([np.nan, np.inf, -np.inf, -0.0, 1e-42])
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="quant", axis=1)
    model = _model([node], [helper.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
                   [helper.make_tensor_value_info("y", elem, list(x.shape))], [("s", s), ("z", zp)])
    return model, {"x": x}


CASES = {"qlinearconv_per_tensor": lambda r: _qlinear_conv(r, False),
         "qlinearconv_per_channel": lambda r: _qlinear_conv(r, True),
         "qlinearmatmul_ties": _qlinear_matmul,
         "quantizelinear_uint8": lambda r: _quantize(r, T.UINT8),
         "quantizelinear_int8": lambda r: _quantize(r, T.INT8)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_written_for_litert_as_onnx_runtime_computes(case):
    model, feeds = CASES[case](np.random.default_rng(sorted(CASES).index(case)))
    result, report = convert_for(model, runtime="litert==2.6")
    ops = {n.op_type for n in result.graph.node}
    assert not ops & {"QLinearConv", "QLinearMatMul", "QuantizeLinear"}, ops
    assert ("Sign" in ops) == case.startswith("quantize")  # the divisor fed: x / (s + 0 * Sign(x))
    assert any("quantized node(s) written" in n for n in report.target_notes)
    want = _ort(model, feeds)
    np.testing.assert_array_equal(_ort(result, feeds), want)
    np.testing.assert_array_equal(_ort(result, feeds), _ort(model, feeds, optimized=True))
    got = run_in("litert", "2.6", result, feeds)
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0].reshape(want.shape), want)


@pytest.mark.parametrize("case", ["qlinearconv_per_channel", "qlinearmatmul_ties"])
def test_litert_computes_the_op_otherwise(case):
    """Why the forms: the op as it is, converted by onnx2tf, gives other codes (the probe's QC_op / QMM_op)."""
    model, feeds = CASES[case](np.random.default_rng(sorted(CASES).index(case)))
    got = run_in("litert", "2.6", model, feeds)
    assert not got["ok"] or np.any(got["values"][0].reshape(-1) != _ort(model, feeds).reshape(-1))


def test_only_litert_gets_the_ops_back():
    lite = parse_target("litert==2.6")
    assert lite.lacks("", "QLinearConv", 10) and lite.lacks("", "QLinearMatMul", 10)
    back = written_out(lite)
    assert not back.lacks("", "QLinearConv", 10) and not back.lacks("", "QLinearMatMul", 21)
    assert back.lacks("", "QuantizeLinear", 21) == lite.lacks("", "QuantizeLinear", 21)  # the other ops as they were
    assert {op: vs for op, vs in back.missing[""].items() if op not in ("QLinearConv", "QLinearMatMul")} == \
        {op: vs for op, vs in lite.missing[""].items() if op not in ("QLinearConv", "QLinearMatMul")}
    tract = parse_target("tract==0.23")
    assert written_out(tract) is tract  # (TVM 0.27's "double": test_quant_double)
    for name in ("openvino==2026.4", "openvino==2024.6"):  # DynamicQuantizeLinear only (quant_dynamic.py)
        target = parse_target(name)
        back = written_out(target)
        assert target.lacks("", "DynamicQuantizeLinear", 11) and not back.lacks("", "DynamicQuantizeLinear", 11)
        assert {op: vs for op, vs in back.missing[""].items() if op != "DynamicQuantizeLinear"} == \
            {op: vs for op, vs in target.missing[""].items() if op != "DynamicQuantizeLinear"}


def test_an_op_without_the_form_stays_missing():
    lite = parse_target("litert==2.6")
    table = lite.data_release  # the form's data read through quantized_forms: a release without the entry
    assert table
    other = dataclasses.replace(lite, data_release=None)
    assert written_out(other) is other


def _where(branch_type, qmin):
    """Where(IsNaN(x), qmin (a scalar: the branches broadcast), codes) as the QuantizeLinear form writes it."""
    nodes = [helper.make_node("IsNaN", ["x"], ["n"]), helper.make_node("Cast", ["x"], ["c"], to=branch_type),
             helper.make_node("Where", ["n", "qmin", "c"], ["y"], name="where")]
    return _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("y", branch_type, [2, 3])], [("qmin", qmin)])


def _blockers(model):
    table = parse_target("litert==2.6").form_verdicts
    return untaken_nan_blockers(model, table, "litert 2.6", onnx.shape_inference.infer_shapes(model))


def test_integer_branches_hold_no_nan():
    assert _blockers(_where(T.UINT8, np.uint8(0))) == []
    assert _blockers(_where(T.INT8, np.int8(-128))) == []
    assert _blockers(_where(T.BOOL, np.bool_(False))) == []
    assert [f[0].split("'")[1] for f in _blockers(_where(T.FLOAT, np.float32(0)))] == ["where"]
    mixed = _where(T.UINT8, np.float32(0))  # one float branch (the constant) is enough to hold the NaN
    del mixed.graph.output[:]
    mixed.graph.output.append(helper.make_tensor_value_info("y", T.FLOAT, [2, 3]))
    mixed.graph.node[1].attribute[0].i = T.FLOAT
    assert len(_blockers(mixed)) == 1
    unknown = _where(T.UINT8, np.uint8(0))  # a branch of unknown type: refused as before
    assert len(untaken_nan_blockers(unknown, parse_target("litert==2.6").form_verdicts, "litert 2.6")) == 1


def _qdq_conv(then_relu: bool = False):
    """DequantizeLinear (x, w) -> float Conv -> QuantizeLinear: a QDQ group."""
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["r" if then_relu else "c", "sy", "zy"], ["y"], name="quant")]
    if then_relu:
        nodes.insert(3, helper.make_node("Relu", ["c"], ["r"]))
    inits = [("sx", np.float32(0.02)), ("zx", np.uint8(128)), ("wq", np.full((4, 3, 3, 3), 7, np.int8)),
             ("sw", np.float32(0.01)), ("zw", np.int8(0)), ("sy", np.float32(0.05)), ("zy", np.uint8(128))]
    return _model(nodes, [helper.make_tensor_value_info("xq", T.UINT8, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", T.UINT8, [1, 4, 8, 8])], inits)


def test_a_qdq_group_is_fused_and_one_the_fusion_leaves_is_named(monkeypatch):
    """LiteRT's float sum gives other codes than ONNX Runtime's (nudenet_320n_qdq 0.00833 / 0.00777): the
    group is fused as ONNX Runtime fuses it (test_quant_fusion runs it in LiteRT); a group the fusion
    leaves has its QuantizeLinear named, not written as a division of LiteRT's sum."""
    from rewriter.convert.lowering import quant_explicit
    from rewriter.convert.planner import ConversionBlocked

    result, report = convert_for(_qdq_conv(), runtime="litert==2.6")
    assert any("QDQ groups fused" in n for n in report.target_notes)
    assert not {"Conv", "QuantizeLinear", "DequantizeLinear"} & {n.op_type for n in result.graph.node}
    feeds = {"xq": np.random.default_rng(3).integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)}
    np.testing.assert_array_equal(_ort(result, feeds), _ort(_qdq_conv(), feeds, optimized=True))
    monkeypatch.setattr(quant_explicit, "fuse_like_onnx_runtime", lambda *a: (0, ""))
    with pytest.raises(ConversionBlocked) as e:
        convert_for(_qdq_conv(), runtime="litert==2.6")
    assert [b.name for b in e.value.blockers] == ["quant"]
    assert "QDQ group's float Conv ('conv')" in e.value.blockers[0].reason
    _, report = convert_for(_qdq_conv(), runtime="litert==2.6", plan_only=True)
    assert [b.name for b in report.blockers] == ["quant"]
    result, _ = convert_for(_qdq_conv(then_relu=True), runtime="litert==2.6")  # x is not the sum: written
    assert "Sign" in {n.op_type for n in result.graph.node}
    np.testing.assert_array_equal(_ort(result, feeds), _ort(_qdq_conv(then_relu=True), feeds))


def test_a_qdq_pair_around_an_elementwise_op_is_written():
    """DequantizeLinear -> Relu -> QuantizeLinear: no sum, LiteRT's Relu is exact."""
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]), helper.make_node("Relu", ["xf"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["y"], name="quant")]
    model = _model(nodes, [helper.make_tensor_value_info("xq", T.UINT8, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", T.UINT8, [1, 3, 8, 8])],
                   [("sx", np.float32(0.02)), ("zx", np.uint8(128)), ("sy", np.float32(0.03)), ("zy", np.uint8(3))])
    result, _ = convert_for(model, runtime="litert==2.6")
    feeds = {"xq": np.arange(192, dtype=np.uint8).reshape(1, 3, 8, 8)}
    np.testing.assert_array_equal(_ort(result, feeds), _ort(model, feeds))


def test_a_float_conv_of_float_values_is_written():
    """A Conv of values no DequantizeLinear wrote (float model, quantized output) is no QDQ group."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Conv", ["r", "w"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["y"], name="quant")]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", T.UINT8, [1, 4, 6, 6])],
                   [("w", np.full((4, 3, 3, 3), 0.01, np.float32)), ("sy", np.float32(0.05)), ("zy", np.uint8(128))])
    result, _ = convert_for(model, runtime="litert==2.6")
    assert "Sign" in {n.op_type for n in result.graph.node}


def _quantized_grid(start=np.float32(0.0), fed_limit=False):
    """QuantizeLinear of Range(start, Cast(a dim), 1): a detection head's anchor grid (nudenet_320n_qdq);
    ``fed_limit``: the limit a Cast of a fed float instead."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["d"], axis=0),
             helper.make_node("Cast", ["d"], ["limit"], to=T.FLOAT),
             helper.make_node("Cast", ["lf" if fed_limit else "d"], ["limit_f"], to=T.FLOAT),  # a float cast: may be NaN
             helper.make_node("Range", ["start", "limit_f" if fed_limit else "limit", "delta"], ["g"], name="grid"),
             helper.make_node("QuantizeLinear", ["g", "s_q", "z_q"], ["y"], name="quant")]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, ["n"])]
    if fed_limit:
        inputs.append(helper.make_tensor_value_info("lf", T.FLOAT, []))
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", T.UINT8, ["m"])],
                  [("zero", np.int64(0)), ("start", start), ("delta", np.float32(1.0)),
                   ("s_q", np.float32(0.25)), ("z_q", np.uint8(3))])


def test_a_quantized_range_of_a_dim_holds_no_nan_and_gets_no_where(monkeypatch):
    """A Range of finite constants and integers cast to float holds no NaN: the form writes no IsNaN /
    Where; LiteRT refused that Where at prepare when onnx2tf did not know the Range's length (SELECT:
    "has_low_rank_input_condition"; nudenet_320n_qdq without --input-shape) and runs the form without it."""
    from rewriter.convert.lowering import quant_explicit

    feeds = {"x": np.zeros(40, np.float32)}
    model = _quantized_grid()
    result, _ = convert_for(model, runtime="litert==2.6")
    ops = [n.op_type for n in result.graph.node]
    assert "IsNaN" not in ops and "Where" not in ops and "Div" in ops, ops
    np.testing.assert_array_equal(_ort(result, feeds), _ort(model, feeds))
    got = run_in("litert", "2.6", result, feeds)
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0].reshape(-1), _ort(model, feeds).reshape(-1))
    for other in (_quantized_grid(start=np.float32(np.nan)), _quantized_grid(fed_limit=True)):  # NaN possible: kept
        assert "Where" in {n.op_type for n in convert_for(other, runtime="litert==2.6")[0].graph.node}
    monkeypatch.setattr(quant_explicit, "nan_free", lambda *a: False)  # the form as it was: refused by LiteRT
    with_where, _ = convert_for(model, runtime="litert==2.6")
    assert "Where" in {n.op_type for n in with_where.graph.node}
    assert not run_in("litert", "2.6", with_where, feeds)["ok"]
