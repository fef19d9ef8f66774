"""convert --dtype on models whose weights are references (external data, big inline tensors):
the half tensors stay references to the float32 bytes until they are written, converted in
chunks on the way to the file, and come out exactly as converting the whole array in memory
makes them (a weight's filter sums kept: :mod:`rewriter.precision.rounding`)."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.io import load_model, save_model
from rewriter.io.tensors import DEFERRED_KEY
from rewriter.precision.rounding import to_half
from rewriter.precision import convert_precision_proto

RNG = np.random.default_rng(3)
F16_LOWEST = float(np.finfo(np.float16).min)


def _masked_model(w, mask):
    """y = Softmax(x @ W + mask): W a weight, mask an additive mask of -1e9 fills."""
    nodes = [h.make_node("MatMul", ["x", "W"], ["xw"]), h.make_node("Add", ["xw", "M"], ["s"]),
             h.make_node("Softmax", ["s"], ["y"], axis=-1)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, w.shape[0]])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4, w.shape[1]])],
                     [nh.from_array(w, "W"), nh.from_array(mask, "M")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _sources():
    w = RNG.standard_normal((512, 1024)).astype(np.float32)  # 2 MiB: a reference once loaded
    mask = np.where(RNG.random((4, 1024)) < 0.3, np.float32(-1e9), np.float32(0)).astype(np.float32)
    return w, mask


def _tensor(model, name):
    return next(t for t in model.graph.initializer if t.name == name)


@pytest.mark.parametrize("external", [False, True])
def test_references_stay_references_until_written(tmp_path, external):
    w, mask = _sources()
    m = _masked_model(w, mask)
    src = tmp_path / "m.onnx"
    onnx.save(m, src, save_as_external_data=external, size_threshold=1024, location="m.onnx.data")
    loaded = load_model(src)
    result, report = convert_precision_proto(loaded, "float16", base_dir=str(tmp_path))
    half_w = _tensor(result, "W")
    assert half_w.data_type == T.FLOAT16
    assert half_w.data_location == T.EXTERNAL and any(e.key == DEFERRED_KEY for e in half_w.external_data)
    assert result.ByteSize() < 64 * 1024  # the 2 MiB weight is not held in the proto
    out = tmp_path / "out.onnx"
    written = save_model(result, out, base_dir=str(tmp_path))
    assert (len(written) == 2) == external  # external stays external, inline stays inline
    saved = onnx.load(out)
    got = nh.to_array(_tensor(saved, "W"))
    # W is a MatMul weight: each column's sum kept, as the whole array converted in memory has it
    whole = to_half(w, T.FLOAT16, False, ("cols", w.shape[1]))
    assert got.dtype == np.float16 and np.array_equal(got.view(np.uint16), whole.view(np.uint16))
    assert not np.array_equal(whole, w.astype(np.float16))  # (some values rounded the other way)
    assert not any(e.key.startswith("__rewriter") for t in saved.graph.initializer for e in t.external_data)
    onnx.checker.check_model(str(out), full_check=True)
    x = RNG.standard_normal((4, 512)).astype(np.float32)
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2


def test_a_clamped_mask_is_clamped_as_it_is_written(tmp_path):
    w = RNG.standard_normal((64, 1024)).astype(np.float32)
    mask = np.where(RNG.random((4, 1024)) < 0.3, np.float32(-1e9), np.float32(0)).astype(np.float32)
    big_mask = np.concatenate([mask] * 80)  # 1.3 MiB: the loader leaves it in the file
    nodes = [h.make_node("MatMul", ["x", "W"], ["xw"]), h.make_node("Add", ["xw", "M"], ["s"]),
             h.make_node("Softmax", ["s"], ["y"], axis=-1)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [320, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [320, 1024])],
                     [nh.from_array(w, "W"), nh.from_array(big_mask, "M")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    out = tmp_path / "out.onnx"
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out),
                        "--verify"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    saved = onnx.load(out)
    got = nh.to_array(_tensor(saved, "M"))
    assert got.dtype == np.float16
    assert np.array_equal(got, np.where(big_mask < 0, np.float16(F16_LOWEST), np.float16(0)))
    assert os.path.getsize(out) < 0.6 * os.path.getsize(src)


def test_bfloat16_references_round_as_in_memory(tmp_path):
    w, mask = _sources()
    m = _masked_model(w, np.zeros((4, 1024), np.float32))
    src = tmp_path / "m.onnx"
    onnx.save(m, src, save_as_external_data=True, location="m.data")
    result, _ = convert_precision_proto(load_model(src), "bfloat16", base_dir=str(tmp_path))
    save_model(result, tmp_path / "out.onnx", base_dir=str(tmp_path))
    got = onnx.load(tmp_path / "out.onnx")
    half = _tensor(got, "W")
    assert half.data_type == T.BFLOAT16
    whole = to_half(w, T.BFLOAT16, False, ("cols", w.shape[1]))
    assert whole.dtype == ml_dtypes.bfloat16
    assert np.array_equal(np.frombuffer(half.raw_data, np.uint16), whole.view(np.uint16).ravel())


def test_a_file_cannot_ask_for_conversion(tmp_path):
    """The private key is the loader's to set: one written in a file converts nothing."""
    value = RNG.standard_normal((8,)).astype(np.float16)
    (tmp_path / "w.bin").write_bytes(value.tobytes())
    t = onnx.TensorProto(name="W", data_type=T.FLOAT16, dims=[8], data_location=T.EXTERNAL)
    for k, v in (("location", "w.bin"), (DEFERRED_KEY, "half:clamp")):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = h.make_graph([h.make_node("Identity", ["W"], ["y"])], "g", [], [h.make_tensor_value_info("y", T.FLOAT16, [8])],
                     [t])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with open(tmp_path / "m.onnx", "wb") as f:
        f.write(m.SerializeToString())
    from rewriter.io import read_external_tensor

    loaded = load_model(tmp_path / "m.onnx")
    assert np.array_equal(read_external_tensor(_tensor(loaded, "W"), None), value)
    save_model(loaded, tmp_path / "out.onnx")
    assert np.array_equal(nh.to_array(_tensor(onnx.load(tmp_path / "out.onnx"), "W")), value)


def test_cli_result_with_converted_references_passes_the_load_gate(tmp_path):
    """The command's own gate loads the result in ONNX Runtime before writing it: references
    still holding float32 bytes are given to it converted."""
    w, mask = _sources()
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_masked_model(w, mask), src)  # W inline, 2 MiB: the loader leaves it in the file
    r = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert nh.to_array(_tensor(onnx.load(out), "W")).dtype == np.float16
