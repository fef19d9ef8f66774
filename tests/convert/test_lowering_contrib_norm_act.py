"""com.microsoft normalizations and activations lowered to standard ONNX, against ONNX Runtime's own
kernels (the oracle) in ONNX Runtime and onnx.reference, within float32 rounding (docs/lowering.md):
every op at an opset below and at/above the standard op it becomes (LayerNormalization-17, Gelu-20,
RMSNormalization-23), float32 and float16, optional inputs and outputs; ONNX Runtime's ONNX-domain
LayerNormalization-1 and SimplifiedLayerNormalization; the named blockers."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto as T, helper

from rewriter.convert.lower_ops import lower_ops
from rewriter.errors import RewriterError
from tests.convert.support.contrib_oracle import com_model, const
from tests.convert.support.lowering_oracle import check_lowering, only_standard, ref_run

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
H = 32
TOL = {"exact_ort": False, "exact_ref": False, "rtol": 1e-5, "atol": 1e-5}
HALF_TOL = {"exact_ort": False, "exact_ref": False, "rtol": 2e-3, "atol": 2e-3}


def _vec(rng, elem=T.FLOAT, n=H):
    return rng.normal(size=n).astype(np.float16 if elem == T.FLOAT16 else np.float32)


def _skip_model(op, elem, rng, *, beta=True, bias=True, sum_out=True, onnx_opset=13):
    simplified = op == "SkipSimplifiedLayerNormalization"
    names = [("X", elem, ["b", "s", H]), ("S", elem, ["b", "s", H]), "g"]
    inits = [const("g", _vec(rng, elem), _vec(rng, elem).dtype)]
    if not simplified:
        names.append("beta" if beta else "")
        if beta:
            inits.append(const("beta", _vec(rng, elem), _vec(rng, elem).dtype))
    if bias:
        names.append("bias")
        inits.append(const("bias", _vec(rng, elem), _vec(rng, elem).dtype))
    outs = [("Y", elem, ["b", "s", H])] + ([("Sum", elem, ["b", "s", H])] if sum_out else [])
    model = com_model(op, names, outs, initializers=inits, onnx_opset=onnx_opset, epsilon=1e-5)
    if sum_out:
        model.graph.node[0].output[:] = ["Y", "", "", "Sum"]
    return model


def _feeds(rng, elem, shape=(2, 5, H), names=("X", "S")):
    dtype = np.float16 if elem == T.FLOAT16 else np.float32
    return {n: (rng.normal(size=shape) * 2).astype(dtype) for n in names}


@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
@pytest.mark.parametrize("opset", [None, 17, 23])
@pytest.mark.parametrize("elem", [T.FLOAT, T.FLOAT16])
@pytest.mark.parametrize("optional", [(True, True, True), (False, False, False), (True, False, True)])
def test_skip_layer_norm(op, opset, elem, optional):
    rng = np.random.default_rng(1)
    beta, bias, sum_out = optional
    model = _skip_model(op, elem, rng, beta=beta, bias=bias, sum_out=sum_out)
    check_lowering(model, _feeds(rng, elem), opset=opset, **(TOL if elem == T.FLOAT else HALF_TOL))


def test_skip_layer_norm_broadcasts_a_smaller_skip():
    rng = np.random.default_rng(2)
    model = _skip_model("SkipLayerNormalization", T.FLOAT, rng, sum_out=False)
    model.graph.input[1].CopyFrom(helper.make_tensor_value_info("S", T.FLOAT, ["s", H]))
    check_lowering(model, {"X": _feeds(rng, T.FLOAT)["X"], "S": rng.normal(size=(5, H)).astype(np.float32)}, **TOL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.integers(1, 6), st.floats(1e-12, 1e-2), st.floats(0.01, 100), st.integers(0, 2 ** 32 - 1))
def test_skip_layer_norm_any_values(batch, seq, eps, spread, seed):
    rng = np.random.default_rng(seed)
    model = _skip_model("SkipLayerNormalization", T.FLOAT, rng)
    model.graph.node[0].attribute[0].f = eps
    feeds = {n: (rng.normal(size=(batch, seq, H)) * spread).astype(np.float32) for n in ("X", "S")}
    check_lowering(model, feeds, **TOL)


def test_skip_layer_norm_refuses_the_statistics_outputs():
    model = _skip_model("SkipLayerNormalization", T.FLOAT, np.random.default_rng(0), sum_out=False)
    model.graph.node[0].output[:] = ["Y", "M"]
    model.graph.output.append(helper.make_tensor_value_info("M", T.FLOAT, None))
    with pytest.raises(RewriterError, match="never writes it"):
        lower_ops(model)


def _embed_model(rng, *, segment=True, mask=True, positions=False, sum_out=False):
    names = [("ids", T.INT32, ["b", "s"]), ("seg", T.INT32, ["b", "s"]) if segment else "", "word", "pos",
             "segemb" if segment else "", "g", "beta", ("mask", T.INT32, ["b", "s"]) if mask else ""]
    if positions:
        names.append(("posids", T.INT32, [1, "s"]))
    inits = [const("word", rng.normal(size=(50, H)), np.float32), const("pos", rng.normal(size=(16, H)), np.float32),
             const("segemb", rng.normal(size=(2, H)), np.float32), const("g", _vec(rng), np.float32),
             const("beta", _vec(rng), np.float32)]
    outs = [("Y", T.FLOAT, ["b", "s", H]), ("MI", T.INT32, ["b"])]
    outs += [("E", T.FLOAT, ["b", "s", H])] if sum_out else []
    return com_model("EmbedLayerNormalization", names, outs, initializers=inits, epsilon=1e-12)


@pytest.mark.parametrize("segment,mask,positions,sum_out", [(True, True, False, False), (False, False, False, True),
                                                             (True, True, True, True)])
def test_embed_layer_norm(segment, mask, positions, sum_out):
    rng = np.random.default_rng(3)
    model = _embed_model(rng, segment=segment, mask=mask, positions=positions, sum_out=sum_out)
    feeds = {"ids": rng.integers(0, 50, size=(3, 7)).astype(np.int32)}
    if segment:
        feeds["seg"] = rng.integers(0, 2, size=(3, 7)).astype(np.int32)
    if mask:
        feeds["mask"] = np.array([[1] * 7, [1] * 4 + [0] * 3, [1, 0, 1, 1, 2, 0, 1]], np.int32)
    if positions:
        feeds["posids"] = np.array([[3, 1, 4, 1, 5, 9, 2]], np.int32)
    check_lowering(model, feeds, **TOL)


def _unary_model(op, elem, rng, bias=False, skip=False, **attrs):
    names = [("X", elem, ["b", "s", H])] + (["bias"] if bias else []) + ([("S", elem, ["b", "s", H])] if skip else [])
    inits = [const("bias", _vec(rng, elem), _vec(rng, elem).dtype)] if bias else []
    width = H // 2 if op == "BiasSplitGelu" else H
    return com_model(op, names, [("Y", elem, ["b", "s", width])], initializers=inits, **attrs)


@pytest.mark.parametrize("op,bias,attrs", [("Gelu", False, {}), ("BiasGelu", True, {}), ("FastGelu", True, {}),
                                           ("FastGelu", False, {}), ("QuickGelu", False, {}),
                                           ("QuickGelu", False, {"alpha": -0.7})])
@pytest.mark.parametrize("opset", [None, 20])
@pytest.mark.parametrize("elem", [T.FLOAT, T.FLOAT16, T.DOUBLE])
def test_gelu_family(op, bias, attrs, opset, elem):
    if elem == T.DOUBLE and (op in ("Gelu", "BiasGelu") or op == "FastGelu" and bias):
        pytest.skip("onnxruntime runs no double Gelu, BiasGelu or FastGelu with bias (no double Erf): no oracle")
    rng = np.random.default_rng(4)
    model = _unary_model(op, elem, rng, bias=bias, **attrs)
    dtype = {T.FLOAT: np.float32, T.FLOAT16: np.float16, T.DOUBLE: np.float64}[elem]
    x = (rng.normal(size=(2, 5, H)) * 3).astype(dtype)
    x[0, 0, :4] = [0, -0.0, 8, -8]
    if elem == T.DOUBLE:
        bias_ = model.graph.initializer
        for t in bias_:
            t.CopyFrom(const(t.name, onnx.numpy_helper.to_array(t), np.float64))
    check_lowering(model, {"X": x}, opset=opset, **(HALF_TOL if elem == T.FLOAT16 else TOL))


def _numpy_gelu(v):
    from math import erf, sqrt

    return 0.5 * v * (1 + np.vectorize(erf)(v / sqrt(2)))


@pytest.mark.parametrize("opset", [None, 20])
def test_bias_add_and_bias_split_gelu_by_their_formula(opset):
    """ONNX Runtime has no CPU kernel for these two: the documented formula, in float64, is the oracle."""
    rng = np.random.default_rng(5)
    x, s = (rng.normal(size=(2, 5, H)).astype(np.float32) for _ in range(2))
    model = _unary_model("BiasAdd", T.FLOAT, rng, bias=True, skip=True)
    b = onnx.numpy_helper.to_array(model.graph.initializer[0])
    lowered = lower_ops(model, opset=opset)[0]
    onnx.checker.check_model(lowered, full_check=True)
    assert only_standard(lowered)
    np.testing.assert_allclose(ref_run(lowered, {"X": x, "S": s})[0], (x + b) + s, rtol=1e-6)
    model = _unary_model("BiasSplitGelu", T.FLOAT, rng, bias=True)
    b = onnx.numpy_helper.to_array(model.graph.initializer[0]).astype(np.float64)
    lowered = lower_ops(model, opset=opset)[0]
    onnx.checker.check_model(lowered, full_check=True)
    v = x.astype(np.float64) + b
    np.testing.assert_allclose(ref_run(lowered, {"X": x})[0], v[..., :H // 2] * _numpy_gelu(v[..., H // 2:]),
                               rtol=1e-5, atol=1e-6)


def _onnx_domain_norm(op, onnx_opset, axis=-1, stats=False):
    rng = np.random.default_rng(6)
    inputs = [helper.make_tensor_value_info("X", T.FLOAT, [2, 3, H])]
    inits = [const("g", _vec(rng), np.float32)] + ([] if op == "SimplifiedLayerNormalization" else
                                                   [const("b", _vec(rng), np.float32)])
    outs = ["Y"] + (["M", "I"] if stats and op == "LayerNormalization" else ["I"] if stats else [])
    node = helper.make_node(op, ["X"] + [t.name for t in inits], outs, axis=axis, epsilon=1e-5)
    shapes = {"Y": [2, 3, H], "M": [2, 3, 1], "I": [2, 3, 1]}
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(o, T.FLOAT, shapes[o]) for o in outs],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", onnx_opset)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("op", ["LayerNormalization", "SimplifiedLayerNormalization"])
@pytest.mark.parametrize("onnx_opset,opset", [(11, None), (13, None), (13, 17), (13, 23)])
@pytest.mark.parametrize("stats", [False, True])
def test_onnxruntime_onnx_domain_norms(op, onnx_opset, opset, stats):
    """What onnxruntime.transformers.optimizer writes in domain "" below opset 17 (and genai always)."""
    rng = np.random.default_rng(7)
    x = (rng.normal(size=(2, 3, H)) * 3 + 1).astype(np.float32)
    model = _onnx_domain_norm(op, onnx_opset, stats=stats)
    if stats and op == "LayerNormalization" and opset == 23:
        pytest.skip("the statistics of LayerNormalization at 23 are the standard op's")
    check_lowering(model, {"X": x}, opset=opset, **TOL)


def test_standard_layer_norm_is_left_alone():
    model = _onnx_domain_norm("LayerNormalization", 17)
    lowered, report = lower_ops(model)
    assert [n.op_type for n in lowered.graph.node] == ["LayerNormalization"] and not report.changed
