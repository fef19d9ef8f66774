"""bench/bench_runtime_targets.compare, the judge of the real-model table: float32 outputs within a
relative L2 of 1e-4, half outputs within their format's unit roundoff, integers equal."""

from __future__ import annotations

import importlib.util

import numpy as np

from tests.targets.runtime_runs import ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("bench_runtime_targets", ROOT / "bench" / "bench_runtime_targets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _off_by(rel: float, dtype) -> tuple[np.ndarray, np.ndarray]:
    want = np.linspace(1.0, 2.0, 64).astype(dtype)
    noise = np.resize([1.0, -1.0], 64) * rel * np.linalg.norm(want.astype(np.float64)) / 8.0
    return want, (want.astype(np.float64) + noise).astype(dtype)


def test_float32_within_1e_4_and_float16_within_its_roundoff():
    compare = _bench().compare
    for dtype, fine, off in [(np.float32, 5e-5, 3e-4), (np.float16, 5e-4, 3e-3)]:
        want, got = _off_by(fine, dtype)
        assert compare({"y": want}, {"y": got}, ["y"]) is None, dtype
        want, got = _off_by(off, dtype)
        assert "relative L2" in compare({"y": want}, {"y": got}, ["y"]), dtype


def test_integers_must_be_equal():
    compare = _bench().compare
    want = np.arange(6, dtype=np.int64)
    assert compare({"y": want}, {"y": want.copy()}, ["y"]) is None
    assert "1 of 6 integer elements differ" in compare({"y": want}, {"y": want + (want == 3)}, ["y"])


def test_a_cached_refusal_of_onnx_runtime_reads_back(tmp_path):
    """A model ONNX Runtime does not run is cached as such and read back from the cache as it was."""
    bench = _bench()
    model, sample = tmp_path / "m.onnx", tmp_path / "m.npz"
    model.write_bytes(b"not a model")
    np.savez(sample, x=np.zeros(1, np.float32))
    first = bench.ort_reference(model, sample, tmp_path / "cache")
    assert not first["ok"] and bench.ort_reference(model, sample, tmp_path / "cache") == first


def _judge_with(tmp_path, optimized: dict, plain: dict, got: dict, exact: dict | None = None) -> dict:
    """bench.judge on ``got`` with ONNX Runtime's two results stood in (default options: ``optimized``;
    without graph optimizations: ``plain``; its exact uint8 x int8 sums where they saturate: ``exact``)."""
    bench = _bench()
    bench._exact_int8_reference = lambda model, sample, cache: exact
    np.savez(tmp_path / "plain.npz", **{f"o{i}": v for i, v in enumerate(plain.values())})
    bench.ort_reference = lambda model, sample, cache, optimized=True: (
        {"ok": True, "outputs": list(plain), "file": str(tmp_path / "plain.npz")})
    bench.in_label_order = lambda ref, converted: ref
    return bench.judge(tmp_path / "m.onnx", tmp_path / "m.npz", tmp_path, optimized, got, {"outputs": list(got)}, "")


def test_judge_matches_either_of_onnx_runtimes_results_or_within_its_own_spread(tmp_path):
    base = np.linspace(1.0, 2.0, 64)
    wave = np.resize([1.0, -1.0], 64) * np.linalg.norm(base) / 8.0
    ort_all, ort_plain = base.astype(np.float32), (base + 1e-2 * wave).astype(np.float32)  # apart by 1e-2
    near = _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, {"y": (base + 5e-5 * wave).astype(np.float32)})
    assert near == {"verdict": "match", "reason": None}
    plain = _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, {"y": ort_plain.copy()})
    assert plain["verdict"] == "match" and plain["match_to"] == "ONNX Runtime without graph optimizations"
    between = _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, {"y": (base + 5e-3 * wave).astype(np.float32)})
    assert between["verdict"] == "match" and between["match_to"].startswith("within ONNX Runtime's own spread (0.01")
    assert "relative L2 0.005" in between["reason"]
    outside = _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, {"y": (base - 1.2e-2 * wave).astype(np.float32)})
    assert outside["verdict"] == "WRONG" and "match_to" not in outside
    assert "relative L2 0.012" in outside["reason"] and "own spread: relative L2 0.01" in outside["reason"]
    one_side = _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, {"y": (base - 8e-3 * wave).astype(np.float32)})
    assert one_side["verdict"] == "WRONG"  # within the spread of the default result, 1.8e-2 from the other


def test_integer_outputs_are_never_widened_by_the_spread(tmp_path):
    labels = np.array([0, 1, 2, 1], np.int64)
    scores = np.linspace(1.0, 2.0, 4).astype(np.float32)
    other = labels + (labels == 2)
    bench = _bench()
    assert bench.own_spread({"l": labels, "s": scores}, {"l": other, "s": scores * 1.1}) == 0.0
    assert abs(bench.own_spread({"s": scores}, {"s": scores * np.float32(1.1)}) - 0.1) < 1e-6
    two = bench.own_spread({"s": scores, "t": scores}, {"s": scores * np.float32(1.1), "t": scores})
    assert abs(two - 0.1) < 1e-6  # the largest of the outputs', not the last one's
    got = {"l": labels + (labels == 0), "s": scores * np.float32(1.05)}
    verdict = _judge_with(tmp_path, {"l": labels, "s": scores}, {"l": other, "s": scores * np.float32(1.1)}, got)
    assert verdict["verdict"] == "WRONG"
    same_labels = {"l": other.copy(), "s": scores * np.float32(1.1)}
    assert _judge_with(tmp_path, {"l": labels, "s": scores}, {"l": other, "s": scores * np.float32(1.1)},
                       same_labels)["verdict"] == "match"


def test_onnx_runtimes_exact_int8_sums_are_a_reference_where_this_cpu_saturates(tmp_path):
    """A result ONNX Runtime's two runs are too far from matches when it is within the bar of ONNX
    Runtime's exact uint8 x int8 sums (the run of the model with int8 weights read as uint8), and only then."""
    ort_all, ort_plain = np.array([1, 2, 3], np.int64), np.array([1, 2, 4], np.int64)
    got = {"y": np.array([1, 5, 3], np.int64)}
    assert _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, got)["verdict"] == "WRONG"
    exact = _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, got, exact={"y": got["y"].copy()})
    assert exact["verdict"] == "match" and "exact uint8 x int8" in exact["match_to"]
    other = _judge_with(tmp_path, {"y": ort_all}, {"y": ort_plain}, got, exact={"y": np.array([1, 5, 4], np.int64)})
    assert other["verdict"] == "WRONG"
