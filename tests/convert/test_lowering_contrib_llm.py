"""com.microsoft ops of LLM exports lowered to standard ONNX, against ONNX Runtime's CPU kernels (the
oracle) in ONNX Runtime and onnx.reference, within float32 rounding: MatMulNBits (2/4/8 bits, zero
points or not, a partial last block, bias; DequantizeLinear-21 blocks from opset 21, float weights
below), RotaryEmbedding (3D/4D, interleaved, partial rotation, position ids or an offset; the
standard op from opset 23), GroupQueryAttention (packed or separate QKV, rotary, first prompt,
token generation and a later prompt, local window, softcap, KV groups; Attention-23 from 23)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T

from rewriter.convert.lower_ops import lower_ops
from rewriter.errors import RewriterError
from tests.convert.support.contrib_oracle import com_model, const
from tests.convert.support.lowering_oracle import check_lowering, ort_run

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TOL = {"exact_ort": False, "exact_ref": False, "rtol": 1e-5, "atol": 1e-5}


def _nbits(rng, bits, k, n, block, *, zp=True, bias=False, a_shape=("m",), elem=T.FLOAT, **extra):
    blocks = -(-k // block)
    floats = np.float32 if elem == T.FLOAT else np.float16
    names = [("A", elem, [*a_shape, k]), "B", "S"]
    inits = [const("B", rng.integers(0, 256, size=(n, blocks, block * bits // 8)), np.uint8),
             const("S", rng.random(n * blocks) * 0.1 + 0.01, floats)]
    if zp:
        names.append("Z")
        inits.append(const("Z", rng.integers(0, 256, size=n * -(-blocks * bits // 8)), np.uint8))
    if bias:
        names += [""] * (4 - len(names)) + ["", "bias"]
        inits.append(const("bias", rng.normal(size=n), floats))
    attrs = {"K": k, "N": n, "bits": bits, "block_size": block, "accuracy_level": 0, **extra}
    return com_model("MatMulNBits", names, [("Y", elem, [*a_shape, n])], initializers=inits, **attrs)


@pytest.mark.parametrize("bits,k,n,block", [(4, 64, 32, 32), (4, 70, 20, 16), (8, 48, 16, 16), (2, 64, 8, 32)])
@pytest.mark.parametrize("zp", [True, False])
@pytest.mark.parametrize("opset", [None, 21])
def test_matmul_nbits(bits, k, n, block, zp, opset):
    rng = np.random.default_rng(bits * 100 + k)
    model = _nbits(rng, bits, k, n, block, zp=zp, bias=bits == 4 and zp)
    lowered = check_lowering(model, {"A": rng.normal(size=(3, k)).astype(np.float32)}, opset=opset, **TOL)
    ops = {nd.op_type for nd in lowered.graph.node}
    assert ("DequantizeLinear" in ops) == (opset == 21 and bits in (4, 8))


LEVEL4 = [(4, 64, 32, 32, ("m",)), (4, 70, 20, 16, ("b", "s")), (8, 48, 16, 16, ("b", "s")), (2, 64, 8, 32, ()),
          (4, 256, 24, 128, ("b", "s"))]


@pytest.mark.parametrize("bits,k,n,block,a_shape", LEVEL4)
@pytest.mark.parametrize("opset", [None, 21])
def test_matmul_nbits_level_4_quantizes_the_activations_as_onnx_runtime_does(bits, k, n, block, a_shape, opset):
    """At accuracy_level 4 ONNX Runtime (1.19 and later, x86-64) quantizes A to int8 per block before the
    product: float weights alone are about 5e-3 (relative L2) from it, the lowering within float32
    rounding, in ONNX Runtime (graph optimizations off: they fuse the blocks back) and onnx.reference.
    Rank 1 to 3, a partial last block (70 = 4 x 16 + 6), an all-zero block, zero points or not."""
    rng = np.random.default_rng(bits * 1000 + k)
    model = _nbits(rng, bits, k, n, block, zp=k != 64, bias=bits == 4, a_shape=a_shape, accuracy_level=4)
    a = rng.normal(size=(*((2, 3)[:len(a_shape)]), k)).astype(np.float32)
    a[..., :block] = 0  # (max |a| = 0: codes 0, not 0 * inf)
    lowered = check_lowering(model, {"A": a}, opset=opset, **TOL)
    ops = [nd.op_type for nd in lowered.graph.node]
    assert "GlobalMaxPool" in ops
    assert ops.count("GreaterOrEqual") == 2  # (127 / max|a| and max|a| / 127 both written correctly rounded)
    plain = _nbits(np.random.default_rng(bits * 1000 + k), bits, k, n, block, zp=k != 64, bias=bits == 4,
                   a_shape=a_shape)
    level0 = ort_run(lower_ops(plain, opset=opset)[0], {"A": a})[0]
    level4 = ort_run(model, {"A": a})[0]
    assert np.linalg.norm(level0 - level4) / np.linalg.norm(level4) > 1e-3  # (the activations' own error)


def test_matmul_nbits_level_4_rounds_ties_to_even():
    """max |a| = 127 makes the scale 1: codes are a rounded, 2.5 -> 2, 3.5 -> 4, -0.5 -> -0 (the
    kernel's _mm256_round_ps), against ONNX Runtime bit for bit."""
    model = _nbits(np.random.default_rng(3), 4, 16, 4, 16, zp=False, a_shape=(), accuracy_level=4)
    a = np.array([127, 2.5, 3.5, -0.5, 0.5, 1.5, -2.5, 4.5, 5.5, -126.5, 6.5, 7.5, 8.5, 9.5, 10.5, -11.5], np.float32)
    lowered = check_lowering(model, {"A": a}, **TOL)
    b = lower_ops(_nbits(np.random.default_rng(3), 4, 16, 4, 16, zp=False, a_shape=()))[0]
    away = np.where(a - np.floor(a) == 0.5, np.floor(a) + (a > 0), np.round(a)).astype(np.float32)
    assert not np.allclose(ort_run(b, {"A": away})[0], ort_run(lowered, {"A": a})[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ort_run(b, {"A": np.round(a)})[0], ort_run(lowered, {"A": a})[0], rtol=1e-6, atol=1e-6)


def test_matmul_nbits_level_4_float16():
    """A float16 A is widened, quantized, multiplied and the bias added in float32, then narrowed (the
    kernel's order); float16 weights and sums would be 1e-3 off."""
    rng = np.random.default_rng(16)
    model = _nbits(rng, 4, 64, 16, 32, bias=True, a_shape=("b", "s"), elem=T.FLOAT16, accuracy_level=4)
    a = rng.normal(size=(2, 3, 64)).astype(np.float16)
    lowered = check_lowering(model, {"A": a}, exact_ort=False, exact_ref=False, rtol=2e-3, atol=2e-3)
    got, want = ort_run(lowered, {"A": a})[0], ort_run(model, {"A": a})[0]
    assert got.dtype == np.float16
    assert np.count_nonzero(got != want) <= 2, (got, want)  # (float16 rounding of one sum at most, measured 0-1)


def test_matmul_nbits_level_4_rank_4_is_refused_by_name():
    model = _nbits(np.random.default_rng(0), 4, 32, 8, 16, a_shape=("a", "b", "c"), accuracy_level=4)
    with pytest.raises(RewriterError, match=r"accuracy_level 4: A of rank 4"):
        lower_ops(model)


@pytest.mark.parametrize("bits", [4, 8])
def test_matmul_nbits_for_tract_as_float_weights(bits):
    """tract 0.23 refuses a blocked DequantizeLinear (uint4: no such type; uint8: no blocks): convert --target
    tract==0.23 folds the lowering's blocks to float weights and leaves no code tensor; tract runs it."""
    from rewriter.convert.for_target import convert_for
    from tests.targets.runtime_runs import run_in

    rng = np.random.default_rng(bits)
    model = _nbits(rng, bits, 64, 16, 32, bias=True)
    model.opset_import[0].version = 21
    feeds = {"A": rng.normal(size=(3, 64)).astype(np.float32)}
    result, _ = convert_for(model, runtime="tract==0.23")
    assert {nd.op_type for nd in result.graph.node} <= {"MatMul", "Add", "Identity"}
    assert all(t.data_type == T.FLOAT for t in result.graph.initializer)
    import onnxruntime as ort

    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = ort.InferenceSession(result.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    ran = run_in("tract", "0.23", result, feeds)
    assert ran.get("ok"), ran
    np.testing.assert_allclose(np.asarray(ran["values"][0]).reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change,match", [({"weight_prepacked": 1}, "weight_prepacked"), ({"bits": 3}, "bits=3")])
def test_matmul_nbits_blockers(change, match):
    args = {"bits": 4, **change}
    model = _nbits(np.random.default_rng(0), args.pop("bits"), 32, 8, 16, **args)
    with pytest.raises(RewriterError, match=match):
        lower_ops(model)


def test_matmul_nbits_refuses_float_zero_points_and_act_order():
    rng = np.random.default_rng(1)
    model = _nbits(rng, 4, 32, 8, 16, zp=False)
    model.graph.node[0].input.append("Zf")
    model.graph.initializer.append(const("Zf", np.full(16, 8.0), np.float32))
    with pytest.raises(RewriterError, match="float zero points"):
        lower_ops(model)
    model = _nbits(rng, 4, 32, 8, 16)
    model.graph.node[0].input.append("g")
    model.graph.initializer.append(const("g", np.arange(32) // 16, np.int32))
    with pytest.raises(RewriterError, match="g_idx"):
        lower_ops(model)


@pytest.mark.parametrize("rank,interleaved,rot,offset", [(3, 0, 0, False), (3, 1, 0, False), (4, 0, 0, False),
                                                         (4, 1, 0, True), (3, 0, 8, False), (3, 1, 8, True)])
@pytest.mark.parametrize("opset", [None, 23])
def test_rotary_embedding(rank, interleaved, rot, offset, opset):
    rng = np.random.default_rng(rank * 10 + interleaved)
    b, s, heads, head = 2, 5, 2, 16
    width = rot or head
    shape = [b, s, heads * head] if rank == 3 else [b, heads, s, head]
    pos_shape = [1] if offset else [b, s]
    attrs = {"interleaved": interleaved}
    if rot:
        attrs.update(rotary_embedding_dim=rot, num_heads=heads)
    caches = [const(c, rng.normal(size=(32, width // 2)), np.float32) for c in ("cos", "sin")]
    model = com_model("RotaryEmbedding", [("X", T.FLOAT, shape), ("P", T.INT64, pos_shape), "cos", "sin"],
                      [("Y", T.FLOAT, shape)], initializers=caches, **attrs)
    feeds = {"X": rng.normal(size=shape).astype(np.float32), "P": rng.integers(0, 20, size=pos_shape).astype(np.int64)}
    check_lowering(model, feeds, opset=opset, **TOL)


def _gqa(rng, *, b=1, s=5, past=0, heads=4, kv=2, head=16, packed=True, rotary=True, **attrs):
    width = (heads + 2 * kv) * head if packed else heads * head
    names = [("Q", T.FLOAT, ["b", "s", width])]
    feeds = {"Q": rng.normal(size=(b, s, width)).astype(np.float32)}
    if packed:
        names += ["", ""]
    else:
        names += [("K", T.FLOAT, ["b", "s", kv * head]), ("V", T.FLOAT, ["b", "s", kv * head])]
        feeds.update(K=rng.normal(size=(b, s, kv * head)).astype(np.float32),
                     V=rng.normal(size=(b, s, kv * head)).astype(np.float32))
    names += [("PK", T.FLOAT, ["b", kv, "p", head]), ("PV", T.FLOAT, ["b", kv, "p", head]),
              ("SL", T.INT32, ["b"]), ("TL", T.INT32, [])]
    feeds.update(PK=rng.normal(size=(b, kv, past, head)).astype(np.float32),
                 PV=rng.normal(size=(b, kv, past, head)).astype(np.float32),
                 SL=np.full(b, past + s - 1, np.int32), TL=np.array(past + s, np.int32))
    inits = []
    if rotary:
        names += ["cos", "sin"]
        inits = [const(c, rng.normal(size=(64, head // 2)), np.float32) for c in ("cos", "sin")]
        attrs.setdefault("do_rotary", 1)
    outs = [("Y", T.FLOAT, ["b", "s", heads * head]), ("PresK", T.FLOAT, ["b", kv, "t", head]),
            ("PresV", T.FLOAT, ["b", kv, "t", head])]
    model = com_model("GroupQueryAttention", names, outs, initializers=inits, num_heads=heads, kv_num_heads=kv, **attrs)
    return model, feeds


GQA_CASES = {
    "first_prompt": {}, "token": {"b": 2, "s": 1, "past": 4}, "later_prompt": {"s": 3, "past": 2},
    "interleaved": {"past": 3, "s": 1, "rotary_interleaved": 1}, "separate": {"packed": False, "past": 2, "s": 1},
    "no_rotary_window": {"rotary": False, "local_window_size": 2, "s": 6},
    "window_past": {"local_window_size": 3, "past": 5, "s": 1}, "softcap": {"softcap": 2.0, "past": 2, "s": 1},
    "one_group": {"kv": 4, "scale": 0.3}, "first_prompt_batch": {"b": 2},
}


@pytest.mark.parametrize("case", sorted(GQA_CASES))
@pytest.mark.parametrize("opset", [None, 23])
def test_group_query_attention(case, opset):
    rng = np.random.default_rng(len(case))
    model, feeds = _gqa(rng, **GQA_CASES[case])
    check_lowering(model, feeds, opset=opset, **TOL)


@pytest.mark.parametrize("change,match", [({"smooth_softmax": 1}, "smooth_softmax"), ({"qk_output": 1}, "qk_output"),
                                          ({"causal": 0}, "causal")])
def test_group_query_attention_blockers(change, match):
    model, _ = _gqa(np.random.default_rng(0), **change)
    with pytest.raises(RewriterError, match=match):
        lower_ops(model)


def test_group_query_attention_refuses_position_ids():
    model, _ = _gqa(np.random.default_rng(0))
    model.graph.node[0].input.append("pos")
    model.graph.input.append(onnx.helper.make_tensor_value_info("pos", T.INT64, ["b", "s"]))
    with pytest.raises(RewriterError, match="position_ids"):
        lower_ops(model)


def test_group_query_attention_padded_first_prompt():
    """Right-padded rows of a first prompt: positions 0..S-1 for every row (ONNX Runtime's), so the
    valid queries and the present KV match; padded queries' outputs are not ONNX Runtime's concern."""
    from tests.convert.support.lowering_oracle import ort_run

    rng = np.random.default_rng(21)
    model, feeds = _gqa(rng, b=2, s=6)
    feeds["SL"] = np.array([5, 2], np.int32)  # the second row has 3 valid tokens
    expected = ort_run(model, feeds)
    lowered = lower_ops(model)[0]
    got = ort_run(lowered, feeds)
    np.testing.assert_allclose(got[0][0], expected[0][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0][1, :3], expected[0][1, :3], rtol=1e-5, atol=1e-5)
    for i in (1, 2):
        np.testing.assert_allclose(got[i], expected[i], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bits,zp,scale_type,kind", [(4, False, np.float32, "u8"), (4, True, np.float32, "u8"),
                                                     (8, True, np.float32, "u8"), (2, True, np.float32, "u8"),
                                                     (4, True, np.float16, "u8"), (4, False, np.float32, "int4"),
                                                     (4, True, np.float32, "uint4")])
def test_gather_block_quantized(bits, zp, scale_type, kind):
    """Bit for bit: (code - zero point) * scale in float32, as the kernel computes it."""
    import ml_dtypes
    from onnx import numpy_helper

    rng = np.random.default_rng(bits * 7 + zp)
    rows, cols, block = 10, 64, 16
    blocks = cols // block
    small = {"int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4}.get(kind)
    if small is None:
        data = const("D", rng.integers(0, 256, size=(rows, cols * bits // 8)), np.uint8)
    else:
        low = -8 if kind == "int4" else 0
        data = numpy_helper.from_array(rng.integers(low, low + 16, size=(rows, cols)).astype(small), "D")
    inits = [data, const("S", rng.random((rows, blocks)) * 0.1, scale_type)]
    names = ["D", ("I", T.INT64, ["n", 3]), "S"]
    if zp:
        names.append("Z")
        inits.append(const("Z", rng.integers(0, 256, size=(rows, -(-blocks * bits // 8))), np.uint8) if small is None
                     else numpy_helper.from_array(rng.integers(0, 8, size=(rows, blocks)).astype(small), "Z"))
    out = T.FLOAT16 if scale_type == np.float16 else T.FLOAT
    model = com_model("GatherBlockQuantized", names, [("Y", out, ["n", 3, cols])], initializers=inits, bits=bits,
                      block_size=block)
    check_lowering(model, {"I": rng.integers(-rows, rows, size=(2, 3)).astype(np.int64)})


def _reciprocal_sensitive_block(rng, block):
    """A block whose max|a| has 127 / m and 127 * (1 / m) one ulp apart, and whose other values each get
    another code from the two: where the division decides the codes."""
    f = np.float32
    while True:
        most = f(rng.uniform(0.5, 2))
        right, product = f(f(127) / most), f(f(127) * f(f(1) / most))
        if right == product:
            continue
        values = [most]
        for j in rng.permutation(127):
            base = f((j + 0.5) / np.float64(right))
            for step in range(-3, 4):
                v = f(base + step * np.spacing(base))
                if abs(v) < most and np.rint(f(v * right)) != np.rint(f(v * product)):
                    values.append(v if len(values) % 2 else -v)
                    break
            if len(values) == block:
                return np.array(values, np.float32)


def test_matmul_nbits_level_4_activations_are_mlas_codes_bit_for_bit_with_a_reciprocal_division():
    """The int8 activations the level-4 lowering writes (the MatMul's A) against MLAS's formulas in numpy
    (per block: scale = max|a| / 127, codes = rint(a * (127 / max|a|)), each a float32 operation), bit
    for bit, also when every Div of the graph is computed as a product with the reciprocal (OpenVINO,
    tract and LiteRT divide so); half the rows are blocks where that product gives other codes."""
    from onnx import helper

    k, block = 64, 32
    model = _nbits(np.random.default_rng(5), 4, k, 8, block, zp=False, a_shape=("b", "s"), accuracy_level=4)
    lowered = lower_ops(model)[0]
    matmul = next(nd for nd in lowered.graph.node if nd.op_type == "MatMul")
    lowered.graph.output.append(helper.make_tensor_value_info(matmul.input[0], T.FLOAT, None))
    rng = np.random.default_rng(6)
    a = (rng.normal(size=(4, 50, k)) * np.exp2(rng.integers(-8, 8, size=(4, 50, 1)))).astype(np.float32)
    a[2:] = np.stack([_reciprocal_sensitive_block(rng, block) for _ in range(2 * 50 * 2)]).reshape(2, 50, k)
    blocks = a.reshape(4, 50, 2, block)
    most = np.abs(blocks).max(-1, keepdims=True)
    want = (np.rint((blocks * (np.float32(127) / most)).astype(np.float32)) * (most / np.float32(127)).astype(np.float32))
    want = want.astype(np.float32).reshape(4, 50, k)
    reciprocal = onnx.ModelProto()
    reciprocal.CopyFrom(lowered)
    nodes = []
    for nd in reciprocal.graph.node:
        if nd.op_type == "Div":
            inverse = nd.output[0] + "_inverse"
            nodes.append(helper.make_node("Reciprocal", [nd.input[1]], [inverse]))
            nd = helper.make_node("Mul", [nd.input[0], inverse], list(nd.output))
        nodes.append(nd)
    del reciprocal.graph.node[:]
    reciprocal.graph.node.extend(nodes)
    for m in (lowered, reciprocal):
        got = ort_run(m, {"A": a})[-1]
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
