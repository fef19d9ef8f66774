"""convert --max-error: runs of nodes kept float32 where half precision is measured to take the
error beyond the limit, judged here by ONNX Runtime on the same inputs, independently of the
search's own measurements."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.errors import RewriterError
from rewriter.precision import convert_precision_proto
from rewriter.precision.fallback import SEGMENTS, half_error

RNG = np.random.default_rng(7)
SAMPLE = {"x": RNG.standard_normal((4, 16)).astype(np.float32)}


def _cancelling_model(up_by=1000.3, down_by=1000.2):
    """MatMul, then (v + 1000.3) - 1000.2 (float16 has 0.5 steps near 1000: the constants become
    1000.5 and 1000, the sum moves by 0.4; ONNX Runtime's CPU provider computes the two in float32
    but with the rounded constants), then Relu/MatMul pairs: 18 nodes in half, the two in the
    middle of the first run of three break the result."""
    nodes = [h.make_node("MatMul", ["x", "w0"], ["m0"], name="mm0"),
             h.make_node("Add", ["m0", "up_by"], ["up"], name="up"),
             h.make_node("Sub", ["up", "down_by"], ["v0"], name="down")]
    inits = [nh.from_array((RNG.standard_normal((16, 16)) / 4).astype(np.float32), "w0"),
             nh.from_array(np.array(up_by, np.float32), "up_by"), nh.from_array(np.array(down_by, np.float32), "down_by")]
    for i in range(1, 8):
        nodes += [h.make_node("Relu", [f"v{i - 1}"], [f"r{i}"], name=f"relu{i}"),
                  h.make_node("MatMul", [f"r{i}", f"w{i}"], [f"v{i}"], name=f"mm{i}")]
        inits.append(nh.from_array((RNG.standard_normal((16, 16)) / 2).astype(np.float32), f"w{i}"))
    nodes.append(h.make_node("Relu", ["v7"], ["y"], name="relu8"))
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [4, 16])], inits),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _ort_error(source, result, feeds, reference=True):
    """The largest error over ONNX Runtime with graph optimizations off (the half model as
    written: its CPU provider casts around the float16 nodes it has no kernel for and keeps the
    rounding) and on (it then drops such Cast pairs), and onnx.reference (half arithmetic in half)."""
    from onnx.reference import ReferenceEvaluator

    def run(m, level):
        if level is None:
            return ReferenceEvaluator(m).run(None, feeds)
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        return ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)

    levels = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL) + \
        ((None,) if reference else ())
    return max(half_error(run(source, level), run(result, level)) for level in levels)


def _kept(result):
    return sorted(n.name for n in result.graph.node if n.op_type not in ("Cast",)
                  and all(_elem(result, x) == T.FLOAT for x in n.output))


def _elem(model, name):
    inferred = onnx.shape_inference.infer_shapes(model)
    for v in list(inferred.graph.value_info) + list(inferred.graph.output):
        if v.name == name:
            return v.type.tensor_type.elem_type
    return None


def test_the_smallest_run_that_meets_the_limit_is_kept_float32():
    m = _cancelling_model()
    plain, _ = convert_precision_proto(m, "float16")
    assert _ort_error(m, plain, SAMPLE) > 5e-2  # the model breaks in half precision
    result = rewriter.convert_precision(m, "float16", max_error=1e-2, calibration_data=[SAMPLE])
    onnx.checker.check_model(result, full_check=True)
    assert _ort_error(m, result, SAMPLE) <= 1e-2
    # the first run is mm0, up, down: halved to (up, down), the rest stays in half
    assert _kept(result) == ["down", "up"]
    half = [n.name for n in result.graph.node if n.op_type != "Cast" and n.name not in ("up", "down")]
    assert len(half) == 16
    assert next(t for t in result.graph.initializer if t.name == "w0").data_type == T.FLOAT16


def _convert_with_sample(tmp_path, model, dtype, limit):
    """rewriter convert --dtype DTYPE --calibration-data (SAMPLE) --max-error LIMIT --json; (the
    finished process, the output's path), the exit status checked."""
    src, out, data = tmp_path / "m.onnx", tmp_path / "h.onnx", tmp_path / "x.npz"
    onnx.save(model, src)
    np.savez(data, **SAMPLE)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", dtype,
                          "--calibration-data", str(data), "--max-error", limit, "-o", str(out), "--json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run, out


def test_the_report_says_what_was_measured(tmp_path):
    m = _cancelling_model()
    run, out = _convert_with_sample(tmp_path, m, "float16", "0.01")
    fit = json.loads(run.stdout)["changes"]["precision"]["max_error"]
    assert fit["limit"] == 0.01 and fit["samples"] == 1 and fit["kept"] == 2
    assert fit["all_half"] > 5e-2 and fit["error"] <= 1e-2
    # 1 with every node in half, 1 with every node float32 from weights in half (fails: the
    # constants' rounding is to blame), 8 runs, then the halves of the first run: (mm0) fails,
    # (up, down) meets; its halves (up) and (down) fail
    assert fit["trials"] == 1 + 1 + SEGMENTS + 2 + 2 and fit["weights_half"] is False
    reasons = {k["node"]: k["reason"] for k in json.loads(run.stdout)["changes"]["precision"]["kept"]}
    assert set(reasons) == {"node 'up' (Add)", "node 'down' (Sub)"}
    assert all(r.startswith("--max-error 0.01:") for r in reasons.values())
    assert _ort_error(m, onnx.load(out), SAMPLE) <= 1e-2


def test_a_model_within_the_limit_is_converted_once():
    m = _cancelling_model(1000.0, 1000.0)  # constants exact in half
    result, report = _fit(m, [SAMPLE], 1e-2)
    assert report.fitted.trials == 1 and report.fitted.kept == 0 and 0 < report.fitted.error <= 1e-2
    assert report.half_nodes == 18
    assert not [k for k in report.kept if k.code == "max-error"]


def _fit(model, samples, limit, keep_io_types=True):
    from rewriter.precision.fallback import fit_max_error

    def convert(keep_at=None, weights_half=False):
        return convert_precision_proto(model, "float16", keep_io_types=keep_io_types, keep_at=keep_at,
                                       weights_half=weights_half)

    return fit_max_error(convert, model, None, samples, limit, keep_io_types)


def test_every_run_is_tried_until_the_limit_is_met():
    # the error comes from every node alike (each MatMul adds its rounding): a tight limit keeps all
    m = _cancelling_model()
    result, report = _fit(m, [SAMPLE], 1e-6)
    # every MatMul's rounded weights move the result: all eight stay float32, found over several rounds
    assert {n.name for n in result.graph.node if n.op_type == "MatMul"} <= set(_kept(result))
    assert report.fitted.trials > 1 + SEGMENTS and report.fitted.kept >= 10
    assert report.fitted.error <= 1e-6
    # (a Relu left in half between float32 nodes rounds in onnx.reference; ONNX Runtime's CPU
    # provider, which measures --max-error, computes it in float32)
    assert _ort_error(m, result, SAMPLE, reference=False) <= 1e-6


def _near_one_model():
    """y = (x - 1) * 1000 with x near 1: rounding the input to float16 alone is 50% off."""
    return h.make_model(h.make_graph([h.make_node("Sub", ["x", "one"], ["d"]), h.make_node("Mul", ["d", "k"], ["y"])],
                                  "g", [h.make_tensor_value_info("x", T.FLOAT, [64])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [64])],
                                  [nh.from_array(np.array(1.0, np.float32), "one"),
                                   nh.from_array(np.array(1000.0, np.float32), "k")]),
                     opset_imports=[h.make_opsetid("", 17)])


NEAR_ONE = {"x": (1 + 1e-4 * RNG.standard_normal(64)).astype(np.float32)}


def _shifted_norm_model(first="LayerNormalization"):
    """x -> [Add 1000 -> Max 0 ->] LayerNormalization -> Mul: float16 keeps 0.5 steps near 1000,
    and ONNX Runtime's CPU provider has float16 kernels for Max and LayerNormalization, so the
    rounding of values near 1000 is there in its run too."""
    nodes = [h.make_node("LayerNormalization", ["c", "scale", "bias"], ["n"], axis=-1, name="norm"),
             h.make_node("Mul", ["n", "w"], ["y"], name="scaled")]
    if first != "LayerNormalization":  # the values near 1000 are made inside: the input is N(0, 1)
        nodes[:0] = [h.make_node("Add", ["x", "k"], ["s"], name="shift"), h.make_node("Max", ["s", "lo"], ["c"], name="max")]
    else:
        nodes[0].input[0] = "x"
    m = h.make_model(h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 64])], [h.make_tensor_value_info("y", T.FLOAT, [4, 64])],
        [nh.from_array(np.linspace(0.5, 1.5, 64, dtype=np.float32), "scale"),
         nh.from_array(np.linspace(-1, 1, 64, dtype=np.float32), "bias"),
         nh.from_array(np.linspace(1, 2, 64, dtype=np.float32), "w")]
        + ([nh.from_array(np.array(1000.0, np.float32), "k"), nh.from_array(np.array(0.0, np.float32), "lo")]
           if first != "LayerNormalization" else [])),
        opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _ort_run(model, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_nodes_kept_for_their_values_keep_their_weights_in_half():
    # values near 1000 made inside the model (the input is N(0, 1): its rounding moves nothing):
    # the nodes kept float32 compute from their weights stored in half
    m = _shifted_norm_model("Add")
    feeds = {"x": RNG.standard_normal((4, 64)).astype(np.float32)}
    result, report = _fit(m, [feeds], 1e-2)
    assert report.fitted.weights_half and report.fitted.all_half > 0.1 and report.fitted.floor < 1e-3
    kept = {k.label: k.reason for k in report.kept}
    assert "node 'norm' (LayerNormalization)" in kept
    assert kept["node 'norm' (LayerNormalization)"].endswith("(computed in float32, its weights stored in half)")
    types = {t.name: t.data_type for t in result.graph.initializer}
    assert types["scale"] == types["bias"] == types["w"] == types["k"] == T.FLOAT16
    norm = next(n for n in result.graph.node if n.op_type == "LayerNormalization")
    for i, weight in ((1, "scale"), (2, "bias")):
        cast = next(n for n in result.graph.node if n.output[0] == norm.input[i])
        assert cast.op_type == "Cast" and cast.input[0] == weight and cast.attribute[0].i == T.FLOAT
    onnx.checker.check_model(result, full_check=True)
    assert _ort_error(m, result, feeds) <= 1e-2
    assert "weights stored in half" in report.fitted.line()


def test_the_judge_allows_twice_the_floor_of_the_inputs_rounded_alone():
    # LayerNormalization of inputs near 1000: rounding the input alone to float16 moves the
    # float32 model by its floor (measured here in ONNX Runtime on the input rounded by numpy);
    # an output within max(1e-2, 2 x floor) is within the limit, so nothing is kept
    m = _shifted_norm_model()
    feeds = {"x": (1000 + np.random.default_rng(8).standard_normal((4, 64))).astype(np.float32)}  # (RNG's draws kept)
    floor = half_error(_ort_run(m, feeds), _ort_run(m, {"x": feeds["x"].astype(np.float16).astype(np.float32)}))
    assert floor > 0.05
    result, report = _fit(m, [feeds], 1e-2)
    assert report.fitted.kept == 0 and report.fitted.floor == pytest.approx(floor, rel=1e-3)
    assert 1e-2 < _ort_error(m, result, feeds, reference=False) <= 2 * floor
    assert f"floor {floor:.2g} (an output's error counts against max(0.01, 2 x its floor)" in report.fitted.line()
    # the half result rounds no input when its first consumers compute in float32: floor 0, limit as given
    def convert(keep_at=None, weights_half=False):
        return convert_precision_proto(m, "float16", keep_at=keep_at, weights_half=weights_half,
                                       keep_io_precision=True)

    from rewriter.precision.fallback import fit_max_error

    result, report = fit_max_error(convert, m, None, [feeds], 1e-2)
    assert report.fitted.floor == 0 and report.fitted.kept == 0 and report.fitted.all_half <= 1e-2
    assert _ort_error(m, result, feeds) <= 1e-2


def test_half_error_scales_each_output_by_its_floor():
    a = [np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)]
    b = [np.array([1.0, 2.2], np.float32), np.array([3.0, 4.0], np.float32)]
    error = 0.2 / np.sqrt(5)
    assert half_error(a, b, [0.0, 0.0], 1e-2) == pytest.approx(error, rel=1e-4)
    assert half_error(a, b, [0.001, 0.3], 1e-2) == pytest.approx(error, rel=1e-4)  # 2 x 0.001 < 1e-2
    assert half_error(a, b, [0.05, 0.0], 1e-2) == pytest.approx(error * 1e-2 / 0.1, rel=1e-4)
    assert half_error(a, b, [float("inf"), 0.0], 1e-2) == pytest.approx(error, rel=1e-4)  # no floor: the limit


def test_inputs_in_half_are_judged_against_their_floor():
    # --no-keep-io-types: the input itself is float16, and rounding it alone gives y = 0 (floor 1):
    # the error counts against 2 x 1, so nothing is kept (the summary shows the floor)
    m, x = _near_one_model(), NEAR_ONE["x"]
    assert np.all(x.astype(np.float16) == 1)
    result, report = _fit(m, [{"x": x}], 1e-2, keep_io_types=False)
    assert report.fitted.kept == 0 and report.fitted.floor == 1.0
    assert "floor 1 (an output's error counts against max(0.01, 2 x its floor)" in report.fitted.line()


def _overflowing_model():
    """y = x * 1000 with integer x up to 124 (exact in float16: floor 0): y beyond float16's range."""
    return h.make_model(h.make_graph([h.make_node("Mul", ["x", "k"], ["y"])], "g",
                                     [h.make_tensor_value_info("x", T.FLOAT, [64])],
                                     [h.make_tensor_value_info("y", T.FLOAT, [64])],
                                     [nh.from_array(np.array(1000.0, np.float32), "k")]),
                        opset_imports=[h.make_opsetid("", 17)])


def test_a_limit_the_float32_nodes_cannot_meet_is_an_error_and_nothing_is_written(tmp_path):
    m, x = _overflowing_model(), np.arange(61, 125, dtype=np.float32)
    with pytest.raises(RewriterError, match=r"--max-error 0.01 cannot be met: with every node float32 \(weights too\) "
                                            r"the error .* "
                                            r"drop --no-keep-io-types\); nothing was written"):
        _fit(m, [{"x": x}], 1e-2, keep_io_types=False)
    src, out, data = tmp_path / "m.onnx", tmp_path / "h.onnx", tmp_path / "x.npz"
    onnx.save(m, src)
    np.savez(data, x=x)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16",
                          "--no-keep-io-types", "--calibration-data", str(data), "--max-error", "1e-2",
                          "-o", str(out)], capture_output=True, text=True)
    assert run.returncode != 0 and "cannot be met" in run.stderr
    assert not os.path.exists(out)


@pytest.mark.parametrize("args, message", [
    (["--opset", "18", "--max-error", "0.01"], "--max-error: only for --dtype"),
    (["--dtype", "float16", "--max-error", "0"], "--max-error must be a number > 0"),
    (["--dtype", "float16", "--max-error", "nan"], "--max-error must be a number > 0"),
    (["--dtype", "bfloat16", "--calibration-data", "x.npz"], "bfloat16 has float32's range, there is nothing "
                                                              "to calibrate (the data serves --max-error and --verify)")])
def test_bad_max_error_flags_are_usage_errors(tmp_path, args, message):
    src = tmp_path / "m.onnx"
    onnx.save(_cancelling_model(), src)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), *args, "-o", str(tmp_path / "o.onnx")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and message in run.stderr, run.stderr


def test_bfloat16_takes_calibration_data_for_verify(tmp_path):
    src, out, data = tmp_path / "m.onnx", tmp_path / "h.onnx", tmp_path / "x.npz"
    onnx.save(_cancelling_model(0.0, 0.0), src)  # adds and subtracts 0: only the MatMuls round
    np.savez(data, **SAMPLE)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "bfloat16", "--verify",
                          "--rtol", "0.1", "--calibration-data", str(data), "-o", str(out)],
                         capture_output=True, text=True)
    assert "numerical check on the first --calibration-data sample" in run.stdout, run.stderr
    assert run.returncode == 0, run.stderr


def test_bfloat16_takes_calibration_data_for_max_error(tmp_path):
    run, _ = _convert_with_sample(tmp_path, _cancelling_model(), "bfloat16", "0.05")
    fit = json.loads(run.stdout)["changes"]["precision"]["max_error"]
    assert fit["error"] <= 0.05 < fit["all_half"]


def test_the_api_calibrates_on_calibration_data_as_the_cli_and_refuses_a_bad_limit():
    """calibration_data without max_error is --calibration-data without --max-error: the
    magnitudes are measured on it (the same model as calibrate=True on the same data)."""
    model = _cancelling_model()
    alone = rewriter.convert_precision(model, "float16", calibration_data=[SAMPLE])
    both = rewriter.convert_precision(model, "float16", calibrate=True, calibration_data=[SAMPLE])
    assert alone.SerializeToString() == both.SerializeToString()
    for bad in (-1.0, 0.0, float("nan")):
        with pytest.raises(RewriterError, match="max_error must be a number > 0"):
            rewriter.convert_precision(_cancelling_model(), "float16", max_error=bad)


def test_half_error_counts_what_differs():
    a = [np.array([1.0, 2.0], np.float32), np.array([1, 2], np.int64)]
    assert half_error(a, [np.array([1.0, 2.0], np.float32), np.array([1, 2], np.int64)]) == 0.0
    assert half_error(a, [np.array([1.0, 2.1], np.float32), np.array([1, 2], np.int64)]) == pytest.approx(
        0.1 / np.sqrt(5), rel=1e-3)
    assert half_error(a, [np.array([1.0, 2.0], np.float32), np.array([1, 3], np.int64)]) == float("inf")
    assert half_error(a, [np.array([1.0, np.nan], np.float32), a[1]]) == float("inf")
    assert half_error(a, [np.array([1.0, 2.0, 3.0], np.float32), a[1]]) == float("inf")
    tiny = [np.full(4, 1e-9, np.float32)]
    assert half_error(tiny, [np.full(4, 2e-9, np.float32)]) == 0.0  # all near 0: within the RMS floor


def test_a_bfloat16_result_cpu_onnxruntime_cannot_run_is_written_with_a_warning(tmp_path):
    # ONNX Runtime's CPU provider has no bfloat16 MatMul: the result is for a runtime that has one
    src, out = tmp_path / "m.onnx", tmp_path / "h.onnx"
    onnx.save(_cancelling_model(), src)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "bfloat16", "-o", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "warning: ONNX Runtime's CPU provider cannot run this bfloat16 result" in run.stderr
    assert "NOT_IMPLEMENTED" in run.stderr
    result = onnx.load(out)
    onnx.checker.check_model(result, full_check=True)
    assert next(t for t in result.graph.initializer if t.name == "w0").data_type == T.BFLOAT16


def test_nodes_inside_a_subgraph_are_kept_where_they_matter():
    # the cancelling pair lives in an If branch: the search reaches subgraph nodes too
    then = h.make_graph([h.make_node("Add", ["m0", "up_by"], ["up"], name="up"),
                         h.make_node("Sub", ["up", "down_by"], ["t"], name="down")], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, [4, 16])],
                        [nh.from_array(np.array(1000.3, np.float32), "up_by"),
                         nh.from_array(np.array(1000.2, np.float32), "down_by")])
    other = h.make_graph([h.make_node("Neg", ["m0"], ["e"], name="neg")], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, [4, 16])])
    nodes = [h.make_node("MatMul", ["x", "w0"], ["m0"], name="mm0"),
             h.make_node("If", ["c"], ["v"], then_branch=then, else_branch=other, name="if"),
             h.make_node("Relu", ["v"], ["r"], name="relu"), h.make_node("MatMul", ["r", "w1"], ["y"], name="mm1")]
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 16]),
                                               h.make_tensor_value_info("c", T.BOOL, [])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [4, 16])],
                                  [nh.from_array((RNG.standard_normal((16, 16)) / 4).astype(np.float32), f"w{i}")
                                   for i in range(2)]),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    feeds = {**SAMPLE, "c": np.array(True)}
    result, report = _fit(m, [feeds], 1e-2)
    assert report.fitted.all_half > 5e-2 and report.fitted.error <= 1e-2
    assert sorted(k.label for k in report.kept if k.code == "max-error") == [
        "node 'down' (Sub)", "node 'up' (Add)"]
    assert report.half_by_op == {"MatMul": 2, "Neg": 1, "Relu": 1}
    assert _ort_error(m, result, feeds) <= 1e-2


def test_the_pass_takes_max_error_as_the_function_does():
    import onnx_ir as ir

    p = rewriter.ConvertPrecisionPass("float16", max_error=1e-2, calibration_data=[SAMPLE])
    result = p(ir.from_proto(_cancelling_model()))
    assert result.modified and p.report.fitted.kept == 2 and p.report.fitted.error <= 1e-2
    assert sorted(k.label for k in p.report.kept if k.code == "max-error") == [
        "node 'down' (Sub)", "node 'up' (Add)"]


def test_only_the_half_slots_of_a_node_kept_with_weights_in_half_are_stored_in_half():
    from rewriter.precision.plan import NodePlan, Plan

    node = h.make_node("Resize", ["x", "", "scales"], ["y"])
    key = (0, 0)
    plan = Plan("float16", {key: NodePlan(node, None, False, "kept", frozenset({0}), weights_half=True)},
                key=lambda n: key if n is node else None)
    assert plan.stores_half(node, 0) and not plan.stores_half(node, 2)  # scales: a float-only slot
    plan.nodes[key].weights_half = False
    assert not plan.stores_half(node, 0)
    plan.nodes[key] = NodePlan(node, None, True, "", frozenset({0}), weights_half=True)
    assert not plan.stores_half(node, 0)  # a half node reads half values: no Cast to float32
    assert not Plan("float16", {}).stores_half(node, 0)


def test_verify_runs_on_the_first_calibration_sample(tmp_path):
    src, out, data = tmp_path / "m.onnx", tmp_path / "h.onnx", tmp_path / "x.npz"
    onnx.save(_cancelling_model(), src)
    np.savez(data, **SAMPLE)
    base = [sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "--verify",
            "--calibration-data", str(data), "-o", str(out)]
    run = subprocess.run(base, capture_output=True, text=True)
    assert run.returncode == 1 and not os.path.exists(out)
    assert "numerical check on the first --calibration-data sample (onnxruntime):" in run.stdout
    assert "; --max-error R (measured on --calibration-data) keeps float32" in run.stderr
    run = subprocess.run(base + ["--max-error", "0.01"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "numerical check on the first --calibration-data sample (onnxruntime):" in run.stdout


def test_verify_numerics_takes_the_inputs_given():
    from rewriter.verify.numerics import verify_numerics

    def unary(op):
        return h.make_model(h.make_graph([h.make_node(op, ["x"], ["y"])], "g",
                                         [h.make_tensor_value_info("x", T.FLOAT, [8])],
                                         [h.make_tensor_value_info("y", T.FLOAT, [8])]),
                            opset_imports=[h.make_opsetid("", 17)])

    positive = {"x": np.linspace(0.5, 4, 8, dtype=np.float32)}  # Relu and Abs agree here only
    report = verify_numerics(unary("Relu"), unary("Abs"), feeds=positive, feeds_are="the samples")
    assert report.ok and report.inputs == "the samples"
    assert report.summary_lines()[0] == "numerical check on the samples (onnxruntime):"
    assert report.to_dict()["inputs"] == "the samples" and report.to_dict()["seed"] is None
    random = verify_numerics(unary("Relu"), unary("Abs"))
    assert not random.ok and random.to_dict()["inputs"] == "random"
    assert random.summary_lines()[0].startswith("numerical check on random inputs (seed 0, ")


def test_a_filter_bank_computing_from_half_weights_gets_float32_weights_when_they_matter():
    # the waveform's Conv keeps float32 arithmetic by rule, its weights in half: a limit tighter than
    # those weights' rounding takes them float32 too (it is a candidate like the nodes in half)
    from tests.precision.test_signal_paths import TONE, _conv_front_end, _dft_basis

    m = _conv_front_end(_dft_basis(exact=False))
    plain, report = convert_precision_proto(m, "float16")
    assert report.applied.weights_stored_half == 1
    result, report = _fit(m, [{"x": TONE}], 1e-3)
    assert report.fitted.all_half > 1e-3 >= report.fitted.error and not report.fitted.weights_half
    assert next(t for t in result.graph.initializer if t.name == "basis").data_type == T.FLOAT
    assert _ort_error(m, result, {"x": TONE}, reference=False) <= 1e-3
