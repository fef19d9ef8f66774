"""DynamicQuantizeLinear written with exact residuals (quant_dynamic.py, OpenVINO's form "exact_residual"):
its scale, zero point and codes are ONNX Runtime's bit for bit, run in ONNX Runtime and in onnx.reference,
on hypothesis-drawn tensors and adversarial ones (every code's boundary (k + 1/2) * s and a few ulps
beside it, ties, all zero, all negative, one element, +-inf, ranges from 2^-110 to 2^120, a large
tensor); the scale step checked over every float32 of two binades; the conversion for OpenVINO writes
it instead of refusing the function body's QuantizeLinear. In OpenVINO where its venvs are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

from rewriter.convert.lowering.quant_dynamic import FORM, KEPT, half_offsets
from rewriter.convert.lowering.quant_explicit import rewrite_quantized
from tests.convert.quant_models import quant_model

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
VENVS = Path.home() / ".cache/rewriter/runtime-venvs"


def _dql(opset=13, shape=("n",)):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"], name="dql")
    outs = [helper.make_tensor_value_info("y", T.UINT8, list(shape)), helper.make_tensor_value_info("ys", T.FLOAT, []),
            helper.make_tensor_value_info("yz", T.UINT8, [])]
    return quant_model([node], [helper.make_tensor_value_info("x", T.FLOAT, list(shape))], outs, [], opset=opset)


def _exact(model):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    count, blockers = rewrite_quantized(copy, {"DynamicQuantizeLinear": FORM}, "R 1.0")
    assert (count, blockers) == (1, [])
    assert not {"DynamicQuantizeLinear", "QuantizeLinear"} & {n.op_type for n in copy.graph.node}
    onnx.checker.check_model(copy, full_check=True)
    return copy


MODEL, EXACT = _dql(), _exact(_dql())


def _sessions():
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    run = [ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]) for m in (MODEL, EXACT)]
    return run[0], run[1], ReferenceEvaluator(EXACT)


OP, WRITTEN, REFERENCE = _sessions()


def _bits(outputs):
    return [np.asarray(o).view(np.uint32) if np.asarray(o).dtype == np.float32 else np.asarray(o) for o in outputs]


def _same(x, reference=True):
    x = np.asarray(x, np.float32)
    want = _bits(OP.run(None, {"x": x}))
    got = _bits(WRITTEN.run(None, {"x": x}))
    for name, w, g in zip(("y", "y_scale", "y_zero_point"), want, got):
        assert np.array_equal(w, g), (name, np.count_nonzero(w != g), x[:8])
    if reference:
        ref = _bits(REFERENCE.run(None, {"x": x}))
        for name, w, g in zip(("y", "y_scale", "y_zero_point"), want, ref):
            assert np.array_equal(w, g), ("reference", name, np.count_nonzero(w != g))


def _boundaries(rng, lo, hi, n):
    """[lo, hi] (their scale and zero point in numpy, as ONNX Runtime computes them) and n points at
    (k + 1/2) * s, moved by -3..3 ulps, for codes over the whole range and one beyond each end."""
    lo, hi = np.float32(min(lo, 0)), np.float32(max(hi, 0))
    s = np.float32(1) if lo == hi else np.float32(np.float32(hi - lo) / np.float32(255))
    z = int(np.round(np.clip(np.float32(0) - np.float32(lo / s), 0, 255)))
    t = ((rng.integers(-z - 1, 257 - z, n) + np.float32(0.5)) * s).astype(np.float32)
    for _ in range(3):
        d = rng.integers(-1, 2, n)
        t = np.where(d > 0, np.nextafter(t, np.float32(np.inf)), np.where(d < 0, np.nextafter(t, np.float32(-np.inf)), t))
    return np.concatenate([[lo, hi, 0.0, -0.0], np.clip(t, lo, hi)]).astype(np.float32)


@pytest.mark.parametrize("exponent", [-110, -70, -61, -59, -20, -1, 0, 7, 40, 59, 61, 100, 120])
def test_every_boundary_at_scales_over_the_range(exponent):
    rng = np.random.default_rng(exponent + 200)
    for _ in range(6):
        lo, hi = sorted(rng.normal(0, 1, 2) * 2.0 ** exponent)
        _same(_boundaries(rng, lo, hi, 3000))


def test_ties_all_zero_negative_positive_single():
    s = np.float32(10) / np.float32(255)
    _same(((np.arange(-1, 256) + np.float32(0.5)) * s).astype(np.float32).clip(0, 10))  # exact ties of RN(x / s)
    _same(np.float32([-4.0, -5.5, -2.0]))  # zero point 255
    _same(np.float32([3.0, 0.25, 7.0]))  # zero point 0
    for x in ([0.0], [-0.0, 0.0], [2.5], [-2.5], [1e-30], [3.4e38], [-3.4e38], [1.0] * 7):
        _same(x)


def test_infinite_range_is_onnx_runtimes():
    """max - min = inf: scale inf, zero point 255 when min is -inf else 0, codes 0 for +-inf."""
    for x in ([np.inf, 1.0], [-np.inf, 1.0, 2.0], [np.inf, -np.inf, 3.0], [3e38, -3e38, 1.0], [-np.inf, -1.0]):
        _same(x)


def test_a_nan_never_breaks_the_graph():
    """ONNX Runtime's min / max with a NaN depend on its lane order (not reproduced): the form takes
    NaN as 0 and gives it code 0, and runs."""
    y, s, z = WRITTEN.run(None, {"x": np.float32([1.0, np.nan, 2.0, -1.0])})
    assert y[1] == 0 and np.float32(s) == np.float32(3) / np.float32(255) and int(z) == 85
    assert WRITTEN.run(None, {"x": np.float32([np.nan] * 5)})[0].tolist() == [0] * 5


def test_a_large_tensor_and_other_ranks():
    rng = np.random.default_rng(5)
    _same(np.concatenate([_boundaries(rng, -3.1, 17.2, 400_000), rng.normal(2, 5, 600_000)]).astype(np.float32),
          reference=False)
    model = _dql(shape=(2, 3, 4))
    copy = _exact(model)
    x = rng.normal(0, 1, (2, 3, 4)).astype(np.float32)
    assert all(np.array_equal(a, b) for a, b in zip(ReferenceEvaluator(model).run(None, {"x": x}),
                                                    ReferenceEvaluator(copy).run(None, {"x": x})))


def _normal_scale(x) -> bool:
    """Whether ONNX Runtime's scale of ``x`` is 1 or a normal float (max - min >= 2^-118; below, it
    rounds r / 255 to a subnormal, which the form does not reproduce)."""
    r = np.float32(max(np.max(x), 0)) - np.float32(min(np.min(x), 0))
    return r == 0 or r >= 2.0 ** -118


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hnp.arrays(np.float32, st.integers(1, 300), elements=st.floats(-(2.0 ** 100), 2.0 ** 100, width=32)))
def test_hypothesis_tensors(x):
    assume(_normal_scale(x))
    _same(x)


@settings(max_examples=150, deadline=None)
@given(st.floats(-1e6, 1e6, width=32), st.floats(-1e6, 1e6, width=32), st.integers(0, 2**31))
def test_hypothesis_boundaries(lo, hi, seed):
    assume(_normal_scale([lo, hi]))
    _same(_boundaries(np.random.default_rng(seed), min(lo, hi), max(lo, hi), 500))


def test_the_scale_step_over_every_float32_of_two_binades():
    """q = r * fl(1/255), e = (r - 256 q) + q, s = q + e * fl(1/255), each rounded to float32 as a
    runtime's Mul / Add / Sub do, is the correctly rounded r / 255 for every r in [1, 4) (the
    significands of every normal r), and e is r - 255 q exactly."""
    r = (np.arange(1 << 24, dtype=np.uint32) + np.uint32(0x3F800000)).view(np.float32)
    c = np.float32(1) / np.float32(255)
    q = r * c
    e = (r - q * np.float32(256)) + q
    assert np.array_equal(e.astype(np.float64), r.astype(np.float64) - 255 * q.astype(np.float64))
    s = q + e * c
    assert np.array_equal(s.view(np.uint32), (r / np.float32(255)).view(np.uint32))


def test_half_offsets_move_each_half_integer_to_its_rounding_side():
    """k odd: the float tie k + 1/2 rounds up to k + 1 (even), so the threshold is half a gap below it;
    k even: half a gap above it (down likewise); the narrower gap beside +-1/2 (towards 0) is never
    the one taken: +-1/2 itself rounds to 0."""
    up, down = half_offsets()
    at = 300
    assert up[at] == np.float32(2.0 ** -25) and down[at] == np.float32(-(2.0 ** -25))  # k = 0: 1/2 above, -1/2 below
    assert up[at + 1] == np.float32(-(2.0 ** -24)) and down[at + 1] == np.float32(2.0 ** -25)  # k = 1: 1.5, 0.5
    assert up[at - 1] == np.float32(-(2.0 ** -25)) and down[at - 1] == np.float32(2.0 ** -24)  # k = -1: -0.5, -1.5
    assert up[at + 200] == np.float32(2.0 ** -17) and up[at + 201] == np.float32(-(2.0 ** -17))


def test_form_other_than_its_own_is_refused_by_name():
    copy = onnx.ModelProto()
    copy.CopyFrom(MODEL)
    count, blockers = rewrite_quantized(copy, {"DynamicQuantizeLinear": "divide"}, "R 1.0")
    assert count == 0 and "form 'divide'" in blockers[0][3] and blockers[0][1] == "DynamicQuantizeLinear"


def test_convert_for_openvino_writes_it_instead_of_refusing():
    from rewriter.convert.for_target import convert_for

    rng = np.random.default_rng(3)
    for release in ("2026.4", "2024.6"):
        result, report = convert_for(_dql(), runtime=f"openvino=={release}")
        ops = {n.op_type for n in result.graph.node}
        assert not {"DynamicQuantizeLinear", "QuantizeLinear"} & ops and "Gather" in ops
        assert any(n.startswith("1 quantized node(s) written") for n in report.target_notes)
        x = _boundaries(rng, -2.5, 7.25, 2000)
        import onnxruntime as ort

        got = ort.InferenceSession(result.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        assert all(np.array_equal(a, b) for a, b in zip(_bits(OP.run(None, {"x": x})), _bits(got)))


def test_a_release_without_the_form_keeps_its_function_body():
    from rewriter.convert.for_target import convert_for

    result, report = convert_for(_dql(), runtime="onnxruntime==1.20")
    assert [n.op_type for n in result.graph.node] == ["DynamicQuantizeLinear"]
    assert not any("quantized node(s) written" in n for n in report.target_notes)


@pytest.mark.parametrize("release", ["2026.4", "2024.6"])
def test_in_openvino(release, tmp_path):
    python = VENVS / f"openvino-{release}" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no openvino-{release} venv (tools/runtime_venvs.py)")
    rng = np.random.default_rng(11)
    x = np.concatenate([_boundaries(rng, -0.37, 5.9, 200_000), rng.normal(1, 2, 1000)]).astype(np.float32)
    onnx.save(EXACT, tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=x)
    runner = Path(__file__).resolve().parents[2] / "tools" / "runtime_run_openvino.py"
    env = {**os.environ, "PYTHONPATH": ""}
    subprocess.run([str(python), str(runner), str(tmp_path / "m.onnx"), str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                   check=True, capture_output=True, env=env)
    got = np.load(tmp_path / "out.npz")
    want = dict(zip(("y", "ys", "yz"), OP.run(None, {"x": x})))
    for name in ("y", "ys", "yz"):
        assert np.array_equal(np.asarray(got[name]).reshape(want[name].shape), want[name]), name


def _after(op_nodes, x_type=T.FLOAT):
    nodes = op_nodes + [helper.make_node("DynamicQuantizeLinear", ["v"], ["y", "ys", "yz"], name="dql")]
    outs = [helper.make_tensor_value_info("y", T.UINT8, [4]), helper.make_tensor_value_info("ys", T.FLOAT, []),
            helper.make_tensor_value_info("yz", T.UINT8, [])]
    return quant_model(nodes, [helper.make_tensor_value_info("x", x_type, [4])], outs, [("c", np.float32(0.5))], opset=13)


@pytest.mark.parametrize("nodes,x_type,blocked", [
    ([helper.make_node("Sigmoid", ["x"], ["v"], name="sig")], T.FLOAT, "Sigmoid ('sig')"),
    ([helper.make_node("Div", ["x", "c"], ["d"], name="div"), helper.make_node("Add", ["d", "c"], ["v"])], T.FLOAT, "Div ('div')"),
    ([helper.make_node("Cast", ["x"], ["v"], name="c32", to=T.FLOAT)], T.DOUBLE, "Cast ('c32')"),
    ([helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Relu", ["m"], ["v"])], T.FLOAT, None),
    ([helper.make_node("Cast", ["x"], ["v"], to=T.FLOAT)], T.INT32, None)])
def test_only_after_exact_ops(nodes, x_type, blocked):
    """The form is exact for ONNX Runtime's x: after a float op a runtime computes within ulps (or a Cast
    of a float) the node is refused by name; after exact ones (Mul, Relu, a Cast of integers) written."""
    copy = _after(nodes, x_type)
    count, blockers = rewrite_quantized(copy, {"DynamicQuantizeLinear": FORM}, "R 1.0")
    if blocked:
        assert count == 0 and blocked in blockers[0][3] and "within ulps" in blockers[0][3]
    else:
        assert (count, blockers) == (1, [])


@pytest.mark.parametrize("factor", [1 - 2.0 ** -10, 1 + 2.0 ** -10])
def test_a_candidate_one_off_either_way_is_corrected(factor):
    """OpenVINO's x * (1 / s) may put the candidate Round(x / s) one code above or below: the divisor of
    every candidate's Div moved by ``factor`` (candidates off by one near each boundary, both ways),
    the codes and zero point are still ONNX Runtime's."""
    copy = onnx.ModelProto()
    copy.CopyFrom(EXACT)
    rounded = {n.input[0] for n in copy.graph.node if n.op_type == "Round"}
    copy.graph.initializer.append(onnx.numpy_helper.from_array(np.float32(factor), "factor"))
    for n in list(copy.graph.node):
        if n.op_type == "Div" and n.output[0] in rounded:
            moved = n.output[0] + "_divisor"
            copy.graph.node.insert(list(copy.graph.node).index(n), helper.make_node("Mul", [n.input[1], "factor"], [moved]))
            n.input[1] = moved
    import onnxruntime as ort

    run = ort.InferenceSession(copy.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(17)
    for lo, hi in ((-3.0, 5.0), (0.0, 250.0), (-1e-3, -1e-5)):
        x = _boundaries(rng, lo, hi, 20_000)
        assert all(np.array_equal(a, b) for a, b in zip(_bits(OP.run(None, {"x": x})), _bits(run.run(None, {"x": x}))))


@pytest.mark.parametrize("nodes,x_type,blocked", [
    ([helper.make_node("Sigmoid", ["x"], ["v"], name="sig")], T.FLOAT, "Sigmoid ('sig')"),
    ([helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Relu", ["m"], ["v"])], T.FLOAT, None)])
def test_kept_form_leaves_the_node_or_names_the_inexact_op(nodes, x_type, blocked):
    """tract 0.23 / TVM 0.27 ("kept_if_exact_input"): the node stays as it is after exact ops (nothing
    written, nothing counted); after a float op the release computes within ulps it is a blocker."""
    copy = _after(nodes, x_type)
    before = copy.SerializeToString()
    count, blockers = rewrite_quantized(copy, {"DynamicQuantizeLinear": KEPT}, "R 1.0")
    assert count == 0
    if blocked:
        assert len(blockers) == 1 and blocked in blockers[0][3] and "within ulps" in blockers[0][3]
    else:
        assert blockers == [] and copy.SerializeToString() == before


@pytest.mark.parametrize("release", ["tract==0.23", "tvm==0.27", "litert==2.6"])
def test_convert_for_tract_and_tvm_keeps_or_blocks(release):
    from rewriter.convert.for_target import convert_for
    from rewriter.convert.planner import ConversionBlocked

    result, report = convert_for(_after([helper.make_node("Mul", ["x", "c"], ["v"])]), runtime=release)
    assert "DynamicQuantizeLinear" in {n.op_type for n in result.graph.node}
    assert not any("quantized node(s) written" in n for n in report.target_notes)
    with pytest.raises(ConversionBlocked) as e:
        convert_for(_after([helper.make_node("Sigmoid", ["x"], ["v"], name="sig")]), runtime=release)
    assert "node 'dql' (DynamicQuantizeLinear)" in str(e.value) and "Sigmoid ('sig')" in str(e.value)
