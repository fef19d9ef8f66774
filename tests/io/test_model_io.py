"""model_io: lazy loading of big tensors, read_external_tensor, streamed atomic save, layouts.

Oracles: onnx.load (with its own external-data loader), numpy_helper.to_array of the
original tensors, ONNX Runtime on the written files, byte comparison of files.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import io as model_io
from rewriter.errors import ModelLoadError, RewriterError

BIG = 300_000  # float32 elements: 1.2 MB, over model_io.INLINE_THRESHOLD


def _model(w: np.ndarray, opset: int = 13) -> onnx.ModelProto:
    init = numpy_helper.from_array(w, "w")
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(w.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(w.shape))], [init])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _big() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(BIG).astype(np.float32)


def _run(path: str, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _external(tensor: TensorProto, location: str, offset: int = 0, length: int | None = None) -> None:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = tensor.external_data.add()
        e.key, e.value = k, v


def test_small_model_round_trips_byte_identical(tmp_path):
    m = _model(np.arange(6, dtype=np.float32).reshape(2, 3))
    onnx.save(m, tmp_path / "a.onnx")
    model_io.save_model(model_io.load_model(tmp_path / "a.onnx"), tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_big_inline_tensor_is_not_parsed_and_round_trips(tmp_path):
    w = _big()
    onnx.save(_model(w), tmp_path / "a.onnx")
    loaded = model_io.load_model(tmp_path / "a.onnx")
    assert loaded.ByteSize() < 10_000  # the 1.2 MB of weights stayed in the file
    t = loaded.graph.initializer[0]
    assert t.data_location == TensorProto.EXTERNAL
    value = model_io.read_external_tensor(t, None)
    assert isinstance(value, np.memmap) and not value.flags.writeable
    np.testing.assert_array_equal(value, w)
    model_io.save_model(loaded, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["a.onnx", "b.onnx"]  # no data file, no temporaries


def test_big_tensors_in_subgraph_constant_and_function_round_trip(tmp_path):
    w = _big()
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(w, "cv"))
    then_g = helper.make_graph([helper.make_node("Identity", ["sub_w"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [BIG])],
                               [numpy_helper.from_array(w + 1, "sub_w")])
    else_g = helper.make_graph([helper.make_node("Identity", ["c"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [BIG])])
    fn = helper.make_function("local", "F", ["a"], ["b"], [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(w * 2, "k")),
        helper.make_node("Add", ["a", "k"], ["b"])], [helper.make_opsetid("", 13)])
    nodes = [const, helper.make_node("If", ["cond"], ["i"], then_branch=then_g, else_branch=else_g),
             helper.make_node("F", ["i"], ["y"], domain="local")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [BIG])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                          functions=[fn])
    onnx.save(m, tmp_path / "a.onnx")
    loaded = model_io.load_model(tmp_path / "a.onnx")
    assert loaded.ByteSize() < 10_000
    for layout in (None, "always", "never"):
        model_io.save_model(loaded, tmp_path / "b.onnx", external_data=layout)
        onnx.checker.check_model(str(tmp_path / "b.onnx"), full_check=True)
        sess = ort.InferenceSession(str(tmp_path / "b.onnx"), providers=["CPUExecutionProvider"])
        for cond, expected in ((True, (w + 1) + w * 2), (False, w + w * 2)):
            np.testing.assert_array_equal(sess.run(None, {"cond": np.array(cond)})[0], expected)
    model_io.save_model(loaded, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


@pytest.mark.parametrize("dtype, onnx_type", [
    (np.float16, TensorProto.FLOAT16), (ml_dtypes.bfloat16, TensorProto.BFLOAT16),
    (np.int64, TensorProto.INT64), (np.uint32, TensorProto.UINT32), (np.bool_, TensorProto.BOOL),
    (np.float64, TensorProto.DOUBLE), (np.uint64, TensorProto.UINT64)])
def test_read_external_tensor_dtypes(tmp_path, dtype, onnx_type):
    value = (np.arange(24) % 7).reshape(2, 3, 4).astype(dtype)
    data = b"garbage!" + value.astype(np.dtype(dtype).newbyteorder("<")).tobytes()
    (tmp_path / "d.bin").write_bytes(data)
    t = TensorProto(name="t", data_type=onnx_type, dims=[2, 3, 4])
    _external(t, "d.bin", offset=8, length=len(data) - 8)
    got = model_io.read_external_tensor(t, str(tmp_path))
    assert got.dtype == np.dtype(dtype) and got.shape == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(got), value)


def test_read_external_tensor_int4_and_scalar(tmp_path):
    (tmp_path / "d.bin").write_bytes(bytes([0x21, 0x03]) + np.int64(-5).tobytes())
    t = TensorProto(name="q", data_type=TensorProto.INT4, dims=[3])
    _external(t, "d.bin", 0, 2)
    np.testing.assert_array_equal(model_io.read_external_tensor(t, str(tmp_path)).astype(np.int8), [1, 2, 3])
    s = TensorProto(name="s", data_type=TensorProto.INT64, dims=[])
    _external(s, "d.bin", 2, 8)
    assert int(model_io.read_external_tensor(s, str(tmp_path))) == -5


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "/etc/passwd"])
def test_read_external_tensor_refuses_escapes(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    inner = tmp_path / "m"
    (inner / "sub").mkdir(parents=True)
    t = TensorProto(name="t", data_type=TensorProto.FLOAT, dims=[4])
    _external(t, location, 0, 16)
    with pytest.raises(ModelLoadError, match="refused"):
        model_io.read_external_tensor(t, str(inner))


def test_symlink_escape_is_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    (tmp_path / "m").mkdir()
    os.symlink(tmp_path / "secret.bin", tmp_path / "m" / "link.bin")
    m = _model(np.zeros(4, np.float32))
    _external(m.graph.initializer[0], "link.bin", 0, 16)
    onnx.save(m, tmp_path / "m" / "a.onnx")
    with pytest.raises(ModelLoadError, match="links outside"):
        model_io.load_model(tmp_path / "m" / "a.onnx")


def test_smuggled_base_directory_is_ignored(tmp_path):
    (tmp_path / "secret.bin").write_bytes(np.ones(4, np.float32).tobytes())
    (tmp_path / "m").mkdir()
    m = _model(np.zeros(4, np.float32))
    _external(m.graph.initializer[0], "secret.bin", 0, 16)
    e = m.graph.initializer[0].external_data.add()
    e.key, e.value = "__rewriter_base__", str(tmp_path)
    onnx.save(m, tmp_path / "m" / "a.onnx")
    with pytest.raises(ModelLoadError, match="does not exist"):
        model_io.load_model(tmp_path / "m" / "a.onnx")


@pytest.mark.parametrize("layout, inline_names", [
    (None, {"small"}), ("never", {"small", "w"}), ("always", set()), (1000, {"small"}), (10 ** 9, {"small", "w"})])
def test_external_data_layouts(tmp_path, layout, inline_names):
    w = _big()
    m = _model(w)
    m.graph.node.append(helper.make_node("Mul", ["y", "small"], ["z"]))
    m.graph.initializer.append(numpy_helper.from_array(np.full((1,), 3, np.float32), "small"))
    m.graph.output[0].name = "z"
    onnx.save(m, tmp_path / "a.onnx", save_as_external_data=True, location="weights.bin", size_threshold=1024)
    model_io.save_model(model_io.load_model(tmp_path / "a.onnx"), tmp_path / "b.onnx", external_data=layout)
    raw = onnx.load(str(tmp_path / "b.onnx"), load_external_data=False)
    inline = {t.name for t in raw.graph.initializer if t.data_location != TensorProto.EXTERNAL}
    assert inline == inline_names
    for t in raw.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            assert {e.key: e.value for e in t.external_data}["location"] == "b.onnx.data"
            assert not any(e.key.startswith("__") for e in t.external_data)
    x = np.ones(BIG, np.float32)
    np.testing.assert_array_equal(_run(str(tmp_path / "b.onnx"), x), (x + w) * 3)


def test_output_never_references_input_data_and_survives_its_deletion(tmp_path):
    w = _big()
    onnx.save(_model(w), tmp_path / "a.onnx", save_as_external_data=True, location="weights.bin")
    model_io.save_model(model_io.load_model(tmp_path / "a.onnx"), tmp_path / "b.onnx")
    os.unlink(tmp_path / "weights.bin")
    x = np.ones(BIG, np.float32)
    np.testing.assert_array_equal(_run(str(tmp_path / "b.onnx"), x), x + w)


def test_overwrite_in_place_with_own_data_file(tmp_path):
    w = _big()
    onnx.save(_model(w), tmp_path / "a.onnx", save_as_external_data=True, location="a.onnx.data")
    for layout in ("always", None, "never", "always"):
        model_io.save_model(model_io.load_model(tmp_path / "a.onnx"), tmp_path / "a.onnx", external_data=layout)
        x = np.ones(BIG, np.float32)
        np.testing.assert_array_equal(_run(str(tmp_path / "a.onnx"), x), x + w)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".rewriter-")]


def test_failed_save_leaves_destination_untouched(tmp_path, monkeypatch):
    w = _big()
    onnx.save(_model(w), tmp_path / "a.onnx", save_as_external_data=True, location="a.onnx.data")
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    loaded = model_io.load_model(tmp_path / "a.onnx")
    from rewriter.io import save as model_save

    def broken_sendfile(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_save.os, "sendfile", broken_sendfile)
    with pytest.raises(RewriterError, match="No space left"):
        model_io.save_model(loaded, tmp_path / "a.onnx", external_data="never")
    assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} == before


def test_save_does_not_mutate_its_argument(tmp_path):
    onnx.save(_model(_big()), tmp_path / "a.onnx")
    loaded = model_io.load_model(tmp_path / "a.onnx")
    snapshot = loaded.SerializeToString()
    model_io.save_model(loaded, tmp_path / "b.onnx", external_data="always")
    model_io.save_model(loaded, tmp_path / "c.onnx", external_data="never")
    assert loaded.SerializeToString() == snapshot


def test_over_protobuf_limit_goes_external_or_fails_with_never(tmp_path, monkeypatch):
    from rewriter.io import save as model_save

    monkeypatch.setattr(model_save, "PROTOBUF_LIMIT", 100_000)  # stands in for 2 GiB
    w = _big()
    onnx.save(_model(w), tmp_path / "a.onnx")
    loaded = model_io.load_model(tmp_path / "a.onnx")
    model_io.save_model(loaded, tmp_path / "b.onnx")
    raw = onnx.load(str(tmp_path / "b.onnx"), load_external_data=False)
    assert raw.graph.initializer[0].data_location == TensorProto.EXTERNAL
    x = np.zeros(BIG, np.float32)
    np.testing.assert_array_equal(_run(str(tmp_path / "b.onnx"), x), w)
    with pytest.raises(RewriterError, match="2 GiB"):
        model_io.save_model(loaded, tmp_path / "c.onnx", external_data="never")
    assert not (tmp_path / "c.onnx").exists()


def test_new_output_gets_umask_permissions(tmp_path):
    onnx.save(_model(np.zeros(3, np.float32)), tmp_path / "a.onnx")
    old = os.umask(0o022)
    try:
        model_io.save_model(model_io.load_model(tmp_path / "a.onnx"), tmp_path / "b.onnx")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "b.onnx").st_mode & 0o777 == 0o644


@pytest.mark.parametrize("option, external", [(None, True), ("never", False), ("always", True),
                                              (str(BIG * 4 + 1), False), (str(BIG * 4), True)])
def test_cli_external_data_option(tmp_path, capsys, option, external):
    from rewriter import cli

    w = _big()
    onnx.save(_model(w), tmp_path / "a.onnx", save_as_external_data=True, location="weights.bin")
    argv = ["fold", str(tmp_path / "a.onnx"), "-o", str(tmp_path / "b.onnx")]
    assert cli.main(argv + (["--external-data", option] if option else [])) == 0
    capsys.readouterr()
    raw = onnx.load(str(tmp_path / "b.onnx"), load_external_data=False)
    assert (raw.graph.initializer[0].data_location == TensorProto.EXTERNAL) == external
    assert (tmp_path / "b.onnx.data").exists() == external
    x = np.ones(BIG, np.float32)
    np.testing.assert_array_equal(_run(str(tmp_path / "b.onnx"), x), x + w)


def test_check_model_resolves_references_from_any_working_directory(tmp_path, monkeypatch):
    w = _big()
    (tmp_path / "m").mkdir()
    onnx.save(_model(w), tmp_path / "m" / "a.onnx", save_as_external_data=True, location="weights.bin")
    loaded = model_io.load_model(tmp_path / "m" / "a.onnx")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(onnx.checker.ValidationError):  # what onnx itself does with an in-memory proto
        onnx.checker.check_model(loaded)
    model_io.check_model(loaded, full_check=True)
    assert os.getcwd() == str(tmp_path)
    stripped = model_io.without_big_data(loaded)
    assert stripped.graph.initializer[0].data_location != TensorProto.EXTERNAL
    assert not stripped.graph.initializer[0].raw_data and list(stripped.graph.initializer[0].dims) == [BIG]
    broken = onnx.ModelProto()
    broken.CopyFrom(loaded)
    broken.graph.node[0].input[1] = "nothing"
    with pytest.raises(onnx.checker.ValidationError):
        model_io.check_model(broken, full_check=True)


def test_sparse_external_data_is_copied_exactly_and_stays_sparse(tmp_path):
    """Holes in the source data stay holes in the output; every byte reads back the same."""
    n = 4 << 20  # 16 MiB of float32, data only in the middle: holes before and after
    data_path = tmp_path / "w.bin"
    with open(data_path, "wb") as f:
        f.truncate(n * 4)
        f.seek(n * 2)
        f.write(np.arange(4096, dtype=np.float32).tobytes())
    w = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[n],
                         data_location=onnx.TensorProto.EXTERNAL)
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", str(n * 4))):
        e = w.external_data.add()
        e.key, e.value = k, v
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["w"], ["y"])], "g", [],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [n])], [w])
    src = tmp_path / "m.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]), src)
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    model_io.save_model(model_io.load_model(src), out)
    back = onnx.load(out)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(back.graph.initializer[0]),
                                  np.fromfile(data_path, dtype=np.float32))
    data_out = out.parent / "o.onnx.data"
    assert data_out.stat().st_size == n * 4
    assert data_out.stat().st_blocks * 512 < n * 4 // 2  # most of it is still a hole


def test_big_inline_tensor_with_an_explicit_default_data_location(tmp_path):
    """onnx.load leaves data_location=DEFAULT set after loading external data; saved back
    inline, that field follows raw_data in the file and must not hide the lazily kept data."""
    c = numpy_helper.from_array(np.random.default_rng(0).random((300, 1000), dtype=np.float32), "c")
    graph = helper.make_graph(
        [helper.make_node("ReduceProd", ["c"], ["p"], axes=[0], keepdims=0),
         helper.make_node("Mul", ["p", "x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000])], [c])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                    str(tmp_path / "ext.onnx"), save_as_external_data=True, location="ext.bin")
    reloaded = onnx.load(str(tmp_path / "ext.onnx"))
    assert reloaded.graph.initializer[0].HasField("data_location")
    onnx.save(reloaded, str(tmp_path / "inline.onnx"))
    model = model_io.load_model(tmp_path / "inline.onnx")
    (tensor,) = model.graph.initializer
    assert tensor.data_location == TensorProto.EXTERNAL  # kept lazily, in the file itself
    np.testing.assert_array_equal(model_io.read_external_tensor(tensor, None), numpy_helper.to_array(c))
    model_io.save_model(model, tmp_path / "out.onnx")
    np.testing.assert_array_equal(numpy_helper.to_array(onnx.load(tmp_path / "out.onnx").graph.initializer[0]),
                                  numpy_helper.to_array(c))
