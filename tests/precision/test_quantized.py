"""convert --dtype on quantized models: the nodes of a quantized region (between a
DequantizeLinear of an activation and a QuantizeLinear, the producers of dynamically quantized
activations, the dequantization of integer products) stay float32, so the model computes exactly
what it did and its Q/DQ patterns stay whole; weight-only quantized nodes run in half. Checked
with ONNX Runtime against the source."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.precision import convert_precision_proto
from rewriter.precision.quantized import QUANTIZED

RNG = np.random.default_rng(7)


def _model(nodes, inputs, outputs, inits, opset=17):
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, inits), opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _run(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _kept(report):
    return {k.label.split("'")[1] if "'" in k.label else k.label: k.reason for k in report.kept}


def _qdq_conv(opset=17):
    """x -> Q -> DQ -> Conv (weights DQ of int8) -> Q -> DQ -> Relu -> Sigmoid -> y."""
    w = RNG.integers(-100, 100, (4, 2, 3, 3)).astype(np.int8)
    inits = [nh.from_array(w, "w_q"), nh.from_array(np.array(0.01, np.float32), "w_s"),
             nh.from_array(np.array(0, np.int8), "w_z"),
             nh.from_array(np.array(0.02, np.float32), "x_s"), nh.from_array(np.array(3, np.uint8), "x_z"),
             nh.from_array(np.array(0.05, np.float32), "y_s"), nh.from_array(np.array(128, np.uint8), "y_z")]
    nodes = [h.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"], name="qx"),
             h.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"], name="dqx"),
             h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wd"], name="dqw"),
             h.make_node("Conv", ["xd", "wd"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["c", "y_s", "y_z"], ["cq"], name="qc"),
             h.make_node("DequantizeLinear", ["cq", "y_s", "y_z"], ["cd"], name="dqc"),
             h.make_node("Relu", ["cd"], ["r"], name="relu"),
             h.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 5, 5])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 5, 5])], inits, opset)


@pytest.mark.parametrize("opset", [17, 21])
def test_qdq_region_stays_float32_and_computes_the_same(opset):
    m = _qdq_conv(opset)
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert kept["conv"] == QUANTIZED and kept["relu"] == QUANTIZED  # read dequantized activations
    # the Q/DQ nodes themselves make and read float32 as before (opset 21 would let DQ make float16)
    types = {v.name: v.type.tensor_type.elem_type for v in onnx.shape_inference.infer_shapes(r).graph.value_info}
    assert [types[v] for v in ("xd", "wd", "c", "cd")] == [T.FLOAT] * 4
    assert "sigmoid" not in kept  # after the region: half
    if opset >= 19:  # Q and DQ could make and read float16 there: the quantizer and the activation's DQ do not
        assert kept["qx"] == kept["dqx"] == kept["dqc"] == QUANTIZED
    onnx.checker.check_model(r, full_check=True)
    by = {n.name: n for n in r.graph.node}
    # no Cast between DQ -> Conv -> Q: the pattern a runtime fuses is whole
    assert by["conv"].input[:2] == ["xd", "wd"] and by["qc"].input[0] == "c"
    x = RNG.uniform(-1, 3, (1, 2, 5, 5)).astype(np.float32)
    want, got = _run(m, {"x": x})[0], _run(r, {"x": x})[0]
    before_sigmoid = np.asarray(want, np.float64)
    assert np.max(np.abs(got.astype(np.float64) - before_sigmoid)) <= 1e-3  # the Sigmoid in half alone


def test_weight_only_dequantized_weights_run_in_half():
    w = RNG.integers(-100, 100, (8, 6)).astype(np.int8)
    inits = [nh.from_array(w, "w_q"), nh.from_array(np.array(0.01, np.float32), "w_s"),
             nh.from_array(np.array(0, np.int8), "w_z")]
    nodes = [h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wd"], name="dqw"),
             h.make_node("MatMul", ["x", "wd"], ["y"], name="mm")]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
               [h.make_tensor_value_info("y", T.FLOAT, [2, 6])], inits)
    r, report = convert_precision_proto(m, "float16")
    assert "mm" not in _kept(report) and report.half_by_op.get("MatMul") == 1
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    want, got = _run(m, {"x": x})[0], _run(r, {"x": x})[0]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2


def _dynamic(with_reshape):
    """x -> Tanh [-> Reshape] -> DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scales) -> Add(bias)."""
    w = RNG.integers(-127, 127, (16, 4)).astype(np.int8)
    inits = [nh.from_array(w, "w_q"), nh.from_array(np.array(0, np.int8), "w_z"),
             nh.from_array(np.array(0.01, np.float32), "w_s"),
             nh.from_array(RNG.standard_normal(4).astype(np.float32), "bias"),
             nh.from_array(np.array([2, 16], np.int64), "shape")]
    src = "t"
    nodes = [h.make_node("Tanh", ["x"], ["t"], name="tanh")]
    if with_reshape:
        nodes.append(h.make_node("Reshape", ["t", "shape"], ["tr"], name="reshape"))
        src = "tr"
    nodes += [h.make_node("DynamicQuantizeLinear", [src], ["xq", "xs", "xz"], name="dql"),
              h.make_node("MatMulInteger", ["xq", "w_q", "xz", "w_z"], ["acc"], name="mmi"),
              h.make_node("Cast", ["acc"], ["accf"], name="cast", to=T.FLOAT),
              h.make_node("Mul", ["xs", "w_s"], ["s"], name="scales"),
              h.make_node("Mul", ["accf", "s"], ["deq"], name="deq"),
              h.make_node("Add", ["deq", "bias"], ["y"], name="add")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 16])],
                  [h.make_tensor_value_info("y", T.FLOAT, [2, 4])], inits)


@pytest.mark.parametrize("with_reshape", [False, True])
def test_dynamic_quantization_producer_and_dequantization_stay_float32(with_reshape):
    m = _dynamic(with_reshape)
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert kept["tanh"] == QUANTIZED  # makes the activation DynamicQuantizeLinear measures
    assert kept["cast"] == QUANTIZED and kept["deq"] == QUANTIZED  # int32 sums and their scaling
    assert "add" not in kept
    if with_reshape:
        assert kept["reshape"] == QUANTIZED
    x = RNG.uniform(-3, 3, (2, 16)).astype(np.float32)
    want, got = _run(m, {"x": x})[0], _run(r, {"x": x})[0]
    # the quantization is the source's own: only the Add's half rounding is left
    assert np.max(np.abs(got.astype(np.float64) - want)) <= 4e-3 * np.max(np.abs(want))


def test_integer_sums_beyond_float16_stay_finite():
    m = _dynamic(False)
    w = next(t for t in m.graph.initializer if t.name == "w_q")
    w.CopyFrom(nh.from_array(np.full((16, 4), 127, np.int8), "w_q"))
    x = np.full((2, 16), 0.9, np.float32)  # DynamicQuantizeLinear: 255 each; sums 16 * 255 * 127 > 65504
    want = _run(m, {"x": x})[0]
    got = _run(rewriter.convert_precision(m, "float16"), {"x": x})[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-3)


def test_computed_scale_of_a_quantizer_stays_float32_and_other_casts_run_in_half():
    """A scale a node computes for QuantizeLinear stays float32 (rounded, it moves every step); a
    Cast of integers that no integer product made is no dequantization: half."""
    inits = [nh.from_array(np.array(0, np.uint8), "z"), nh.from_array(np.array(3.0, np.float32), "three"),
             nh.from_array(RNG.standard_normal(4).astype(np.float32), "w"),
             nh.from_array(np.array(1, np.int32), "one")]
    nodes = [h.make_node("Div", ["s_in", "three"], ["s"], name="scale"),
             h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
             h.make_node("Add", ["n", "one"], ["n1"], name="int_add"),
             h.make_node("Cast", ["n1"], ["nf"], name="cast", to=T.FLOAT),
             h.make_node("Mul", ["nf", "w"], ["y"], name="mul")]
    m = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [4]), h.make_tensor_value_info("s_in", T.FLOAT, []),
                       h.make_tensor_value_info("n", T.INT32, [4])],
               [h.make_tensor_value_info("q", T.UINT8, [4]), h.make_tensor_value_info("y", T.FLOAT, [4])], inits)
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert kept["scale"] == QUANTIZED
    assert "cast" not in kept and "mul" not in kept
    feeds = {"x": np.array([0.1, 0.5, 1.7, 2.9], np.float32), "s_in": np.array(0.0301, np.float32),
             "n": np.array([1, 2, 3, 40], np.int32)}
    want, got = _run(m, feeds), _run(r, feeds)
    assert np.array_equal(want[0], got[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-3)


def test_cli_says_when_no_node_runs_in_half(tmp_path):
    """A model with nothing to halve (already float16, or all quantized) is not reported as a
    float32 -> float16 conversion."""
    import subprocess
    import sys

    half = _model([h.make_node("Relu", ["x"], ["y"], name="relu")], [h.make_tensor_value_info("x", T.FLOAT16, [4])],
                  [h.make_tensor_value_info("y", T.FLOAT16, [4])], [])
    m = _qdq_conv()
    del m.graph.node[-1]  # no Sigmoid: every float node is in the quantized region
    m.graph.output[0].name = "r"
    for model, kept in ((half, None), (m, "quantized")):
        src, out = tmp_path / "m.onnx", tmp_path / "m16.onnx"
        onnx.save(model, src)
        run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o",
                              str(out)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        head = run.stdout.splitlines()[0]
        assert "no node runs in float16" in head and "float32 -> float16" not in head
        assert kept is None or kept in run.stdout


def test_every_float_node_on_the_way_to_a_quantizer_stays_float32():
    """Layer 1's dequantized sums, bias and activation feed layer 2's DynamicQuantizeLinear: all
    float32 (rounded anywhere on the way, values land in other integer steps); layer 2's own
    bias, reaching no quantizer, runs in half."""
    m = _dynamic(False)
    g = m.graph
    add = next(n for n in g.node if n.name == "add")
    add.output[0] = "h1"
    w2 = RNG.integers(-127, 127, (4, 4)).astype(np.int8)
    g.initializer.extend([nh.from_array(w2, "w2_q"), nh.from_array(np.array(0.02, np.float32), "w2_s"),
                          nh.from_array(RNG.standard_normal(4).astype(np.float32), "bias2")])
    g.node.extend([h.make_node("Relu", ["h1"], ["r1"], name="relu1"),
                   h.make_node("DynamicQuantizeLinear", ["r1"], ["q2", "s2", "z2"], name="dql2"),
                   h.make_node("MatMulInteger", ["q2", "w2_q", "z2", "w_z"], ["acc2"], name="mmi2"),
                   h.make_node("Cast", ["acc2"], ["acc2f"], name="cast2", to=T.FLOAT),
                   h.make_node("Mul", ["s2", "w2_s"], ["sc2"], name="scales2"),
                   h.make_node("Mul", ["acc2f", "sc2"], ["deq2"], name="deq2"),
                   h.make_node("Add", ["deq2", "bias2"], ["y"], name="add2")])
    onnx.checker.check_model(m, full_check=True)
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert all(kept.get(n) == QUANTIZED for n in ("tanh", "cast", "scales", "deq", "add", "relu1", "cast2", "deq2"))
    assert "add2" not in kept  # (its bias is a weight in half)
    assert kept.get("scales2") != QUANTIZED  # (left float32 as an island between float32 nodes, not for this)
    x = RNG.uniform(-3, 3, (2, 16)).astype(np.float32)
    want, got = _run(m, {"x": x})[0], _run(r, {"x": x})[0]
    assert np.max(np.abs(got.astype(np.float64) - want)) <= 4e-3 * np.max(np.abs(want))
