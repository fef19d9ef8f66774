"""QDQ groups fused as ONNX Runtime fuses them (rewriter/convert/lowering/quant_fusion.py, OpenVINO's
``QDQ`` form): which models are handed to ONNX Runtime's optimizer, the fused graph's com.microsoft
ops lowered, ONNX Runtime's default result kept bit for bit (the oracle: ONNX Runtime's default run
of the original), models left as they were when nothing is fused, and the form in OpenVINO."""

from __future__ import annotations

from unittest import mock

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from rewriter.convert.lowering import quant_fusion
from rewriter.convert.lowering.quant_fusion import (
    fuse_like_onnx_runtime,
    has_qdq_reduction,
)
from rewriter.errors import RewriterError
from tests.convert.support.exact_int8 import ort_model

S, Z = ("s", np.float32(0.05)), ("z", np.uint8(128))


def _model(nodes, outputs, inits, inputs=None):
    inputs = inputs or [helper.make_tensor_value_info("x", T.UINT8, [1, 3, 8, 8])]
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _qdq_conv(extra=(), conv_output_too=False, add=False):
    """DQ(x), DQ(int8 weights) -> Conv (+ bias) -> Q -> [DQ(y), DQ(x) -> Add -> Q] -> DQ: a QDQ model
    as onnxruntime.quantization writes it."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], name="dq_w"),
             helper.make_node("Conv", ["xf", "wf"], ["v"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["v", "sy", "z"], ["yq"], name="q_conv"),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"], name="dq_y")]
    out = "y"
    if add:  # y + a slice of x, both dequantized: QLinearAdd in ONNX Runtime
        nodes += [helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["ya"], name="dq_ya"),
                  helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xa"], name="dq_xa"),
                  helper.make_node("Add", ["ya", "xa"], ["sum"], name="add"),
                  helper.make_node("QuantizeLinear", ["sum", "sy", "z"], ["sq"], name="q_add"),
                  helper.make_node("DequantizeLinear", ["sq", "sy", "z"], ["out"], name="dq_out")]
        out = "out"
    outputs = [helper.make_tensor_value_info(out, T.FLOAT, [1, 4 if not add else 3, 8, 8])]
    if add:  # 3 output channels so that the Add broadcasts no channel
        w = w[:3]
    nodes[1] = helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], name="dq_w")
    if conv_output_too:
        outputs.append(helper.make_tensor_value_info("v", T.FLOAT, None))
    inits = [S, Z, ("w", w), ("sw", np.float32(0.01)), ("zw", np.int8(0)), ("sy", np.float32(0.2)), *extra]
    return _model(nodes, outputs, inits)


def _feeds():
    return {"x": np.random.default_rng(1).integers(0, 256, (1, 3, 8, 8)).astype(np.uint8)}


def _ort(model, optimized=True):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(ort_model(model).SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, _feeds())


def test_which_models_are_handed_to_onnx_runtime():
    assert has_qdq_reduction(_qdq_conv())
    float_conv = _qdq_conv()
    float_conv.graph.node[2].input[0] = "f"  # the Conv's input a float graph input, its weights still DQ's
    assert has_qdq_reduction(float_conv)
    float_conv.graph.node[2].input[1] = "wc"  # no DequantizeLinear input at all
    assert not has_qdq_reduction(float_conv)
    add_only = _qdq_conv()
    add_only.graph.node[2].op_type = "Add"
    assert not has_qdq_reduction(add_only)
    assert not has_qdq_reduction(_model([helper.make_node("QuantizeLinear", ["f", "s", "z"], ["q"])], [
        helper.make_tensor_value_info("q", T.UINT8, [2])], [S, Z], [helper.make_tensor_value_info("f", T.FLOAT, [2])]))


@pytest.mark.parametrize("add", [False, True])
def test_fused_graph_is_onnx_runtimes_default_result(add):
    model = _qdq_conv(add=add)
    want, plain = _ort(model)[0], _ort(model, optimized=False)[0]
    got = onnx.ModelProto()
    got.CopyFrom(model)
    assert fuse_like_onnx_runtime(got) == (2 if add else 1, "")
    ops = [n.op_type for n in got.graph.node]
    assert "QLinearConv" in ops and "Conv" not in ops and not any(n.domain for n in got.graph.node)  # lowered
    np.testing.assert_array_equal(_ort(got, optimized=False)[0], want)
    assert not np.array_equal(want, plain) or not add  # the fused Add rounds otherwise than the float one here


def test_nothing_fused_leaves_the_model():
    for model in (_qdq_conv(conv_output_too=True), _qdq_conv()):
        before = model.SerializeToString()
        if model.graph.output[-1].name == "v":  # the Conv's output read elsewhere: ONNX Runtime keeps the group
            assert fuse_like_onnx_runtime(model) == (0, "")
        else:
            with mock.patch.object(quant_fusion, "_onnx_runtime_graph", return_value=None):
                assert fuse_like_onnx_runtime(model) == (0, "")
        assert model.SerializeToString() == before


def test_a_lowering_that_fails_leaves_the_model():
    model = _qdq_conv(add=True)
    before = model.SerializeToString()
    with mock.patch("rewriter.convert.lower_ops.lower_ops", side_effect=RewriterError("no lowering")):
        count, why = fuse_like_onnx_runtime(model)
    assert count == 0 and "fused graph cannot be lowered here: no lowering" in why
    assert model.SerializeToString() == before


def test_external_data_is_read_from_the_models_directory(tmp_path, monkeypatch):
    """The command line's loader leaves a large model's weights in its file: they are read relative to
    the model's directory (not the working one) before ONNX Runtime is handed the bytes."""
    model = _qdq_conv(add=True)
    want = _ort(model)[0]
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, size_threshold=0, location="m.data")
    monkeypatch.chdir(tmp_path.parent)
    loaded = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    assert fuse_like_onnx_runtime(loaded, str(tmp_path)) == (2, "")
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in loaded.graph.initializer)
    np.testing.assert_array_equal(_ort(loaded, optimized=False)[0], want)


def test_onnx_runtime_refusing_the_model_fuses_nothing():
    model = _qdq_conv()
    with mock.patch("onnxruntime.InferenceSession", side_effect=RuntimeError("refused")):
        assert quant_fusion._onnx_runtime_graph(model) is None


@pytest.mark.parametrize("release", ["2026.4", "2024.6"])
def test_convert_for_openvino_fuses_and_matches_onnx_runtime(release):
    from rewriter.convert.for_target import convert_for
    from tests.targets.runtime_runs import run_in

    model = _qdq_conv(add=True)
    result, report = convert_for(model, runtime=f"openvino=={release}")
    assert any("QDQ groups fused" in n for n in report.target_notes)
    assert not {"QuantizeLinear", "QLinearConv", "Conv"} & {n.op_type for n in result.graph.node}
    ran = run_in("openvino", release, result, _feeds())
    assert ran.get("ok"), ran
    np.testing.assert_array_equal(np.asarray(ran["values"][0]), _ort(model)[0])


def test_a_fused_graph_the_lowerings_refuse_is_named_in_the_refusal():
    """The Add's second input reshaped to a shape fed at run time (rank unknown): ONNX Runtime fuses the
    Add into QLinearAdd, whose lowering needs the ranks; the QuantizeLinear after the float Conv is
    refused, saying why the fusion did not serve."""
    from rewriter import RewriterError as Error
    from rewriter.convert.for_target import convert_for

    model = _qdq_conv(add=True)
    model.graph.input.append(helper.make_tensor_value_info("shape", T.INT64, [None]))
    model.graph.node.insert(0, helper.make_node("Reshape", ["x", "shape"], ["xr"], name="reshape"))
    next(n for n in model.graph.node if n.name == "dq_xa").input[0] = "xr"
    with pytest.raises(Error, match=r"'q_conv'.*float Conv.*ONNX Runtime fuses the group, but its fused graph cannot be "
                                    r"lowered here: .*QLinearAdd.*rank"):
        convert_for(model, runtime="openvino==2026.4")


def test_weights_the_command_lines_loader_leaves_in_the_file_are_read(tmp_path):
    """A Constant node's 1 MiB weights: the command line's loader leaves them in the model's file (an
    external reference ONNX Runtime refuses in the bytes: "model format error"); they are read inline."""
    from rewriter.io.load import load_model
    from rewriter.io.tensors import all_tensors

    w = np.random.default_rng(2).integers(-127, 128, (256, 64, 8, 8)).astype(np.int8)
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w, "w")),
             helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf"], ["v"]),
             helper.make_node("QuantizeLinear", ["v", "sy", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("y", T.FLOAT, [1, 256, 1, 1])],
                   [S, Z, ("sw", np.float32(0.001)), ("zw", np.int8(0)), ("sy", np.float32(0.5))],
                   [helper.make_tensor_value_info("x", T.UINT8, [1, 64, 8, 8])])
    onnx.save(model, tmp_path / "m.onnx")
    loaded = load_model(tmp_path / "m.onnx")
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t, _ in all_tensors(loaded))
    assert fuse_like_onnx_runtime(loaded, str(tmp_path)) == (1, "")
    feeds = {"x": np.random.default_rng(3).integers(0, 256, (1, 64, 8, 8)).astype(np.uint8)}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = ort.InferenceSession(loaded.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_array_equal(got[0], want[0])



def _with_average_pool():
    model = _qdq_conv()
    model.graph.node.extend([
        helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["yp"], name="dq_p"),
        helper.make_node("AveragePool", ["yp"], ["p"], name="pool", kernel_shape=[2, 3], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["p", "sy", "z"], ["pq"], name="q_p"),
        helper.make_node("DequantizeLinear", ["pq", "sy", "z"], ["pd"], name="dq_pd")])
    model.graph.output.append(helper.make_tensor_value_info("pd", T.FLOAT, [1, 4, 4, 3]))
    return model


def test_a_fused_average_pool_divides_as_onnx_runtime_rounds():
    """ONNX Runtime fuses DQ -> AveragePool -> Q into QLinearAveragePool, whose two divisions (the window
    sum by its count, the mean by y_scale) the lowering writes correctly rounded with only a faithful Div
    (exact_divide.py: OpenVINO, tract and LiteRT divide by a reciprocal; ppocr_v4_rec_qdq gave 84 of 9600
    other codes in OpenVINO with plain Divs): the fused graph is taken and computes ONNX Runtime's codes."""
    model = _with_average_pool()
    want = _ort(model)
    count, why = fuse_like_onnx_runtime(model)
    assert count > 0 and why == ""
    ops = [n.op_type for n in model.graph.node]
    assert "QLinearAveragePool" not in ops and ops.count("Div") == 2  # (one faithful Div per division)
    for got, expected in zip(_ort(model), want):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("release", ["openvino==2026.4", "openvino==2024.6", "tract==0.23", "litert==2.6"])
def test_convert_for_a_fused_average_pool_matches_in_the_release(release):
    """The releases whose division is a product with the reciprocal (before: the model refused by name)."""
    from rewriter.convert.for_target import convert_for
    from tests.targets.runtime_runs import run_in

    model = _with_average_pool()
    result, _ = convert_for(model, runtime=release)
    assert "AveragePool" not in {n.op_type for n in result.graph.node}
    runtime, version = release.split("==")
    ran = run_in(runtime, version, result, _feeds())
    assert ran.get("ok"), ran
    for got, want in zip(ran["values"], _ort(model)):
        np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)


@pytest.mark.parametrize("release", ["tract==0.23", "tvm==0.27", "litert==2.6"])
def test_convert_for_tract_tvm_and_litert_fuses_and_matches_onnx_runtime(release):
    """tract 0.23 and LiteRT summed a QDQ group's float Conv otherwise than ONNX Runtime (nudenet_320n_qdq
    0.0087, 0.00833); fused as ONNX Runtime fuses it and written as integers, it computes ONNX Runtime's codes
    (LiteRT: its DequantizeLinear written as Cast and Mul, quant_dequant.py)."""
    from rewriter.convert.for_target import convert_for
    from tests.targets.runtime_runs import run_in

    model = _qdq_conv(add=True)
    result, report = convert_for(model, runtime=release)
    assert any("QDQ groups fused" in n for n in report.target_notes)
    runtime, version = release.split("==")  # (TVM's integer Conv is a Conv in double: quant_double.py)
    assert not {"QuantizeLinear", "QLinearConv", "Conv" if runtime != "tvm" else ""} & {
        n.op_type for n in result.graph.node}
    ran = run_in(runtime, version, result, _feeds())
    assert ran.get("ok"), ran
    np.testing.assert_array_equal(np.asarray(ran["values"][0]).reshape(_ort(model)[0].shape), _ort(model)[0])


def test_a_qdq_group_the_fusion_leaves_is_named_for_a_dividing_form():
    """A QuantizeLinear of a QDQ group's float Conv that no fusion replaced is a blocker for tract's form
    (divide_in_double) too, as for OpenVINO's table: its x is the runtime's float sum, measured to give other
    codes in both. TVM's (divide) is written: its float ConvTranspose of ppocr_v4_det_qdq, which ONNX
    Runtime leaves unfused, matched ONNX Runtime bit for bit; LiteRT's (divide_by_fed) is named: its float
    sum gave other codes than both of ONNX Runtime's results (nudenet_320n_qdq 0.00833 / 0.00777)."""
    from rewriter.convert.lowering.quant_explicit import rewrite_quantized

    for form in ("divide_in_double", "threshold_table", "divide_by_fed"):
        model = _qdq_conv()
        count, blockers = rewrite_quantized(model, {"QuantizeLinear": form}, "R 1.0")
        assert count == 0 and blockers and all("QDQ group's float Conv" in b[3] for b in blockers), form
    for form in ("divide",):
        count, blockers = rewrite_quantized(_qdq_conv(), {"QuantizeLinear": form}, "R 1.0")
        assert count > 0 and not any("QDQ group's" in b[3] for b in blockers), form


def test_a_reduction_further_up_is_named_for_tract_only():
    """A QuantizeLinear whose x is a float op (Tanh) of a QDQ group's float Conv: for tract's form the
    Conv is found through the Tanh and named (tract computed piper_tashkeel_qdq's GRU outputs, Gemms
    of dequantized values through float ops, otherwise than ONNX Runtime: 0.0147 from its result,
    the converted model being exact in ONNX Runtime); OpenVINO's and LiteRT's forms look at x's own
    producer only (their data measured nothing further up), and TVM's is written."""
    from rewriter.convert.lowering.quant_explicit import rewrite_quantized

    def model():
        m = _qdq_conv()
        q = next(n for n in m.graph.node if n.name == "q_conv")
        q.input[0] = "t"
        m.graph.node.insert(3, helper.make_node("Tanh", ["v"], ["t"], name="tanh"))
        return m

    count, blockers = rewrite_quantized(model(), {"QuantizeLinear": "divide_in_double"}, "tract 0.23")
    assert count == 0 and blockers and "float Conv ('conv') (through the float ops after it)" in blockers[0][3]
    for form in ("threshold_table", "divide_by_fed", "divide"):
        count, blockers = rewrite_quantized(model(), {"QuantizeLinear": form}, "R 1.0")
        assert count > 0 and not any("QDQ group's" in b[3] for b in blockers), form
    direct = _qdq_conv()  # (the Conv read directly: named for every dividing form, as before)
    count, blockers = rewrite_quantized(direct, {"QuantizeLinear": "divide_in_double"}, "tract 0.23")
    assert blockers and "through" not in blockers[0][3]


def test_the_walk_up_stops_at_the_group_before():
    """q_add reads Add(DQ(q_conv's codes), DQ(x)): the Conv before q_conv belongs to the group before,
    whose own QuantizeLinear is the one named; q_add is not."""
    from rewriter.convert.lowering.quant_explicit import rewrite_quantized

    count, blockers = rewrite_quantized(_qdq_conv(add=True), {"QuantizeLinear": "divide_in_double"}, "tract 0.23")
    assert [b[0] for b in blockers if "QDQ group's" in b[3]] == ["node 'q_conv' (QuantizeLinear) in main graph"]
