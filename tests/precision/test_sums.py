"""Rounding weights to half keeping their filters' sums (rewriter.precision.rounding: balanced,
chosen by kept_sums): every value stays one of the two half values around its
float32 value, each group's sum is never further from its float32 sum than rounding to nearest
leaves it (measured in exact arithmetic here), and filters whose taps nearly cancel answer a
smooth input as in float32, checked in ONNX Runtime against the float32 model."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.io import load_model, save_model
from rewriter.io import deferred
from rewriter.precision.rounding import SUM_BLOCK, Rounding, kept_sums, to_half

RNG = np.random.default_rng(11)
BLOCK = 256  # the elements a sum is kept over at most, each block on its own (docs/precision.md)
HALVES = {T.FLOAT16: np.float16, T.BFLOAT16: ml_dtypes.bfloat16}


def _around(w: np.ndarray, elem: int) -> tuple[np.ndarray, np.ndarray]:
    """(below, above): the two half values around each float32 ``w``, found independently of the
    code under test (float16: numpy's nextafter; bfloat16: float32's bits truncated)."""
    w = np.asarray(w, np.float32)
    if elem == T.FLOAT16:
        rn = w.astype(np.float16)
        below = np.where(rn.astype(np.float32) <= w, rn, np.nextafter(rn, np.float16(-np.inf)))
        above = np.where(rn.astype(np.float32) >= w, rn, np.nextafter(rn, np.float16(np.inf)))
        return below.astype(np.float64), above.astype(np.float64)
    bits = w.view(np.uint32)
    toward_zero = (bits & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    away = ((bits & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32).astype(np.float64)
    exact = toward_zero == w
    away = np.where(exact, toward_zero, away)
    return np.minimum(toward_zero, away), np.maximum(toward_zero, away)


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch):
    """The rounding as the native kernel computes it, and as its numpy version does."""
    import rewriter.kernels as kernels

    if request.param == "numpy":
        monkeypatch.setattr(kernels, "_native", None)
    elif kernels._native is None:
        pytest.skip("the native kernel is not built")
    return request.param


def _exact_sum(values) -> Fraction:
    return sum((Fraction(float(v)) for v in np.ravel(values)), Fraction(0))


def _group_errors(got: np.ndarray, w: np.ndarray) -> list[Fraction]:
    """Each row's sum of ``got`` minus its float32 sum, exactly."""
    return [_exact_sum(g.astype(np.float64)) - _exact_sum(s.astype(np.float64)) for g, s in zip(got, w)]


def _check_rows(w: np.ndarray, elem: int) -> np.ndarray:
    got = to_half(w, elem, False, ("rows", w.shape[1]))
    assert got.dtype == HALVES[elem] and got.shape == w.shape
    below, above = _around(w, elem)
    g = got.astype(np.float64)
    assert np.all((g == below) | (g == above)), "a value left the two half values around it"
    nearest = w.astype(HALVES[elem])
    exact = nearest.astype(np.float64) == w
    assert np.array_equal(g[exact], w[exact].astype(np.float64)), "an exactly representable value moved"
    for e_got, e_near in zip(_group_errors(got, w), _group_errors(nearest, w)):
        assert abs(e_got) <= abs(e_near)
    return got


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([T.FLOAT16, T.BFLOAT16]), st.integers(1, 6), st.integers(2, 40),
       st.sampled_from([1e-6, 1e-3, 1.0, 300.0, 3e4]), st.integers(0, 2 ** 31 - 1))
def test_each_value_stays_beside_its_source_and_no_sum_gets_worse(elem, groups, taps, scale, seed):
    import rewriter.kernels as kernels

    rng = np.random.default_rng(seed)
    w = np.clip(rng.standard_normal((groups, taps)) * scale, -6e4, 6e4).astype(np.float32)  # (finite in both)
    w[rng.random(w.shape) < 0.1] = 0.0
    w[0, 0] = np.float32(0.5)  # exactly representable in both
    native = kernels._native
    try:
        _check_rows(w, elem)
        kernels._native = None  # and the numpy version
        _check_rows(w, elem)
    finally:
        kernels._native = native


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16])
def test_near_cancelling_filters_keep_their_sums(elem, path):
    """3x3 taps of size ~10 summing to ~0.01 (edge detectors): rounding to nearest moves each
    sum by a large part of it; the balanced rounding keeps it within a fifth of that (float16:
    0.18 of it, where the best of all 512 choices of each group would give 0.06), moving the
    taps themselves little more than rounding to nearest does (L2: 1.09x)."""
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((500, 9)) * 10).astype(np.float32)
    w[:, -1] -= w.sum(axis=1) - (rng.standard_normal(500) * 0.01).astype(np.float32)
    got = _check_rows(w, elem)
    to_nearest = w.astype(HALVES[elem])
    ours = np.array([float(abs(e)) for e in _group_errors(got, w)])
    nearest = np.array([float(abs(e)) for e in _group_errors(to_nearest, w)])
    assert np.median(ours) < 0.2 * np.median(nearest)
    moved = np.linalg.norm(got.astype(np.float64) - w) / np.linalg.norm(to_nearest.astype(np.float64) - w)
    assert 1.0 < moved < 1.10


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16])
def test_values_that_round_to_zero_may_become_the_smallest_subnormal(elem, path):
    """Groups of values too small for the half type: rounded to nearest every one is 0 and the
    sum is lost; a few become the smallest subnormal of their sign instead, none further."""
    tiny = float(np.finfo(np.float16).smallest_subnormal) if elem == T.FLOAT16 else \
        float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal)
    w = np.array([[0.45, 0.4, 0.45, 0.3, 0.35, 0.4], [-0.45, -0.4, -0.45, -0.3, -0.35, -0.4]], np.float32) * tiny
    got = _check_rows(w, elem).astype(np.float64)
    assert np.all(w.astype(HALVES[elem]).astype(np.float64) == 0)
    assert set(np.abs(got).ravel()) == {0.0, tiny}
    assert np.count_nonzero(got[0] > 0) == 2 and np.count_nonzero(got[1] < 0) == 2


@pytest.mark.parametrize("elem", [T.FLOAT16, T.BFLOAT16])
def test_exact_values_never_move(elem, path):
    """Eight exact 1.0s beside a value rounded up by far more than 1.0's step: moving the 1.0s
    down would bring the sum nearer, but a value its half type holds exactly stays as it is."""
    w = np.array([[1.0] * 8 + [100.04], [1.0] * 8 + [-100.04]], np.float32)
    got = _check_rows(w, elem).astype(np.float64)
    assert np.all(got[:, :8] == 1.0)


@pytest.mark.parametrize("elem, tie", [(T.FLOAT16, 2.0 ** -11), (T.BFLOAT16, 2.0 ** -8)])
def test_a_flip_that_leaves_the_sum_as_far_is_not_made(elem, tie, path):
    """1 + half a step rounds to 1 (ties to even): its sum is off by half a step; rounding it up
    instead would leave the sum off by as much the other way, so it stays as rounded."""
    w = np.array([[1.0 + tie, 1.0], [-1.0 - tie, -1.0]], np.float32)
    got = to_half(w, elem, False, ("rows", 2))
    assert np.array_equal(got.view(np.uint16), w.astype(HALVES[elem]).view(np.uint16))


def test_nonfinite_and_huge_values_pass_through():
    w = np.array([[np.inf, 1.0001, -np.inf, 2.0003], [np.nan, 1.0001, 7e4, 1.0]], np.float32)
    got = to_half(w, T.FLOAT16, False, ("rows", 4)).astype(np.float64)
    assert np.isposinf(got[0, 0]) and np.isneginf(got[0, 2]) and np.isnan(got[1, 0]) and np.isposinf(got[1, 2])
    clamped = to_half(w, T.FLOAT16, True, ("rows", 4)).astype(np.float64)
    assert clamped[1, 2] == 65504.0 and np.isposinf(clamped[0, 0])


@pytest.mark.parametrize("rows", [5, BLOCK, BLOCK + 3, 2 * BLOCK + 1])
def test_columns_are_rows_of_the_transpose_a_block_at_a_time(rows):
    assert SUM_BLOCK == BLOCK
    w = (RNG.standard_normal((rows, 7)) * 3).astype(np.float32)
    cols = to_half(w, T.FLOAT16, False, ("cols", 7))
    for start in range(0, rows, BLOCK):
        block = w[start:start + BLOCK]
        expect = to_half(np.ascontiguousarray(block.T), T.FLOAT16, False, ("rows", block.shape[0])).T
        assert np.array_equal(cols[start:start + BLOCK].view(np.uint16), expect.view(np.uint16))


def test_long_rows_are_kept_a_block_at_a_time():
    n = 2 * BLOCK + 10
    w = (RNG.standard_normal((3, n)) * 5).astype(np.float32)
    got = to_half(w, T.FLOAT16, False, ("rows", n))
    for start in range(0, n, BLOCK):
        part = w[:, start:start + BLOCK]
        expect = to_half(part, T.FLOAT16, False, ("rows", part.shape[1]))
        assert np.array_equal(got[:, start:start + BLOCK].view(np.uint16), expect.view(np.uint16))


def test_sums_that_do_not_divide_the_tensor_round_to_nearest():
    w = (RNG.standard_normal(10) * 5).astype(np.float32)
    assert np.array_equal(to_half(w, T.FLOAT16, False, ("rows", 3)), w.astype(np.float16))
    assert np.array_equal(to_half(w, T.FLOAT16, False, ("rows", 1)), w.astype(np.float16))


def test_rounding_key_round_trips():
    for r in (Rounding(), Rounding(True), Rounding(False, ("rows", 9)), Rounding(True, ("cols", 768))):
        assert Rounding.parse(r.key()) == r
    assert Rounding.parse("") is None and Rounding.parse("exact") is None
    assert Rounding.parse("round;rows=0") == Rounding() and Rounding.parse("round;diag=3") == Rounding()


# which sums ------------------------------------------------------------------------------------

def _node(op, **attrs):
    return h.make_node(op, ["a", "b", "c"], ["y"], **attrs)


@pytest.mark.parametrize("op, attrs, i, shape, want", [
    ("Conv", {}, 1, (8, 4, 3, 3), ("rows", 9)),
    ("Conv", {}, 1, (8, 4, 1, 1), ("rows", 4)),
    ("Conv", {}, 1, (8, 1, 5), ("rows", 5)),
    ("ConvTranspose", {}, 1, (4, 8, 3, 3), ("rows", 9)),
    ("ConvTranspose", {}, 1, (4, 8, 1, 1), ("cols", 8)),
    ("Conv", {}, 2, (8,), None),
    ("MatMul", {}, 1, (16, 32), ("cols", 32)),
    ("MatMul", {}, 0, (16, 32), ("rows", 32)),
    ("MatMul", {}, 1, (2, 16, 32), None),
    ("Gemm", {}, 1, (16, 32), ("cols", 32)),
    ("Gemm", {"transB": 1}, 1, (32, 16), ("rows", 16)),
    ("Gemm", {}, 0, (4, 16), ("rows", 16)),
    ("Gemm", {"transA": 1}, 0, (16, 4), ("cols", 4)),
    ("Gemm", {}, 2, (32,), None),
    ("LSTM", {}, 1, (1, 64, 10), ("rows", 10)),
    ("GRU", {}, 2, (2, 48, 16), ("rows", 16)),
    ("Mul", {}, 1, (16, 32), None),
    ("Conv", {}, 1, (8, 1, 1, 1), None),  # one value a group: nothing to keep
])
def test_the_sums_each_reader_computes(op, attrs, i, shape, want):
    assert kept_sums(shape, [(_node(op, **attrs), i)]) == want


def test_readers_that_disagree_or_other_domains_round_to_nearest():
    w = (16, 32)
    assert kept_sums(w, [(_node("MatMul"), 1), (_node("MatMul"), 1)]) == ("cols", 32)
    assert kept_sums(w, [(_node("MatMul"), 1), (_node("Gemm", transB=1), 1)]) is None
    assert kept_sums(w, [(_node("MatMul"), 1), (_node("Add"), 1)]) is None
    assert kept_sums(w, []) is None
    other = h.make_node("MatMul", ["a", "b"], ["y"], domain="com.example")
    assert kept_sums(w, [(other, 1)]) is None
    assert kept_sums((4, 1 << 20), [(_node("MatMul"), 1)]) is None  # a block of columns would be too big


# end to end ------------------------------------------------------------------------------------

def _edge_model(w: np.ndarray, bias: np.ndarray, constant_node: bool = False) -> onnx.ModelProto:
    c = w.shape[0]
    nodes = [h.make_node("Conv", ["x", "W", "B"], ["y"], group=c)]
    inits = [nh.from_array(bias, "B")]
    if constant_node:
        nodes.insert(0, h.make_node("Constant", [], ["W"], value=nh.from_array(w, "Wv")))
    else:
        inits.append(nh.from_array(w, "W"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, c, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, c, 14, 14])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _edge_filters(c=32, seed=5):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((c, 1, 3, 3)) * 10).astype(np.float32)
    flat = w.reshape(c, 9)
    flat[:, 4] -= flat.sum(axis=1) - (rng.standard_normal(c) * 0.01).astype(np.float32)
    return flat.reshape(c, 1, 3, 3), np.zeros(c, np.float32)


def _run(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("constant_node", [False, True])
def test_edge_detectors_on_a_smooth_input_compute_as_in_float32(constant_node):
    w, b = _edge_filters()
    m = _edge_model(w, b, constant_node)
    yy, xx = np.mgrid[0:16, 0:16].astype(np.float32)
    x = np.broadcast_to(1.0 + 0.01 * yy + 0.02 * xx, (1, 32, 16, 16)).astype(np.float32)  # a smooth picture
    want = _run(m, x)
    nearest = _edge_model(w.astype(np.float16).astype(np.float32), b)  # the premise: to nearest is far off
    off = _rel(_run(nearest, x), want)
    assert off > 1e-2  # (beyond what --verify allows half precision)
    r = rewriter.convert_precision(m, "float16")
    onnx.checker.check_model(r, full_check=True)
    assert _rel(_run(r, x), want) < 0.3 * off  # (the input, rounded at the edge, is most of what is left)
    half_w = nh.to_array(next(t for t in r.graph.initializer if t.name == "W")) if not constant_node else \
        nh.to_array(next(n for n in r.graph.node if n.op_type == "Constant").attribute[0].t)
    assert half_w.dtype == np.float16


def test_the_summary_counts_the_weights_rounded_so(tmp_path):
    w, b = _edge_filters()
    src = tmp_path / "m.onnx"
    onnx.save(_edge_model(w, b), src)
    import json
    import subprocess
    import sys

    out = tmp_path / "o.onnx"
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out),
                        "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["changes"]["precision"]["sums_kept"] == 1  # W (B is a bias: to nearest)
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out)],
                       capture_output=True, text=True)
    assert "weights rounded keeping their filters' sums 1" in r.stdout


@pytest.mark.parametrize("elem", ["float16", "bfloat16"])
def test_references_are_rounded_in_chunks_as_whole_arrays_are(tmp_path, monkeypatch, elem):
    """A weight left in its file is converted chunk by chunk as it is written; the chunks hold
    whole groups, so the bytes are those of the whole array converted in memory, and reading the
    reference before it is written gives them too."""
    monkeypatch.setattr(deferred, "CHUNK_ELEMENTS", 1 << 12)
    w = (RNG.standard_normal((700, 24)) * 4).astype(np.float32)  # 700 rows: columns in 3 blocks
    g = h.make_graph([h.make_node("MatMul", ["x", "W"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 700])], [h.make_tensor_value_info("y", T.FLOAT, [2, 24])],
                     [nh.from_array(w, "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, size_threshold=0, location="m.data")
    from rewriter.io import read_external_tensor
    from rewriter.precision import convert_precision_proto

    result, _ = convert_precision_proto(load_model(tmp_path / "m.onnx"), elem, base_dir=str(tmp_path))
    t = next(t for t in result.graph.initializer if t.name == "W")
    read = np.asarray(read_external_tensor(t, str(tmp_path)))
    save_model(result, tmp_path / "o.onnx", base_dir=str(tmp_path))
    saved = onnx.load(tmp_path / "o.onnx")
    written = nh.to_array(next(t for t in saved.graph.initializer if t.name == "W"))
    whole = to_half(w, T.FLOAT16 if elem == "float16" else T.BFLOAT16, False, ("cols", 24))
    assert np.array_equal(np.asarray(written).view(np.uint16), whole.view(np.uint16))
    assert np.array_equal(read.view(np.uint16), whole.view(np.uint16))
    assert not np.array_equal(whole, w.astype(whole.dtype))


def test_a_weight_also_read_in_float32_keeps_the_sums_of_its_half_readers():
    """W read by a Conv in half and by a Mul kept float32: the half copy the Conv reads keeps
    its filters' sums (the float32 reader's use does not count), the float32 one is W itself."""
    w, b = _edge_filters(8)
    nodes = [h.make_node("Conv", ["x", "W", "B"], ["y"], group=8), h.make_node("Mul", ["W", "two"], ["w2"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 14, 14]),
                      h.make_tensor_value_info("w2", T.FLOAT, [8, 1, 3, 3])],
                     [nh.from_array(w, "W"), nh.from_array(b, "B"), nh.from_array(np.array(2, np.float32), "two")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    r = rewriter.convert_precision(m, "float16", keep_op_types=["Mul"])
    conv = next(n for n in r.graph.node if n.op_type == "Conv")
    inits = {t.name: nh.to_array(t) for t in r.graph.initializer}
    assert np.array_equal(inits["W"], w)  # the float32 reader's
    half = inits[conv.input[1]]
    assert half.dtype == np.float16
    assert np.array_equal(half.view(np.uint16), to_half(w, T.FLOAT16, False, ("rows", 9)).view(np.uint16))
    assert not np.array_equal(half, w.astype(np.float16))


# the native kernel and numpy -------------------------------------------------------------------

def _both(w: np.ndarray, elem: int, sums: tuple, monkeypatch) -> tuple[np.ndarray, np.ndarray]:
    """(native, numpy) results of the same rounding."""
    import rewriter.kernels as kernels

    if kernels._native is None:
        pytest.skip("the native kernel is not built")
    native = to_half(w, elem, False, sums)
    with monkeypatch.context() as m:
        m.setattr(kernels, "_native", None)
        plain = to_half(w, elem, False, sums)
    return native, plain


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([T.FLOAT16, T.BFLOAT16]), st.sampled_from(["rows", "cols"]), st.integers(1, 300),
       st.integers(1, 24), st.floats(-9, 4.7), st.integers(0, 2 ** 31 - 1))
def test_the_native_kernel_gives_numpys_bits(elem, kind, rows, n, log_scale, seed):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((rows, n)) * 10.0 ** log_scale).astype(np.float32)
    w[rng.random(w.shape) < 0.05] = 0.0
    special = rng.random(w.shape)
    w[special < 0.01] = np.inf
    w[(special > 0.5) & (special < 0.51)] = -np.nan
    w[special > 0.99] = 7e4  # beyond float16
    with pytest.MonkeyPatch.context() as mp:
        native, plain = _both(w, elem, (kind, n), mp)
    assert native.dtype == plain.dtype
    assert np.array_equal(native.view(np.uint16), plain.view(np.uint16))


def test_every_float16_value_converts_in_the_kernel_as_in_numpy(monkeypatch):
    """Each float16 value (all 63,488 finite bit patterns) nudged one float32 step up, in
    float32: the kernel reads its neighbours' values exactly as numpy does."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    values = bits.view(np.float16).astype(np.float32)
    values = values[np.isfinite(values)]
    nudged = np.nextafter(values, np.float32(np.inf)).reshape(-1, 8)  # groups of 8
    native, plain = _both(nudged, T.FLOAT16, ("rows", 8), monkeypatch)
    assert np.array_equal(native.view(np.uint16), plain.view(np.uint16))


def test_threads_do_not_change_the_bits(monkeypatch):
    w = (RNG.standard_normal((4096, 64)) * 3).astype(np.float32)
    monkeypatch.setenv("REWRITER_KERNEL_THREADS", "1")
    one = to_half(w, T.FLOAT16, False, ("cols", 64))
    monkeypatch.setenv("REWRITER_KERNEL_THREADS", "7")
    seven = to_half(w, T.FLOAT16, False, ("cols", 64))
    assert np.array_equal(one.view(np.uint16), seven.view(np.uint16))


def test_the_kernel_refuses_inconsistent_buffers():
    from rewriter.kernels import _native

    if _native is None:
        pytest.skip("the native kernel is not built")
    w = np.zeros(12, np.float32)
    h = np.zeros(12, np.uint16)
    for args in ((w, h, 0, 0, 0, 1), (w, h, 5, 0, 0, 1), (w, h, 4, 0, 2, 1), (w, np.zeros(6, np.uint16), 4, 0, 0, 1),
                 (w, h, 4, 5, 0, 1), (w, h, 5000, 0, 0, 1)):
        with pytest.raises(ValueError, match="bad arguments"):
            _native.balance(*args)
    _native.balance(w, h, 4, 3, 0, 1)  # columns of a [4, 3] block: fine
