"""save_model / load_model policies: what a destination may be, where tensors go by default,
and what a reference may point at.

Oracles: onnx.load (its own external-data loader), ONNX Runtime on the written files, the
file system (modes, links, listings).
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import io as model_io
from rewriter.errors import ModelLoadError, RewriterError


def _model(n: int = 512) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, n, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _run(path, n: int = 512):
    x = np.linspace(1, 2, n, dtype=np.float32)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_returns_the_files_written(tmp_path):
    assert model_io.save_model(_model(), tmp_path / "a.onnx") == [str(tmp_path / "a.onnx")]
    written = model_io.save_model(_model(), tmp_path / "b.onnx", external_data="always")
    assert written == [str(tmp_path / "b.onnx"), str(tmp_path / "b.onnx.data")]
    assert all(os.path.isfile(f) for f in written)


def test_read_only_destination_is_refused_and_untouched(tmp_path):
    out = tmp_path / "a.onnx"
    out.write_bytes(b"keep")
    out.chmod(0o444)
    with pytest.raises(RewriterError, match="read-only"):
        model_io.save_model(_model(), out)
    assert out.read_bytes() == b"keep" and sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx"]


def test_symlink_destination_is_written_through(tmp_path):
    target = tmp_path / "t.onnx"
    target.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    written = model_io.save_model(_model(), link, external_data="always")
    assert link.is_symlink() and written == [str(target), str(target) + ".data"]
    np.testing.assert_array_equal(_run(link), _run(target))  # ORT finds the data through the link too
    onnx.checker.check_model(str(target), full_check=True)


def test_symlink_into_another_directory_with_external_data_is_refused(tmp_path):
    """Readers look for the data beside the link (ORT refuses a path that leaves its directory),
    so such a write could not be loaded through the link: refused; inline is fine."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.onnx"
    target.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    with pytest.raises(RewriterError, match="another directory"):
        model_io.save_model(_model(), link, external_data="always")
    assert target.read_bytes() == b"old"
    model_io.save_model(_model(), link)
    assert link.is_symlink()
    np.testing.assert_array_equal(_run(link), _run(target))


def test_new_tensors_join_the_inputs_external_data_and_inline_ones_stay(tmp_path):
    """keep_inline: the names the input held inline; other inline tensors >= 1 KiB are new."""
    model = _model()
    model.graph.initializer.append(numpy_helper.from_array(np.ones(4, np.float32), "small_new"))
    model.graph.initializer.append(numpy_helper.from_array(np.ones(600, np.float32), "was_inline"))
    model_io.save_model(model, tmp_path / "a.onnx", keep_inline={"was_inline"})
    raw = onnx.load(str(tmp_path / "a.onnx"), load_external_data=False)
    where = {t.name: t.data_location for t in raw.graph.initializer}
    assert where == {"w": TensorProto.EXTERNAL, "small_new": TensorProto.DEFAULT, "was_inline": TensorProto.DEFAULT}
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(onnx.load(str(tmp_path / "a.onnx")).graph.initializer[0]),
                                  np.linspace(0.5, 1.5, 512, dtype=np.float32))


def test_small_int64_tensors_stay_inline_so_onnx_runtime_loads_the_model(tmp_path):
    model = onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 18]>
        g (float[2,3] x) => (float[2,1] y) <int64[1] axes = {1}> { y = ReduceProd <keepdims=1> (x, axes) }''')
    model_io.save_model(model, tmp_path / "a.onnx", external_data="always")
    raw = onnx.load(str(tmp_path / "a.onnx"), load_external_data=False)
    assert raw.graph.initializer[0].data_location == TensorProto.DEFAULT
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = ort.InferenceSession(str(tmp_path / "a.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, x.prod(axis=1, keepdims=True))


def test_small_float_tensors_that_decide_a_shape_stay_inline_so_onnx_runtime_loads_the_model(tmp_path):
    # Resize's scales (a Constant node's value) and roi (an initializer), Range's bounds, OneHot's
    # depth: ONNX Runtime reads them when it loads the model; a weight of the same size still goes out
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, 4, dtype=np.float32).reshape(1, 1, 2, 2), "w")
    roi = numpy_helper.from_array(np.zeros(8, np.float32), "roi")
    start, limit = (numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("start", 0.0), ("limit", 4.0)))
    step = numpy_helper.from_array(np.array(1.0, np.float32), "step")
    nodes = [helper.make_node("Constant", [], ["scales"], value=numpy_helper.from_array(
                 np.array([1, 1, 2, 2], np.float32), "scales_value")),
             helper.make_node("Mul", ["x", "w"], ["m"]),
             helper.make_node("Resize", ["m", "roi", "scales"], ["r"], mode="nearest"),
             helper.make_node("Range", ["start", "limit", "step"], ["y2"]),
             helper.make_node("OneHot", ["idx", "depth", "values"], ["y3"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 1, 4, 4]),
                               helper.make_tensor_value_info("y2", TensorProto.FLOAT, [4]),
                               helper.make_tensor_value_info("y3", TensorProto.FLOAT, [2, 3])],
                              [w, roi, start, limit, step, numpy_helper.from_array(np.array([0, 2], np.int64), "idx"),
                               numpy_helper.from_array(np.array(3.0, np.float32), "depth"),
                               numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "values")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "m.onnx"
    model_io.save_model(model, path, external_data="always")
    saved = onnx.load(str(path), load_external_data=False)
    where = {t.name: t.data_location for t in saved.graph.initializer}
    where["scales"] = saved.graph.node[0].attribute[0].t.data_location
    external = TensorProto.EXTERNAL
    assert where == {"w": external, "roi": 0, "start": 0, "limit": 0, "step": 0, "scales": 0, "idx": 0, "depth": 0,
                     "values": external}
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    r, y2, y3 = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert r.shape == (1, 1, 4, 4) and y2.tolist() == [0, 1, 2, 3] and y3.tolist() == [[1, 0, 0], [0, 0, 1]]


def test_a_reference_to_the_model_file_itself_is_refused(tmp_path):
    model = _model(4)
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "a.onnx"), ("offset", "0"), ("length", "16"),
                       ("__rewriter_inline__", "1")):  # a forged loader marker does not help
        e = w.external_data.add()
        e.key, e.value = key, value
    onnx.save(model, tmp_path / "a.onnx")
    with pytest.raises(ModelLoadError, match="is the model file itself"):
        model_io.load_model(tmp_path / "a.onnx")


def test_big_inline_tensors_still_load_lazily_and_round_trip(tmp_path):
    """The loader's own marker (a per-load token) still works for what it cut out of the file."""
    n = 300_000
    onnx.save(_model(n), tmp_path / "a.onnx")
    loaded = model_io.load_model(tmp_path / "a.onnx")
    assert loaded.graph.initializer[0].data_location == TensorProto.EXTERNAL  # a reference, not parsed
    model_io.save_model(loaded, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
