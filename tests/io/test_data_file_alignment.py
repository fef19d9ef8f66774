"""Saving: each external tensor starts at an aligned offset.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

The oracle is the file system and onnx itself: the offsets are read back from the written
model's ``external_data`` entries, the bytes at each offset from the data file, and the model
is loaded by ``onnx.load`` and run by ONNX Runtime.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.io import load_model, save_model
from rewriter.io.tensors import ALIGN

F = TensorProto.FLOAT


def _odd_sized_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """y_n = x_n + n for float weights n of 1, 3, 5, 7, 11 elements (4..44 bytes: none a
    multiple of 64, so packed back to back they would not stay aligned)."""
    rng = np.random.default_rng(3)
    sizes = {"a": 1, "b": 3, "c": 5, "d": 7, "e": 11}
    weights = {n: rng.standard_normal(k).astype(np.float32) for n, k in sizes.items()}
    nodes, outputs = [], []
    for n, w in weights.items():
        nodes.append(h.make_node("Add", ["x_" + n, n], ["y_" + n]))
        outputs.append(h.make_tensor_value_info("y_" + n, F, [w.size]))
    inputs = [h.make_tensor_value_info("x_" + n, F, [w.size]) for n, w in weights.items()]
    graph = h.make_graph(nodes, "g", inputs, outputs, [nh.from_array(w, n) for n, w in weights.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model, weights


def _entries(t: onnx.TensorProto) -> dict[str, str]:
    return {e.key: e.value for e in t.external_data}


def _check_written(path: str, weights: dict[str, np.ndarray]) -> list[int]:
    """Every external tensor of the file at ``path``: offset % ALIGN == 0, its bytes at that
    offset, and the model loads and runs in ORT; returns the offsets."""
    written = onnx.load(path, load_external_data=False)
    data_path = path + ".data"
    assert os.path.exists(data_path)
    raw = open(data_path, "rb").read()
    offsets = []
    externals = [t for t in written.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    assert sorted(t.name for t in externals) == sorted(weights)
    for t in externals:
        e = _entries(t)
        assert e["location"] == os.path.basename(data_path)
        offset, length = int(e.get("offset", "0")), int(e["length"])
        assert offset % ALIGN == 0, (t.name, offset, ALIGN)
        assert offset % 64 == 0, (t.name, offset)
        want = np.ascontiguousarray(weights[t.name], "<f4").tobytes()
        assert length == len(want)
        assert raw[offset:offset + length] == want, t.name
        offsets.append(offset)
    assert len(set(offsets)) == len(offsets)
    # onnx's own loader and ONNX Runtime read the same values back
    full = onnx.load(path)
    for t in full.graph.initializer:
        np.testing.assert_array_equal(nh.to_array(t), weights[t.name])
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {f"x_{n}": np.full(w.shape, 0.5, np.float32) for n, w in weights.items()}
    got = session.run(None, feeds)
    for (n, w), g in zip(weights.items(), got):
        np.testing.assert_array_equal(g, w + np.float32(0.5))
    return offsets


def test_external_tensors_start_at_aligned_offsets(tmp_path):
    model, weights = _odd_sized_model()
    path = str(tmp_path / "m.onnx")
    written = save_model(model, path, external_data="always")
    assert written == [path, path + ".data"]
    offsets = _check_written(path, weights)
    assert ALIGN == 64
    assert max(offsets) >= 4 * ALIGN  # five tensors, each on its own 64-byte boundary


def test_aligned_offsets_when_copying_from_a_loaded_external_file(tmp_path):
    """The second save streams the tensors from the first file's data (the copy path)."""
    model, weights = _odd_sized_model()
    first = str(tmp_path / "first.onnx")
    save_model(model, first, external_data="always")
    loaded = load_model(first)
    second = str(tmp_path / "second.onnx")
    save_model(loaded, second)  # None: each tensor stays external, copied from first.onnx.data
    _check_written(second, weights)
    third = str(tmp_path / "third.onnx")
    save_model(loaded, third, external_data=1)  # a threshold: every weight is >= 1 byte
    _check_written(third, weights)


def test_aligned_offsets_with_a_size_threshold(tmp_path):
    model, weights = _odd_sized_model()
    path = str(tmp_path / "t.onnx")
    save_model(model, path, external_data=4)
    _check_written(path, weights)
