"""Standard QuantizeLinear / QLinearConv / QLinearMatMul written out for a runtime measured to compute
them otherwise (rewriter/convert/lowering/quant_explicit.py): the same integers as ONNX Runtime
running the op itself (the oracle), for ties at .5, saturation at both ends, per-channel scales and
zero points, NaN; blocked DequantizeLinear folded to ONNX Runtime's float weights; refusals naming
the node; and, where the venvs are, the forms in the runtimes whose data asks for them."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from rewriter.convert.lowering.quant_explicit import rewrite_quantized
from rewriter.convert.lowering.quant_table import onnx_runtime_codes, thresholds
from tests.convert.support.exact_int8 import ort_model

NP = {T.UINT8: np.uint8, T.INT8: np.int8}


def _model(nodes, inputs, output, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, [output], [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10 if opset >= 21 else 8
    return m


def _run(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(ort_model(model).SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _rewritten(model, forms):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    count, blockers = rewrite_quantized(copy, forms, "R 1.0")
    assert not blockers and count >= 1
    onnx.checker.check_model(copy, full_check=True)
    assert not any(n.op_type in forms for n in copy.graph.node)
    return copy


def _quantize_case(elem, per_axis, rng):
    info = np.iinfo(NP[elem])
    scale = (rng.uniform(0.003, 0.05, 3) if per_axis else rng.uniform(0.003, 0.05, 1)).astype(np.float32)
    zp = rng.integers(info.min, info.max + 1, scale.size).astype(NP[elem])
    k = rng.integers(-300, 300, (2, 3, 400))
    s = scale.reshape(1, -1, 1) if per_axis else scale[0]
    ties = ((k + 0.5) * s).astype(np.float32)  # at or next to .5 after the division
    x = np.concatenate([ties, rng.normal(0, 4, (2, 3, 400)).astype(np.float32),
                        np.broadcast_to(np.float32([1e30, -1e30, np.inf, -np.inf, np.nan, 0.0, -0.0, 3e-39] * 2),
                                        (2, 3, 16))], axis=2).astype(np.float32)
    inits = [("s", scale if per_axis else scale[0]), ("z", zp if per_axis else zp[0])]
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    model = _model([node], [helper.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
                   helper.make_tensor_value_info("y", elem, list(x.shape)), inits)
    return model, {"x": x}


@pytest.mark.parametrize("form", ["divide", "divide_in_double", "divide_by_fed", "threshold_table"])
@pytest.mark.parametrize("elem", [T.UINT8, T.INT8])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_linear_forms_are_onnx_runtime_integers(form, elem, per_axis):
    model, feeds = _quantize_case(elem, per_axis, np.random.default_rng(7 + elem + per_axis))
    want = _run(model, feeds)
    got = _run(_rewritten(model, {"QuantizeLinear": form}), feeds)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    info = np.iinfo(NP[elem])
    assert want.min() == info.min and want.max() == info.max  # both ends saturated


def test_the_node_writing_the_value_keeps_the_rewritten_nodes_name():
    """convert's shape check matches a problem the input already had by node name (ppocr_mobile_cls_qop's
    declared -1 dims): the written node that writes the output is named as the node it replaces."""
    model, _ = _quantize_case(T.UINT8, False, np.random.default_rng(1))
    model.graph.node[0].name = "quant"
    for form in ("divide", "threshold_table"):
        written = _rewritten(model, {"QuantizeLinear": form})
        assert [n.name for n in written.graph.node if "y" in n.output] == ["quant"]
        assert [n.name for n in written.graph.node].count("quant") == 1


def _conv_case(rng, per_channel, zw_nonzero=False, bias=True):
    cin, cout = 8, 6
    x = rng.integers(0, 256, (1, cin, 9, 9)).astype(np.uint8)
    w = rng.integers(-100, 100, (cout, cin, 3, 3)).astype(np.int8)
    sw = rng.uniform(0.001, 0.02, cout if per_channel else 1).astype(np.float32)
    zw = (rng.integers(-20, 20, cout) if zw_nonzero else np.zeros(cout)).astype(np.int8)
    inits = [("sx", np.float32(0.02)), ("zx", np.uint8(131)), ("w", w), ("sw", sw if per_channel else sw[0]),
             ("zw", zw if per_channel else zw[0]), ("sy", np.float32(0.05)), ("zy", np.uint8(120))]
    names = ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"]
    if bias:
        inits.append(("b", rng.integers(-30000, 30000, cout).astype(np.int32)))
        names.append("b")
    node = helper.make_node("QLinearConv", names, ["y"], pads=[1, 0, 1, 2], strides=[1, 2])
    model = _model([node], [helper.make_tensor_value_info("x", T.UINT8, list(x.shape))],
                   helper.make_tensor_value_info("y", T.UINT8, [1, cout, 9, 5]), inits)
    return model, {"x": x}


@pytest.mark.parametrize("per_channel,zw_nonzero,bias", [(False, False, True), (True, False, True), (True, True, False),
                                                          (False, False, False)])
def test_qlinear_conv_integer_form(per_channel, zw_nonzero, bias):
    model, feeds = _conv_case(np.random.default_rng(3), per_channel, zw_nonzero, bias)
    want = _run(model, feeds)
    got = _run(_rewritten(model, {"QLinearConv": "integer"}), feeds)
    np.testing.assert_array_equal(got, want)
    assert want.min() == 0 and want.max() == 255  # saturation at both ends is part of the case


def test_qlinear_conv_ties_round_half_to_even():
    """scale 0.5 exactly: every odd accumulator is a tie."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 2, 6, 6)).astype(np.uint8)
    w = rng.integers(-2, 3, (3, 2, 1, 1)).astype(np.int8)
    inits = [("sx", np.float32(0.5)), ("zx", np.uint8(128)), ("w", w), ("sw", np.float32(1 / 64)), ("zw", np.int8(0)),
             ("sy", np.float32(1 / 64)), ("zy", np.uint8(128))]
    model = _model([helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"])],
                   [helper.make_tensor_value_info("x", T.UINT8, list(x.shape))],
                   helper.make_tensor_value_info("y", T.UINT8, [1, 3, 6, 6]), inits)
    np.testing.assert_array_equal(_run(_rewritten(model, {"QLinearConv": "integer"}), {"x": x}), _run(model, {"x": x}))


@pytest.mark.parametrize("b_const", [True, False])
@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul_integer_form(b_const, per_column):
    if per_column and not b_const:
        pytest.skip("refused: see test_refusals_name_the_node")
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, (2, 5, 40)).astype(np.uint8)
    b = rng.integers(-100, 100, (40, 7)).astype(np.int8)
    sb = rng.uniform(0.002, 0.01, 7 if per_column else 1).astype(np.float32)
    zb = (rng.integers(-5, 5, 7) if per_column else np.zeros(1)).astype(np.int8)
    inits = [("sa", np.float32(0.04)), ("za", np.uint8(125)), ("sb", sb if per_column else sb[0]),
             ("zb", zb if per_column else zb[0]), ("sy", np.float32(0.06)), ("zy", np.uint8(128))]
    inputs = [helper.make_tensor_value_info("a", T.UINT8, list(a.shape))]
    feeds = {"a": a}
    if b_const:
        inits.append(("b", b))
    else:
        inputs.append(helper.make_tensor_value_info("b", T.INT8, list(b.shape)))
        feeds["b"] = b
    model = _model([helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])],
                   inputs, helper.make_tensor_value_info("y", T.UINT8, [2, 5, 7]), inits)
    want = _run(model, feeds)
    np.testing.assert_array_equal(_run(_rewritten(model, {"QLinearMatMul": "integer"}), feeds), want)
    assert want.min() == 0 and want.max() == 255


def test_blocked_dequantize_folded_to_onnx_runtime_weights():
    import ml_dtypes

    rng = np.random.default_rng(2)
    codes = rng.integers(0, 16, (64, 8)).astype(ml_dtypes.uint4)
    inits = [("w", codes), ("s", rng.uniform(0.01, 0.1, (2, 8)).astype(np.float32)),
             ("z", rng.integers(0, 16, (2, 8)).astype(ml_dtypes.uint4))]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0, block_size=32),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [3, 64])],
                   helper.make_tensor_value_info("y", T.FLOAT, [3, 8]), inits, opset=21)
    feeds = {"x": rng.normal(0, 1, (3, 64)).astype(np.float32)}
    got = _rewritten(model, {"DequantizeLinear": "fold_blocks"})
    np.testing.assert_array_equal(_run(got, feeds), _run(model, feeds))
    plain = _model([helper.make_node("DequantizeLinear", ["w", "s"], ["y"])], [], helper.make_tensor_value_info(
        "y", T.FLOAT, [4]), [("w", np.uint8([1, 2, 3, 4])), ("s", np.float32(0.5))])
    assert rewrite_quantized(plain, {"DequantizeLinear": "fold_blocks"}, "R") == (0, [])  # no blocks: kept


def test_refusals_name_the_node_and_change_nothing():
    model, _ = _conv_case(np.random.default_rng(1), True)
    model.graph.node[0].name = "conv_q"
    model.graph.input.append(helper.make_tensor_value_info("fed_scale", T.FLOAT, []))
    model.graph.node[0].input[6] = "fed_scale"
    q, _ = _quantize_case(T.UINT8, False, np.random.default_rng(0))
    model.graph.node.append(q.graph.node[0])
    model.graph.node[1].input[0] = "xf"
    model.graph.input.append(helper.make_tensor_value_info("xf", T.FLOAT, [3]))
    model.graph.node[1].output[0] = "q_out"
    model.graph.initializer.extend(q.graph.initializer)
    before = model.SerializeToString()
    count, blockers = rewrite_quantized(model, {"QLinearConv": "integer", "QuantizeLinear": "divide"}, "R 1.0")
    assert count == 0 and len(blockers) == 1
    label, op, name, reason = blockers[0]
    assert "'conv_q'" in label and op == "QLinearConv" and "y_scale" in reason and "R 1.0" in reason
    assert name == "conv_q"  # (credited to the model's node when an expansion wrote it)
    assert model.SerializeToString() == before


def _threshold_case(scale, zp, elem, channels=1):
    """QuantizeLinear over every threshold of each channel's (scale, zp), 1 and 2 ulps below it, 1 above,
    the ties (k + 0.5) * s and NaN / +-inf / +-0 / subnormals / the float32 ends: [1, channels, n]."""
    scale, zp = np.broadcast_arrays(np.asarray(scale, np.float32).reshape(-1), np.asarray(zp).reshape(-1))
    rows = []
    for s, z in zip(scale, zp):
        t = thresholds(np.float32([s]), np.int64([z]), elem)[0, 1:-1]
        t = t[np.isfinite(t)]
        down = np.nextafter(t, np.float32(-np.inf))
        rows.append(np.concatenate([t, down, np.nextafter(down, np.float32(-np.inf)), np.nextafter(t, np.float32(np.inf)),
                                    ((np.arange(-260, 260) + 0.5) * s).astype(np.float32),
                                    np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38])]))
    n = max(r.size for r in rows)
    x = np.stack([np.pad(r, (0, n - r.size), mode="wrap") for r in rows])[None].astype(np.float32)
    per_axis = scale.size > 1
    inits = [("s", scale if per_axis else scale[0]), ("z", zp.astype(NP[elem]) if per_axis else NP[elem](zp[0]))]
    model = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
                   helper.make_tensor_value_info("y", elem, list(x.shape)), inits)
    return model, {"x": x}


@settings(max_examples=25, deadline=None)
@given(elem=st.sampled_from([T.UINT8, T.INT8]), zp=st.integers(0, 255),
       scale=st.one_of(st.floats(2.0 ** -20, 64.0, width=32), st.sampled_from([1 / 255, 0.5, 1.0, 2.0 ** -20, 3.0])))
def test_threshold_table_is_onnx_runtime_at_every_threshold(elem, zp, scale):
    """The table's thresholds are ONNX Runtime's (its codes at, and next to, each are those the
    numpy oracle says) and the form gives ONNX Runtime's codes there bit for bit."""
    zp = zp + np.iinfo(NP[elem]).min
    model, feeds = _threshold_case(scale, zp, elem)
    want = _run(model, feeds)
    np.testing.assert_array_equal(onnx_runtime_codes(feeds["x"], np.float32(scale), zp, elem), want.astype(np.int64))
    table = thresholds(np.float32([scale]), np.int64([zp]), elem)[0]
    assert table[0] == -np.inf and table[-1] == np.inf and np.all(np.diff(table) > 0)
    np.testing.assert_array_equal(_run(_rewritten(model, {"QuantizeLinear": "threshold_table"}), feeds), want)


@pytest.mark.parametrize("elem", [T.UINT8, T.INT8])
def test_threshold_table_per_axis(elem):
    rng = np.random.default_rng(elem)
    info = np.iinfo(NP[elem])
    model, feeds = _threshold_case(np.exp(rng.uniform(-11, 2, 5)), rng.integers(info.min, info.max + 1, 5), elem, 5)
    want = _run(model, feeds)
    got = _rewritten(model, {"QuantizeLinear": "threshold_table"})
    np.testing.assert_array_equal(_run(got, feeds), want)
    assert want.min() == info.min and want.max() == info.max
    assert {"Gather", "Less", "Where"} <= {n.op_type for n in got.graph.node}
    assert not {"Div", "QuantizeLinear"} & {n.op_type for n in got.graph.node}


@pytest.mark.parametrize("scale", [np.float32(-0.5), np.float32(2.0 ** -110), np.float32(2.0 ** 110)])
def test_threshold_table_refuses_scales_outside_its_range(scale):
    model, _ = _threshold_case(np.float32(0.5), 3, T.UINT8)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(scale, "s"))
    count, blockers = rewrite_quantized(model, {"QuantizeLinear": "threshold_table"}, "R 1.0")
    assert count == 0 and len(blockers) == 1 and "scale outside" in blockers[0][3]


def test_convert_for_target_blocks_or_rewrites_by_the_data():
    """tract 0.23's data asks QuantizeLinear's double division, OpenVINO's the threshold table; a
    QuantizeLinear of a QDQ group's float Conv that ONNX Runtime does not fuse (the Conv's output is
    also read as a graph output) is refused by name for OpenVINO."""
    from rewriter import RewriterError
    from rewriter.convert.for_target import convert_for

    model, feeds = _quantize_case(T.UINT8, True, np.random.default_rng(4))
    model.graph.node[0].name = "quant_in"
    for runtime in ("tract==0.23", "openvino==2026.4", "openvino==2024.6"):
        result, report = convert_for(model, runtime=runtime)
        ops = {n.op_type for n in result.graph.node}
        assert "QuantizeLinear" not in ops and ("Less" in ops) == runtime.startswith("openvino")  # the table
        assert any("quantized node" in n for n in report.target_notes)
        np.testing.assert_array_equal(_run(result, feeds), _run(model, feeds))
    x = helper.make_tensor_value_info("x", T.UINT8, [1, 1, 4, 4])
    qdq = _model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
                  helper.make_node("Conv", ["xf", "w"], ["v"], name="conv"),
                  helper.make_node("QuantizeLinear", ["v", "s", "z"], ["y"], name="quant_out")], [x],
                 helper.make_tensor_value_info("y", T.UINT8, [1, 1, 4, 4]),
                 [("s", np.float32(0.1)), ("z", np.uint8(128)), ("w", np.ones((1, 1, 1, 1), np.float32))])
    qdq.graph.node.insert(0, helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"]))
    qdq.graph.initializer[2].CopyFrom(numpy_helper.from_array(np.full((1, 1, 1, 1), 130, np.uint8), "wq"))
    qdq.graph.output.append(helper.make_tensor_value_info("v", T.FLOAT, [1, 1, 4, 4]))
    for release in ("2026.4", "2024.6"):
        with pytest.raises(RewriterError, match=f"'quant_out'.*QuantizeLinear.*openvino {release}.*float Conv"):
            convert_for(qdq, runtime=f"openvino=={release}")


@pytest.mark.parametrize("runtime,release,forms", [("tract", "0.23", {"QuantizeLinear": "divide_in_double"}),
                                                    ("openvino", "2026.4", {"QLinearConv": "integer"}),
                                                    ("openvino", "2024.6", {"QLinearConv": "integer"})])
def test_forms_in_the_runtime(runtime, release, forms):
    from tests.targets.runtime_runs import run_in

    if "QuantizeLinear" in forms:
        model, feeds = _quantize_case(T.UINT8, True, np.random.default_rng(9))
        feeds["x"] = np.nan_to_num(feeds["x"], nan=0.0)  # the runtimes' NaN paths are not what is measured
    else:
        model, feeds = _conv_case(np.random.default_rng(9), True)
    want = _run(model, feeds)
    result = run_in(runtime, release, _rewritten(model, forms), feeds)
    assert result.get("ok"), result
    np.testing.assert_array_equal(np.asarray(result["values"][0]).reshape(want.shape), want)


@pytest.mark.parametrize("release", ["2026.4", "2024.6"])
@pytest.mark.parametrize("elem,per_axis", [(T.UINT8, False), (T.INT8, False), (T.UINT8, True), (T.INT8, True)])
def test_threshold_table_in_openvino(release, elem, per_axis):
    """OpenVINO computes the threshold table as written: ONNX Runtime's codes at every threshold, its
    neighbours, the ties, NaN and +-inf (where QuantizeLinear itself is a code off at ties)."""
    from tests.targets.runtime_runs import run_in

    rng = np.random.default_rng(elem + 2 * per_axis)
    info = np.iinfo(NP[elem])
    n = 4 if per_axis else 1
    model, feeds = _threshold_case(np.exp(rng.uniform(-10, 1, n)), rng.integers(info.min, info.max + 1, n), elem, n)
    want = _run(model, feeds)
    result = run_in("openvino", release, _rewritten(model, {"QuantizeLinear": "threshold_table"}), feeds)
    assert result.get("ok"), result
    np.testing.assert_array_equal(np.asarray(result["values"][0]).reshape(want.shape), want)


def test_qlinear_conv_scale_in_onnx_runtime_order():
    """x_scale * w_scale / y_scale rounded as ONNX Runtime rounds it: scales where the other order
    (x_scale * (w_scale / y_scale)) rounds one accumulator to another code."""
    rng = np.random.default_rng(0)
    acc = 127 * np.arange(-131, 125, dtype=np.float32)  # w = 127: every x - 131
    for _ in range(50):
        sx, sy = rng.uniform(0.01, 0.1, (2, 20000)).astype(np.float32)
        sw = (rng.uniform(0.001, 0.007, 20000).astype(np.float32) * sy / sx).astype(np.float32)
        ort_order = (sx * sw / sy).astype(np.float32)
        other = (sx * (sw / sy).astype(np.float32)).astype(np.float32)
        differ = np.any(np.round(acc[None] * ort_order[:, None]) != np.round(acc[None] * other[:, None]), axis=1)
        if differ.any():
            k = int(np.argmax(differ))
            sx, sw, sy = sx[k], sw[k], sy[k]
            break
    else:
        pytest.fail("no such scales found")
    x = np.arange(256, dtype=np.uint8).reshape(1, 1, 16, 16)
    inits = [("sx", sx), ("zx", np.uint8(131)), ("w", np.full((1, 1, 1, 1), 127, np.int8)), ("sw", sw), ("zw", np.int8(0)),
             ("sy", sy), ("zy", np.uint8(128))]
    model = _model([helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"])],
                   [helper.make_tensor_value_info("x", T.UINT8, [1, 1, 16, 16])],
                   helper.make_tensor_value_info("y", T.UINT8, [1, 1, 16, 16]), inits)
    np.testing.assert_array_equal(_run(_rewritten(model, {"QLinearConv": "integer"}), {"x": x}), _run(model, {"x": x}))


def test_weights_in_external_data_are_read_from_the_models_directory(tmp_path, monkeypatch):
    """convert --target tract==0.23 on a QLinearConv model whose weights are external data, run from
    another directory: the explicit form reads them relative to the model (not the working directory)."""
    from tests.convert.support.elsewhere import convert_from_elsewhere

    model, feeds = _conv_case(np.random.default_rng(5), True)
    want = _run(model, feeds)
    result = convert_from_elsewhere(model, tmp_path, monkeypatch, "--target", "tract==0.23")
    assert "QLinearConv" not in {n.op_type for n in result.graph.node}
    np.testing.assert_array_equal(_run(result, feeds), want)
