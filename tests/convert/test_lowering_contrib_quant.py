"""com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu and QLinearConcat lowered to
standard ONNX: the same integers as ONNX Runtime's kernel (the original run by ONNX Runtime is the
oracle), in ONNX Runtime and in onnx.reference, for random scales and zero points, every input
byte, saturation at both ends, every broadcast layout (static and decided at run time)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto as T, helper

from rewriter.convert.lower_ops import lower_ops
from rewriter.convert.lowering.contrib_quant import input0_is_span_scalar
from rewriter.errors import RewriterError
from tests.convert.support.contrib_oracle import NP, com_model, every_byte, qparams, random_q
from tests.convert.support.lowering_oracle import check_lowering

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
Q8 = [T.UINT8, T.INT8]
SCALES = st.floats(2.0 ** -8, 8.0, width=32)
LAYOUTS = [([16, 16], [16, 16]), ([16, 16], [16, 1]), ([16, 1], [16, 16]), ([1], [1]), ([], [40]), ([3, 1], []),
           ([5], []), ([2, 1, 1], [1, 1, 7]), ([4, 1, 3], [5, 1])]


def _binary(op, elem, shape_a, shape_b, sa, za, sb, zb, sc, zc, dynamic=False):
    out = list(np.broadcast_shapes(tuple(shape_a), tuple(shape_b)))
    dims = (lambda s, p: [f"{p}{i}" for i in range(len(s))]) if dynamic else (lambda s, p: list(s))
    inits = qparams("a", sa, za, elem) + qparams("b", sb, zb, elem) + qparams("c", sc, zc, elem)
    return com_model(op, [("A", elem, dims(shape_a, "a")), "a_s", "a_z", ("B", elem, dims(shape_b, "b")), "b_s", "b_z",
                          "c_s", "c_z"], [("C", elem, dims(out, "c"))], initializers=inits)


def _zp(rng, elem):
    info = np.iinfo(NP[elem])
    return int(rng.integers(info.min, info.max + 1))


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("elem", Q8)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dynamic", [False, True])
def test_binary_every_layout(op, elem, layout, dynamic):
    rng = np.random.default_rng(zlib.crc32(repr((op, elem, str(layout), dynamic)).encode()))
    for _ in range(4):
        sa, sb, sc = (np.float32(np.exp(rng.uniform(-6, 1))) for _ in range(3))
        model = _binary(op, elem, *layout, sa, _zp(rng, elem), sb, _zp(rng, elem), sc, _zp(rng, elem), dynamic)
        check_lowering(model, {"A": random_q(rng, elem, layout[0]), "B": random_q(rng, elem, layout[1])})


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("elem", Q8)
def test_binary_every_pair_of_bytes(op, elem):
    """All 65536 (a, b) pairs: the fused multiply-add's rounding (QLinearAdd) and the saturation."""
    rng = np.random.default_rng(3)
    a = np.repeat(every_byte(elem), 256).reshape(256, 256)
    b = np.tile(every_byte(elem), 256).reshape(256, 256)
    for _ in range(6):
        sa, sb, sc = (np.float32(np.exp(rng.uniform(-6, 1))) for _ in range(3))
        model = _binary(op, elem, [256, 256], [256, 256], sa, _zp(rng, elem), sb, _zp(rng, elem), sc, _zp(rng, elem))
        check_lowering(model, {"A": a, "B": b})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["QLinearAdd", "QLinearMul"]), st.sampled_from(Q8), SCALES, SCALES, SCALES,
       st.integers(0, 2 ** 32 - 1), st.sampled_from(LAYOUTS[:4]))
def test_binary_any_scales(op, elem, sa, sb, sc, seed, layout):
    rng = np.random.default_rng(seed)
    info = np.iinfo(NP[elem])
    zps = [int(rng.choice([info.min, info.max, _zp(rng, elem)])) for _ in range(3)]
    model = _binary(op, elem, *layout, sa, zps[0], sb, zps[1], sc, zps[2])
    check_lowering(model, {"A": random_q(rng, elem, layout[0]), "B": random_q(rng, elem, layout[1])})


def test_add_far_beyond_int32_gives_the_minimum():
    """A value over 2^31 converts to the 'integer indefinite', which packs to the type's minimum."""
    model = _binary("QLinearAdd", T.INT8, [4], [4], 1.0, 0, 1.0, 0, 2.0 ** -26, 0)
    check_lowering(model, {"A": np.array([127, 1, -128, 0], np.int8), "B": np.array([127, 0, -128, 0], np.int8)})


def test_span_scalar_follows_onnxruntime_broadcaster():
    assert input0_is_span_scalar([4, 4], [4, 4]) is False
    assert input0_is_span_scalar([4, 1], [4, 4]) is True
    assert input0_is_span_scalar([1, 1], [1, 1]) is True
    assert input0_is_span_scalar([], [3]) is True
    assert input0_is_span_scalar([3, 1], []) is True and input0_is_span_scalar([1, 3], []) is False
    assert input0_is_span_scalar([2, 1, 1], [1, 1, 7]) is True
    assert input0_is_span_scalar(["n", 4], ["n", 4]) is False
    assert input0_is_span_scalar([1, "n"], [3, 4]) is None and input0_is_span_scalar(None, [3]) is None
    assert input0_is_span_scalar([1, 1], [1, "w"]) is None


def test_add_refuses_an_unknown_rank_and_scales_not_constant():
    model = _binary("QLinearAdd", T.UINT8, [4], [4], 0.1, 1, 0.2, 2, 0.3, 3)
    model.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(RewriterError, match="rank of A or B is unknown"):
        lower_ops(model)
    model = _binary("QLinearAdd", T.UINT8, [4], [4], 0.1, 1, 0.2, 2, 0.3, 3)
    model.graph.input.append(helper.make_tensor_value_info("a_s", T.FLOAT, []))  # overridable: no constant
    with pytest.raises(RewriterError, match="not a constant in scope"):
        lower_ops(model)


def _table_model(op, elem, sx, zx, sy, zy, **attrs):
    inits = qparams("x", sx, zx, elem) + qparams("y", sy, zy, elem)
    return com_model(op, [("X", elem, [256]), "x_s", "x_z", "y_s", "y_z"], [("Y", elem, [256])], initializers=inits,
                     **attrs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["QLinearSigmoid", "QLinearLeakyRelu"]), st.sampled_from(Q8),
       st.floats(2.0 ** -10, 4.0, width=32), st.floats(2.0 ** -10, 1.0, width=32), st.integers(0, 2 ** 32 - 1),
       st.sampled_from([None, 0.01, 0.3, -1.5]))
def test_table_ops_every_byte(op, elem, sx, sy, seed, alpha):
    """The kernel's table, each of its 256 entries read once (MLAS's logistic bit for bit)."""
    rng = np.random.default_rng(seed)
    attrs = {"alpha": alpha} if op == "QLinearLeakyRelu" and alpha is not None else {}
    model = _table_model(op, elem, sx, _zp(rng, elem), sy, _zp(rng, elem), **attrs)
    check_lowering(model, {"X": every_byte(elem)})


@pytest.mark.parametrize("elem", Q8)
def test_concat_requantizes_each_input_by_its_table_and_copies_equal_ones(elem):
    rng = np.random.default_rng(4)
    for _ in range(5):
        params = [(np.float32(np.exp(rng.uniform(-5, 0))), _zp(rng, elem)) for _ in range(3)]
        params[2] = params[0]  # the third input shares Y's parameters: copied
        inits = qparams("y", *params[0], elem) + qparams("p", *params[1], elem) + qparams("q", *params[2], elem)
        model = com_model("QLinearConcat", ["y_s", "y_z", ("A", elem, [2, 256]), "p_s", "p_z", ("B", elem, [2, 3]),
                                            "q_s", "q_z"], [("Y", elem, [2, 259])], initializers=inits, axis=1)
        a = np.stack([every_byte(elem), every_byte(elem)[::-1]])
        check_lowering(model, {"A": a, "B": random_q(rng, elem, [2, 3])})


def test_concat_refuses_a_missing_axis():
    inits = qparams("y", 0.1, 0, T.UINT8) + qparams("p", 0.2, 1, T.UINT8)
    model = com_model("QLinearConcat", ["y_s", "y_z", ("A", T.UINT8, [2]), "p_s", "p_z"], [("Y", T.UINT8, [2])],
                      initializers=inits)
    with pytest.raises(RewriterError, match="axis"):
        lower_ops(model)


def _qmul_integers(ratio, zc, elem, prod):
    info = np.iinfo(NP[elem])
    u = (prod.astype(np.float32) * np.float32(ratio)).astype(np.float32) + np.float32(zc)
    return np.clip(np.round(u.astype(np.float32)), info.min, info.max)


def test_mul_rounds_the_scale_ratio_as_the_kernel_does():
    """Scales where (sA * sB) / sC and sA * (sB / sC) round apart and that changes an output: found
    by search, then checked against ONNX Runtime (the kernel's order is the first)."""
    rng = np.random.default_rng(11)
    a = np.repeat(every_byte(T.UINT8), 256).reshape(256, 256)
    b = np.tile(every_byte(T.UINT8), 256).reshape(256, 256)
    for _ in range(2000):
        sa, sb, sc = (np.float32(np.exp(rng.uniform(-6, 1))) for _ in range(3))
        za, zb, zc = (int(rng.integers(0, 256)) for _ in range(3))
        first, other = np.float32(np.float32(sa * sb) / sc), np.float32(sa * np.float32(sb / sc))
        prod = (a.astype(np.int32) - za) * (b.astype(np.int32) - zb)
        if first != other and not np.array_equal(_qmul_integers(first, zc, T.UINT8, prod),
                                                  _qmul_integers(other, zc, T.UINT8, prod)):
            break
    else:
        pytest.fail("no distinguishing scales found")
    check_lowering(_binary("QLinearMul", T.UINT8, [256, 256], [256, 256], sa, za, sb, zb, sc, zc), {"A": a, "B": b})


def _logistic_without_fma(x):
    from rewriter.convert.lowering import contrib_mlas as m

    v = np.minimum(np.float32(18), np.maximum(np.float32(-18), x)).astype(np.float32)
    x2 = (v * v).astype(np.float32)
    p = (x2 * m._ALPHA[0] + m._ALPHA[1]).astype(np.float32)
    for c in m._ALPHA[2:]:
        p = (x2 * p + c).astype(np.float32)
    q = (x2 * m._BETA[0] + m._BETA[1]).astype(np.float32)
    for c in m._BETA[2:]:
        q = (x2 * q + c).astype(np.float32)
    return np.maximum(np.float32(0), ((v * p).astype(np.float32) / q).astype(np.float32) + np.float32(0.5))


def test_sigmoid_table_uses_fused_multiply_adds():
    """Scales where MLAS's FMA3 logistic and the same polynomial without fused multiply-adds quantize
    differently: the lowering must give ONNX Runtime's entry."""
    from rewriter.convert.lowering.contrib_common import quantize_values
    from rewriter.convert.lowering.contrib_mlas import logistic

    rng = np.random.default_rng(12)
    x = np.arange(256).astype(np.float32)
    for _ in range(5000):
        sx, sy = np.float32(np.exp(rng.uniform(-8, -2))), np.float32(np.exp(rng.uniform(-12, -7)))
        zx, zy = int(rng.integers(0, 256)), int(rng.integers(0, 256))
        v = (sx * (x - zx)).astype(np.float32)
        if not np.array_equal(quantize_values(logistic(v), sy, zy, T.UINT8),
                              quantize_values(_logistic_without_fma(v), sy, zy, T.UINT8)):
            break
    else:
        pytest.fail("no distinguishing scales found")
    check_lowering(_table_model("QLinearSigmoid", T.UINT8, sx, zx, sy, zy), {"X": every_byte(T.UINT8)})


def test_concat_requantizes_an_input_of_equal_scale_and_other_zero_point():
    inits = qparams("y", 0.05, 10, T.UINT8) + qparams("p", 0.05, 30, T.UINT8)
    model = com_model("QLinearConcat", ["y_s", "y_z", ("A", T.UINT8, [1, 256]), "p_s", "p_z"],
                      [("Y", T.UINT8, [1, 256])], initializers=inits, axis=1)
    check_lowering(model, {"A": every_byte(T.UINT8).reshape(1, 256)})


def test_scales_in_external_data_are_read_from_the_models_directory(tmp_path, monkeypatch):
    """A QLinearAdd whose scales and zero points are external data, converted for tract from another
    directory: the lowering reads the constants relative to the model, as its kernel does."""
    import onnxruntime as ort

    from tests.convert.support.elsewhere import convert_from_elsewhere

    model = _binary("QLinearAdd", T.UINT8, [16, 16], [16, 1], 0.05, 3, 0.02, 200, 0.07, 128)
    rng = np.random.default_rng(6)
    feeds = {"A": random_q(rng, T.UINT8, [16, 16]), "B": random_q(rng, T.UINT8, [16, 1])}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    result = convert_from_elsewhere(model, tmp_path, monkeypatch, "--target", "tract==0.23")
    assert all(n.domain in ("", "ai.onnx") for n in result.graph.node)
    got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)


def test_qmul_product_not_fusable_into_a_multiply_add():
    """The zero point's Add never takes the ratio's Mul directly: OpenVINO's CPU plugin fused such a pair
    (constant operands, static shapes) into one multiply-add rounded once, and piper_tashkeel_qdq's logits
    differed from ONNX Runtime's (relative L2 0.0079); an identity Max in between keeps the two roundings."""
    lowered, _ = lower_ops(_binary("QLinearMul", T.UINT8, [4, 4], [4, 4], np.float32(0.03), 3, np.float32(0.02), 7,
                                   np.float32(0.05), 129))
    nodes = lowered.graph.node
    made_by = {o: n for n in nodes for o in n.output}
    adds = [n for n in nodes if n.op_type == "Add"]
    assert adds and all(made_by[i].op_type != "Mul" for n in adds for i in n.input if i in made_by)
    maxes = [n for n in nodes if n.op_type == "Max"]
    assert len(maxes) == 1 and made_by[maxes[0].input[0]].op_type == "Mul"


def test_add_writes_the_span_order_only_when_the_tables_differ():
    """With dims unknown when converting, ONNX Runtime's span order (which input is the FMA's scalar)
    is decided at run time (Where over the two tables); when both orders round every pair alike (the
    common case: nudenet_320n_qop's adds), one table is written and no Where (LiteRT refused a Where of
    a scalar condition on uint8 codes: "has_low_rank_input_condition")."""
    from rewriter.convert.lowering.contrib_quant import add_table

    rng = np.random.default_rng(11)
    cases = {True: (0.1, 0, 0.1, 0, 0.1, 0), False: (0.23000059, 171, 0.18409485, 117, 0.03636105, 255)}
    for same, (sa, za, sb, zb, sc, zc) in cases.items():
        ra, rb = np.float32(np.float32(sa) / np.float32(sc)), np.float32(np.float32(sb) / np.float32(sc))
        tables = [add_table(T.UINT8, (ra, za), (rb, zb), zc, order) for order in (False, True)]
        assert np.array_equal(*tables) == same  # (the premise of each case)
        model = _binary("QLinearAdd", T.UINT8, [16, 16], [16, 1], np.float32(sa), za, np.float32(sb), zb,
                        np.float32(sc), zc, dynamic=True)
        lowered = check_lowering(model, {"A": random_q(rng, T.UINT8, [16, 16]), "B": random_q(rng, T.UINT8, [16, 1])})
        ops = [n.op_type for n in lowered.graph.node]
        assert ("Where" in ops) == (not same) and ops.count("Gather") == (1 if same else 2 + 3), ops
