"""DequantizeLinear's ``cast_and_scale`` form (rewriter/convert/lowering/quant_dequant.py, LiteRT's
``quantized_forms``): Cast, Sub and Mul give ONNX Runtime's DequantizeLinear bit for bit (the
oracle: ONNX Runtime's own kernel on the model as it was) for each code type, per tensor and per
axis, with and without zero points; constant codes folded; what the form cannot write is kept or
named.  In LiteRT where its venv is: onnx2tf reads a DequantizeLinear after a Concat of codes as a
quantized tensor and gives zeros; the form runs right."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper

from rewriter.convert.lowering.quant_explicit import rewrite_quantized
from tests.convert.quant_models import ort_run, quant_model

FORM = {"DequantizeLinear": "cast_and_scale"}
CODES = {T.UINT8: np.uint8, T.INT8: np.int8, T.UINT16: np.uint16, T.INT16: np.int16, T.INT32: np.int32}


def _dq(elem, shape, scale, zp=None, axis=1, opset=21, const_x=None):
    inputs = ["x", "s"] + (["z"] if zp is not None else [])
    node = helper.make_node("DequantizeLinear", inputs, ["y"], name="dq", axis=axis)
    inits = [("s", scale)] + ([("z", zp)] if zp is not None else [])
    ins = [helper.make_tensor_value_info("x", elem, list(shape))] if const_x is None else []
    if const_x is not None:
        inits.append(("x", const_x))
        ins = [helper.make_tensor_value_info("unused", T.FLOAT, [1])]
    return quant_model([node], ins, [helper.make_tensor_value_info("y", T.FLOAT, list(shape))], inits, opset=opset)


def _codes(rng, elem, shape):
    info = np.iinfo(CODES[elem])
    lo, hi = (max(info.min, -(2**31)), min(info.max, 2**31 - 1))
    x = rng.integers(lo, hi, shape, endpoint=True).astype(CODES[elem])
    if x.size >= 2:
        x.reshape(-1)[:2] = [max(info.min, lo), min(info.max, hi)]  # both ends
    return x


def _written(model):
    count, blockers = rewrite_quantized(model, FORM, "R 1.0")
    assert blockers == []
    return count


@settings(max_examples=40, deadline=None)
@given(elem=st.sampled_from(sorted(CODES)), per_axis=st.booleans(), with_zp=st.booleans(), seed=st.integers(0, 2**16))
def test_cast_and_scale_is_onnx_runtimes_dequantize(elem, per_axis, with_zp, seed):
    rng = np.random.default_rng(seed)
    shape = (2, 3, 5)
    n = 3 if per_axis else 1
    scale = rng.uniform(1e-4, 4, n).astype(np.float32)
    scale = scale if per_axis else scale[0]
    zp = None
    if with_zp:
        zp = (np.zeros(n, CODES[elem]) if elem == T.INT32 else _codes(rng, elem, (n,)))  # int32: zero point 0
        zp = zp if per_axis else zp[0]
    model = _dq(elem, shape, scale, zp)
    x = _codes(rng, elem, shape)
    want = ort_run(model, {"x": x})
    assert _written(model) == 1
    ops = [nd.op_type for nd in model.graph.node]
    assert "DequantizeLinear" not in ops and ops[-1] == "Mul"
    assert model.graph.node[-1].name == "dq"  # (convert's shape check matches the input's problems by node name)
    assert ("Sub" in ops) == bool(zp is not None and np.any(zp))  # a zero point of 0 subtracts nothing
    onnx.checker.check_model(model, full_check=True)
    got = ort_run(model, {"x": x})
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_int32_codes_are_subtracted_before_the_cast():
    """ONNX Runtime's float(x - zp): for int32 the difference in int32, then rounded once to float
    (16777219 - 5 is 16777214; float(16777219) - 5 would be 16777215)."""
    model = _dq(T.INT32, (4,), np.float32(0.5), np.int32(5))
    x = np.array([16777219, -(2**31), 2**31 - 1, 7], np.int32)
    want = ort_run(model, {"x": x})
    _written(model)
    assert [nd.op_type for nd in model.graph.node] == ["Sub", "Cast", "Mul"]
    np.testing.assert_array_equal(ort_run(model, {"x": x}), want)
    model = _dq(T.UINT8, (4,), np.float32(0.5), np.uint8(3))
    _written(model)
    assert [nd.op_type for nd in model.graph.node] == ["Cast", "Sub", "Mul"]


def test_the_per_axis_scale_broadcasts_along_its_axis():
    rng = np.random.default_rng(5)
    for axis in (0, 2, -1):
        shape = (4, 3, 4)
        scale = rng.uniform(0.01, 2, 4).astype(np.float32)
        zp = rng.integers(0, 255, 4).astype(np.uint8)
        model = _dq(T.UINT8, shape, scale, zp, axis=axis)
        x = _codes(rng, T.UINT8, shape)
        want = ort_run(model, {"x": x})
        _written(model)
        np.testing.assert_array_equal(ort_run(model, {"x": x}), want)


def test_constant_codes_are_folded_to_their_value():
    rng = np.random.default_rng(2)
    codes = _codes(rng, T.INT8, (3, 4))
    model = _dq(T.INT8, (3, 4), rng.uniform(0.01, 1, 3).astype(np.float32), np.int8([1, -2, 3]), axis=0,
                const_x=codes)
    want = ort_run(model, {"unused": np.zeros(1, np.float32)})
    _written(model)
    assert [nd.op_type for nd in model.graph.node] == ["Identity"]
    np.testing.assert_array_equal(ort_run(model, {"unused": np.zeros(1, np.float32)}), want)


def test_what_the_form_cannot_write_is_kept_or_named():
    fed = _dq(T.UINT8, (4,), np.float32(0.5), np.uint8(1))
    fed.graph.initializer.pop(0)  # the scale fed at run time
    fed.graph.input.append(helper.make_tensor_value_info("s", T.FLOAT, []))
    assert rewrite_quantized(fed, FORM, "R 1.0") == (0, [])
    half = _dq(T.UINT8, (4,), np.float16(0.5), np.uint8(1))  # a float16 result: kept
    assert rewrite_quantized(half, FORM, "R 1.0") == (0, [])
    fp8 = _dq(T.FLOAT8E4M3FN, (4,), np.float32(0.5))  # codes of a type without the exact difference
    assert rewrite_quantized(fp8, FORM, "R 1.0") == (0, [])
    plain = _dq(T.UINT8, (4,), np.float32(0.5), np.uint8(1))
    assert rewrite_quantized(plain, {"DequantizeLinear": "fold_blocks"}, "R 1.0") == (0, [])  # only blocks there
    unknown = _dq(T.UINT8, (2, 3), np.float32([0.5, 0.25, 1.0]), np.uint8([1, 2, 3]))
    unknown.graph.input[0].type.tensor_type.ClearField("shape")  # per axis, rank unknown: named
    count, blockers = rewrite_quantized(unknown, FORM, "R 1.0")
    assert count == 0 and [b[2] for b in blockers] == ["dq"] and "unknown rank" in blockers[0][3]


def _concat_dequantized():
    nodes = [helper.make_node("Concat", ["a", "b"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")]
    return quant_model(nodes, [helper.make_tensor_value_info("a", T.UINT8, [1, 4, 50]),
                               helper.make_tensor_value_info("b", T.UINT8, [1, 6, 50])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [1, 10, 50])],
                       [("s", np.float32(1.2553457)), ("z", np.uint8(0))], opset=13)


def test_litert_runs_the_form_and_not_the_op():
    """nudenet_320n_qop's output: Concat of codes, then DequantizeLinear; in LiteRT all zeros as it is."""
    from rewriter.convert.for_target import convert_for
    from tests.targets.runtime_runs import run_in

    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(1, 256, (1, 4, 50)).astype(np.uint8), "b": rng.integers(1, 256, (1, 6, 50)).astype(np.uint8)}
    model = _concat_dequantized()
    want = ort_run(model, feeds)
    as_is = run_in("litert", "2.6", model, feeds)
    assert as_is["ok"] and not np.array_equal(as_is["values"][0], want)
    result, report = convert_for(model, runtime="litert==2.6")
    assert "DequantizeLinear" not in {nd.op_type for nd in result.graph.node}
    got = run_in("litert", "2.6", result, feeds)
    assert got["ok"], got
    np.testing.assert_array_equal(got["values"][0], want)


@pytest.mark.parametrize("name", ["tract==0.23", "openvino==2026.4", "tvm==0.27"])
def test_other_releases_keep_the_op(name):
    from rewriter.convert.for_target import convert_for

    result, _ = convert_for(_concat_dequantized(), runtime=name)
    assert "DequantizeLinear" in {nd.op_type for nd in result.graph.node}


def _blocked_matmul(elem=T.UINT4):
    """y = x @ DequantizeLinear-21(codes [64, 8], block_size 32 along axis 0): MatMulNBits' lowering."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 16, (64, 8))
    scale = rng.uniform(0.01, 0.1, (2, 8)).astype(np.float32)
    zp = rng.integers(0, 16, (2, 8))
    inits = [helper.make_tensor("w", elem, [64, 8], codes.reshape(-1).tolist()),
             helper.make_tensor("z", elem, [2, 8], zp.reshape(-1).tolist()),
             onnx.numpy_helper.from_array(scale, "s")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], name="dq", axis=0, block_size=32),
             helper.make_node("MatMul", ["x", "wf"], ["y"], name="mm")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 64])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [3, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("elem", [T.UINT4, T.UINT8])
def test_tvm_refuses_blocked_codes_and_runs_them_folded(elem):
    """TVM 0.27 refuses a blocked DequantizeLinear-21 at load (uint4: its constant is read as a byte
    per code, "TensorCopyFromBytes: size mismatch (256 vs. 512)"; uint8 too); folded to float
    weights (``fold_blocks``) it runs and gives ONNX Runtime's values (onnxruntime-genai's int4
    Llama: refused at load, unnamed -> match, its accuracy_level 4 activations written out)."""
    from rewriter.convert.for_target import convert_for
    from tests.targets.runtime_runs import run_in

    model = _blocked_matmul(elem)
    feeds = {"x": np.random.default_rng(6).standard_normal((3, 64)).astype(np.float32)}
    want = ort_run(model, feeds)
    result, _ = convert_for(model, runtime="tvm==0.27")
    assert "DequantizeLinear" not in {nd.op_type for nd in result.graph.node}
    np.testing.assert_allclose(ort_run(result, feeds), want, rtol=1e-5, atol=1e-6)
    as_is = run_in("tvm", "0.27", model, feeds)
    assert not as_is["ok"], as_is
    got = run_in("tvm", "0.27", result, feeds)
    assert got["ok"], got
    np.testing.assert_allclose(got["values"][0], want, rtol=1e-5, atol=1e-6)
