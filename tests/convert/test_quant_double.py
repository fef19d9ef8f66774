"""QLinearConv / ConvInteger as a Conv in double (rewriter/convert/lowering/quant_double.py, form
"double" of TVM 0.27's quantized_forms: TVM has neither op). Oracle: ONNX Runtime running the op
itself; ONNX Runtime has no double Conv kernel, so the written form runs in onnx's reference
evaluator (numpy, double sums) and, where its venv is (skipped when absent), in TVM 0.27. Cases
where a float32 sum is not exact (K = 2304, sums past 2^24), per-channel weight zero points, a
run-time x_zero_point, depthwise uint8 weights, and the refusals naming the node."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from rewriter import cli
from rewriter.convert.for_target import convert_for
from rewriter.convert.lowering.quant_double import double_convs
from rewriter.convert.lowering.quant_explicit import rewrite_quantized
from rewriter.targets import parse_target
from tests.convert.quant_models import ort_run as _ort
from tests.convert.quant_models import qlinear_conv
from tests.convert.quant_models import quant_model as _model
from tests.convert.support.exact_int8 import ort_model
from tests.targets.runtime_runs import run_in

ort.set_default_logger_severity(4)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference evaluator's Cast of NaN


def _conv_integer(rng, case):
    """ConvInteger: 'big' (K = 2304, int8 w, zero point 5, x_zero_point fed at run time), 'u8'
    (uint8 w, zero point 3, constant x_zero_point), 'dw' (depthwise, strides, zero point 251).
    (ONNX Runtime's ConvInteger takes one weight zero point: per channel is QLinearConv's test.)"""
    cin, cout, group, attrs = {"big": (256, 8, 1, {}), "u8": (6, 5, 1, {}), "dw": (6, 6, 6, {"strides": [2, 2]})}[case]
    signed = case == "big"
    w = rng.integers(40, 128, (cout, cin // group, 3, 3)).astype(np.int8) if signed else \
        rng.integers(0, 256, (cout, cin // group, 3, 3)).astype(np.uint8)
    zw = np.int8(5) if signed else np.uint8(3) if case == "u8" else np.uint8(251)
    inputs = [helper.make_tensor_value_info("x", T.UINT8, [1, cin, 9, 9])]
    inits = [("w", w), ("zw", zw)]
    if case == "big":
        inputs.append(helper.make_tensor_value_info("zx", T.UINT8, []))
    else:
        inits.append(("zx", np.uint8(131)))
    node = helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], name="convint", pads=[1, 1, 1, 1],
                            group=group, **attrs)
    out = helper.make_tensor_value_info("y", T.INT32, [1, cout, 5, 5] if case == "dw" else [1, cout, 9, 9])
    feeds = {"x": rng.integers(200 if signed else 0, 256, (1, cin, 9, 9)).astype(np.uint8)}  # big: sums past 2^24
    if case == "big":
        feeds["zx"] = np.array(77, np.uint8)
    return _model([node], inputs, [out], inits), feeds


def _qlinear_conv(rng, per_channel):
    return qlinear_conv(rng, per_channel, cin=256, size=7, sy=0.3, w_bound=127)


def _written(model, forms):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    count, blockers = rewrite_quantized(copy, forms, "R 1.0")
    assert not blockers and count == 1
    onnx.checker.check_model(copy)
    assert {n.op_type for n in copy.graph.node} >= {"Conv", "Cast"} and not set(forms) & {n.op_type for n in copy.graph.node}
    return copy


@pytest.mark.parametrize("case", ["big", "u8", "dw"])
def test_conv_integer_in_double_is_onnx_runtimes_int32_sum(case):
    model, feeds = _conv_integer(np.random.default_rng(len(case)), case)
    want = _ort(model, feeds)
    result = _written(model, {"ConvInteger": "double"})
    got = ReferenceEvaluator(result).run(None, feeds)[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    if case == "big":  # sums a float32 accumulator would not hold exactly
        assert np.abs(want).max() > 2**24
        assert any(n.op_type == "Sub" for n in result.graph.node)  # the fed x_zero_point


@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_in_double_is_onnx_runtimes_codes(per_channel):
    model, feeds = _qlinear_conv(np.random.default_rng(3), per_channel)
    want = _ort(model, feeds)
    assert 20 < len(np.unique(want))  # not saturated: the requantization is exercised
    result = _written(model, {"QLinearConv": "double"})
    assert not any(n.op_type == "ConvInteger" for n in result.graph.node)
    np.testing.assert_array_equal(ReferenceEvaluator(result).run(None, feeds)[0], want)


def test_refusals_name_the_node():
    rng = np.random.default_rng(0)
    model, _ = _conv_integer(rng, "u8")
    fed = _model(list(model.graph.node), [*model.graph.input, helper.make_tensor_value_info("w", T.UINT8, [5, 6, 3, 3])],
                 list(model.graph.output), [("zw", np.uint8(3)), ("zx", np.uint8(131))])
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    del wide.graph.initializer[:]  # K * 255 * 128 >= 2^31: ONNX Runtime's int32 sum could wrap
    wide.graph.initializer.extend([numpy_helper.from_array(np.full((1, 66000, 1, 1), -128, np.int8), "w"),
                                   numpy_helper.from_array(np.int8(0), "zw"), numpy_helper.from_array(np.uint8(1), "zx")])
    for m, form, why in [(fed, "double", "fed at run time"), (wide, "double", "could wrap"), (model, "integer", "double only")]:
        count, blockers = rewrite_quantized(m, {"ConvInteger": form}, "R 1.0")
        assert count == 0 and len(blockers) == 1, blockers
        label, op, _, reason = blockers[0]
        assert "convint" in label and op == "ConvInteger" and why in reason, reason
        assert [n.op_type for n in m.graph.node] == ["ConvInteger"]
    edge = onnx.ModelProto()
    edge.CopyFrom(wide)
    edge.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.full((1, 65700, 1, 1), -128, np.int8), "w"))
    assert rewrite_quantized(edge, {"ConvInteger": "double"}, "R 1.0")[0] == 1  # 65700 * 255 * 128 < 2^31


def _tvm_model(rng):
    """QuantizeLinear -> QLinearConv (per channel) -> QLinearMatMul -> DequantizeLinear, and a
    ConvInteger output beside: every form TVM 0.27's data asks for."""
    conv, _ = _qlinear_conv(rng, True)
    ci, _ = _conv_integer(rng, "dw")
    mm = [("sb", np.float32(0.004)), ("zb", np.int8(0)), ("b2", rng.integers(-127, 128, (7, 6)).astype(np.int8)),
          ("sm", np.float32(0.7)), ("zm", np.uint8(128)), ("sq", np.float32(0.02)), ("zq", np.uint8(118))]
    nodes = [helper.make_node("QuantizeLinear", ["f", "sq", "zq"], ["x"], name="quant"), *conv.graph.node,
             helper.make_node("QLinearMatMul", ["y", "sy", "zy", "b2", "sb", "zb", "sm", "zm"], ["m"], name="qmm"),
             helper.make_node("DequantizeLinear", ["m", "sm", "zm"], ["out"], name="dq"),
             helper.make_node("ConvInteger", ["xi", "w_ci", "zx_ci", "zw_ci"], ["acc"], name="convint", group=6,
                              pads=[1, 1, 1, 1], strides=[2, 2])]
    inits = [(t.name, numpy_helper.to_array(t)) for t in conv.graph.initializer] + mm + \
        [(f"{t.name}_ci", numpy_helper.to_array(t)) for t in ci.graph.initializer]
    inputs = [helper.make_tensor_value_info("f", T.FLOAT, [1, 256, 7, 7]), helper.make_tensor_value_info("xi", T.UINT8, [1, 6, 9, 9])]
    outputs = [helper.make_tensor_value_info("out", T.FLOAT, [1, 16, 7, 6]), helper.make_tensor_value_info("acc", T.INT32, [1, 6, 5, 5])]
    x = rng.normal(0, 1.5, (1, 256, 7, 7)).astype(np.float32)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    return _model(nodes, inputs, outputs, inits, opset=19), {"f": x, "xi": rng.integers(0, 256, (1, 6, 9, 9)).astype(np.uint8)}


def test_convert_for_tvm_writes_every_form():
    model, feeds = _tvm_model(np.random.default_rng(7))
    result, report = convert_for(model, runtime="tvm==0.27")
    ops = {n.op_type for n in result.graph.node}
    assert not ops & {"QuantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger"}, ops
    assert {"MatMulInteger", "Conv", "Div", "IsNaN"} <= ops
    assert any("4 quantized node(s) written" in n for n in report.target_notes), report.target_notes
    assert "2 integer convolution(s) written as a Conv in double for tvm 0.27" in double_convs(result, "tvm 0.27")
    assert double_convs(model, "tvm 0.27") is None
    from rewriter.targets.folded_inputs import constants_folded  # (a target's fold, TVM's TopK k_folded, folds the Casts)

    folded = onnx.ModelProto()
    folded.CopyFrom(result)
    constants_folded("Conv")(folded, "tvm 0.27")
    weights = {c.input[1] for c in folded.graph.node if c.op_type == "Conv"}
    assert weights <= {t.name for t in folded.graph.initializer if t.data_type == onnx.TensorProto.DOUBLE}
    assert "2 integer convolution(s) written as a Conv in double" in double_convs(folded, "tvm 0.27")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(ort_model(model).SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ReferenceEvaluator(result).run(None, feeds)
    for i in range(2):
        np.testing.assert_array_equal(got[i], want[i])
    np.testing.assert_array_equal(got[0], _ort(model, feeds, optimized=True))
    ran = run_in("tvm", "0.27", result, feeds)
    assert ran["ok"], ran
    for i in range(2):
        np.testing.assert_array_equal(ran["values"][i].reshape(got[i].shape), got[i])


def test_other_targets_keep_their_forms():
    model, _ = _qlinear_conv(np.random.default_rng(7), False)
    assert parse_target("tvm==0.27").lacks("", "ConvInteger", 10)
    for name in ("tract==0.23", "openvino==2026.4"):
        result, _ = convert_for(model, runtime=name)
        ops = [n.op_type for n in result.graph.node]
        assert "ConvInteger" in ops and "Conv" not in ops  # their "integer" form, no double Conv
        assert double_convs(result, name) is None


def test_cli_writes_the_double_form_with_a_warning(tmp_path, capsys):
    """ONNX Runtime cannot load the double Conv (no kernel): for the TVM target that is said, not a defect."""
    model, _ = _qlinear_conv(np.random.default_rng(1), False)
    path, out = str(tmp_path / "in.onnx"), tmp_path / "out.onnx"
    onnx.save(model, path)
    rc = cli.main(["convert", path, "--target", "tvm==0.27", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0 and out.exists(), err
    assert "NOT_IMPLEMENTED" in err and "1 integer convolution(s) written as a Conv in double" in err, err


def test_tvm_gets_the_ops_it_lacks_back_for_their_forms():
    from rewriter.convert.lowering.quant_written import written_out

    tvm = parse_target("tvm==0.27")
    back = written_out(tvm)
    for op, version in (("QLinearConv", 10), ("ConvInteger", 10), ("QLinearMatMul", 21)):
        assert tvm.lacks("", op, version) and not back.lacks("", op, version)
    assert {op: vs for op, vs in back.missing[""].items()} == \
        {op: vs for op, vs in tvm.missing[""].items() if op not in ("QLinearConv", "ConvInteger", "QLinearMatMul")}


def test_final_gate_passes_only_the_double_conv(capsys):
    """ONNX Runtime's NOT_IMPLEMENTED for a result is a defect (VerificationFailed) unless convert
    said the result holds the double form's Conv (args.run.double_convs)."""
    import types

    from rewriter.cli.run_state import RunState
    from rewriter.cli.runner import VerificationFailed, final_gate

    def conv(elem):
        return _model([helper.make_node("Conv", ["x", "w"], ["y"])], [helper.make_tensor_value_info("x", elem, [1, 1, 3, 3])],
                      [helper.make_tensor_value_info("y", elem, [1, 1, 3, 3])],
                      [("w", np.ones((1, 1, 1, 1), helper.tensor_dtype_to_np_dtype(elem)))])

    original, result = conv(T.FLOAT), conv(T.DOUBLE)
    for said in (None, "1 integer convolution(s) written as a Conv in double for tvm 0.27"):
        args = types.SimpleNamespace(run=RunState(input_model=original, result_checked=True, result_strict_ok=True,
                                                  double_convs=said), quiet=False)
        if said is None:
            with pytest.raises(VerificationFailed, match="NOT_IMPLEMENTED"):
                final_gate(args, original, result)
        else:
            final_gate(args, original, result)
            assert said in capsys.readouterr().err


def _dynamic(rng, cin, zw_from_dql=True):
    """PaddleOCR's quantize_dynamic: x and the Constant float weights both through DynamicQuantizeLinear."""
    wf = rng.normal(0, 0.2, (4, cin, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["wf"], value=numpy_helper.from_array(wf)),
             helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("DynamicQuantizeLinear", ["wf"], ["wq", "ws", "wz"]),
             helper.make_node("ConvInteger", ["xq", "wq", "xz", "wz" if zw_from_dql else "wz2"], ["y"], name="convint",
                              pads=[1, 1, 1, 1])]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [1, cin, 6, 6])]
    if not zw_from_dql:  # a zero point fed at run time by another: its shape is not known here
        inputs.append(helper.make_tensor_value_info("wz2", T.UINT8, None))
    model = _model(nodes, inputs, [helper.make_tensor_value_info("y", T.INT32, [1, 4, 6, 6])], [])
    return model, {"x": rng.normal(0.3, 1, (1, cin, 6, 6)).astype(np.float32)}


def test_weight_quantized_at_run_time():
    model, feeds = _dynamic(np.random.default_rng(5), 96)
    result = _written(model, {"ConvInteger": "double"})
    np.testing.assert_array_equal(ReferenceEvaluator(result).run(None, feeds)[0], _ort(model, feeds))
    assert sum(n.op_type == "Sub" for n in result.graph.node) == 2  # both zero points, fed
    ran = run_in("tvm", "0.27", result, feeds)
    assert ran["ok"], ran
    np.testing.assert_array_equal(ran["values"][0].reshape(4, -1), _ort(model, feeds).reshape(4, -1))


@pytest.mark.parametrize("cin, zw_from_dql, why", [(3678, True, "could wrap"), (3600, False, "not DynamicQuantizeLinear's")])
def test_weight_quantized_at_run_time_refusals(cin, zw_from_dql, why):
    """K = 3678 * 9 = 33102: K * 255 * 255 >= 2^31 (3600 * 9 = 32400 would not wrap)."""
    model, _ = _dynamic(np.random.default_rng(5), cin, zw_from_dql)
    count, blockers = rewrite_quantized(model, {"ConvInteger": "double"}, "R 1.0")
    assert count == 0 and len(blockers) == 1 and why in blockers[0][3], blockers
    if zw_from_dql:
        edge, _ = _dynamic(np.random.default_rng(5), 3670)  # 33030: still wraps; 3669 * 9 = 33021 does not
        assert rewrite_quantized(edge, {"ConvInteger": "double"}, "R 1.0")[0] == 0
        edge, _ = _dynamic(np.random.default_rng(5), 3669)
        assert rewrite_quantized(edge, {"ConvInteger": "double"}, "R 1.0")[0] == 1


def test_qdq_groups_fused_for_tvm_as_onnx_runtime_fuses_them():
    """TVM 0.27's data asks for ONNX Runtime's QDQ fusion (ppocr_v4_det_qdq: 1.74 as written, 0.0
    fused): DQ(x), DQ(w) -> Conv -> Q -> DQ becomes QLinearConv, written in double; the result
    is ONNX Runtime's default (fused) result, in the reference evaluator and in TVM."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], name="dq_w"),
             helper.make_node("Conv", ["xf", "wf"], ["v"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["v", "sy", "z"], ["yq"], name="q_conv"),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"], name="dq_y")]
    inits = [("s", np.float32(0.0173)), ("z", np.uint8(128)), ("w", rng.integers(-127, 128, (8, 64, 3, 3)).astype(np.int8)),
             ("sw", np.float32(0.0071)), ("zw", np.int8(0)), ("sy", np.float32(0.2))]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.UINT8, [1, 64, 16, 16])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [1, 8, 16, 16])], inits, opset=19)
    feeds = {"x": rng.integers(0, 256, (1, 64, 16, 16)).astype(np.uint8)}
    fused = _ort(model, feeds, optimized=True)
    result, report = convert_for(model, runtime="tvm==0.27")
    assert any("QDQ groups fused" in n for n in report.target_notes), report.target_notes
    assert double_convs(result, "tvm 0.27") and not any(n.op_type == "DequantizeLinear" and n.input[0] == "w"
                                                        for n in result.graph.node)
    np.testing.assert_array_equal(ReferenceEvaluator(result).run(None, feeds)[0], fused)
    ran = run_in("tvm", "0.27", result, feeds)
    assert ran["ok"], ran
    np.testing.assert_array_equal(ran["values"][0].reshape(fused.shape), fused)
