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
