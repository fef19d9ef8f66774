"""Models over 2 GiB (external data in a sparse file) convert, fold and check; external axes are read.

The 2.5 GiB initializer lives in a sparse file (holes cost no disk) with marker bytes at a few
offsets; the written data file must hold the same bytes there. Oracles: the marker bytes,
onnx.load / onnx.checker on the written model, ONNX Runtime for the small external-axes case.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import cli

N = (5 << 29) // 4  # float32 elements in 2.5 GiB
DIMS = [N // 1024, 1024]  # 2-D like real weights (1-D: see README on ONNX data propagation)
MARKS = [0, 4096 * 7, (N * 4) // 2 + 12, N * 4 - 16]


def _entries(t: TensorProto) -> dict[str, str]:
    return {e.key: e.value for e in t.external_data}


def _set_external(t: TensorProto, location: str, offset: int, length: int) -> None:
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v


@pytest.fixture
def big_model(tmp_path):
    data = tmp_path / "weights.bin"
    with open(data, "wb") as f:
        f.truncate(N * 4)
        for i, offset in enumerate(MARKS):
            f.seek(offset)
            f.write(np.full(4, i + 1.5, np.float32).tobytes())
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=DIMS)
    _set_external(w, "weights.bin", 0, N * 4)
    c = numpy_helper.from_array(np.array([[2, 3], [4, 5]], np.float32), "c")
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add"),
             helper.make_node("ReduceProd", ["c"], ["k"], axes=[0], keepdims=0, name="const_rp"),
             helper.make_node("ReduceProd", ["x"], ["p"], axes=[0], keepdims=1, name="rp")]
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, DIMS)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, DIMS),
                               helper.make_tensor_value_info("k", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1024])], [w, c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, tmp_path / "big.onnx")
    yield tmp_path / "big.onnx"
    for name in os.listdir(tmp_path):  # do not leave gigabytes behind in pytest's kept tmp dirs
        if name.endswith((".data", ".bin")):
            os.unlink(tmp_path / name)


def _assert_weights_copied(out) -> None:
    m = onnx.load(str(out), load_external_data=False)
    w = next(t for t in m.graph.initializer if t.name == "w")
    entries = _entries(w)
    assert entries["location"] == os.path.basename(out) + ".data" and int(entries["length"]) == N * 4
    assert os.path.getsize(out) < 10_000
    with open(str(out) + ".data", "rb") as f:
        for i, offset in enumerate(MARKS):
            f.seek(int(entries.get("offset", 0)) + offset)
            assert np.frombuffer(f.read(16), np.float32).tolist() == [i + 1.5] * 4
            f.seek(int(entries.get("offset", 0)) + offset + 4096 * 3)
            if offset + 4096 * 3 < N * 4:
                assert f.read(8) == b"\0" * 8


def test_convert_a_model_over_2_gib(big_model, capsys):
    out = big_model.parent / "out.onnx"
    assert cli.main(["convert", str(big_model), "--opset", "18", "-o", str(out)]) == 0, capsys.readouterr().err
    converted = onnx.load(str(out), load_external_data=False)
    assert converted.opset_import[0].version == 18
    assert [len(n.input) for n in converted.graph.node if n.op_type == "ReduceProd"] == [2, 2]
    _assert_weights_copied(out)


def test_fold_and_check_a_model_over_2_gib(big_model, capsys):
    folded = big_model.parent / "folded.onnx"
    assert cli.main(["fold", str(big_model), "-o", str(folded)]) == 0, capsys.readouterr().err
    f = onnx.load(str(folded), load_external_data=False)
    assert [n.name for n in f.graph.node if n.op_type == "ReduceProd"] == ["rp"]
    _assert_weights_copied(folded)
    assert cli.main(["check", str(folded)]) == 0, capsys.readouterr().err


def test_axes_stored_as_external_data_is_read(tmp_path, capsys):
    axes = np.array([0, 2], np.int64)
    (tmp_path / "axes.bin").write_bytes(b"\xff" * 8 + axes.tobytes())
    ax = numpy_helper.from_array(axes, "ax")
    _set_external(ax, "axes.bin", 8, 16)
    graph = helper.make_graph([helper.make_node("ReduceProd", ["x", "ax"], ["y"], keepdims=1, name="rp")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 1])], [ax])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "m18.onnx")
    assert cli.main(["convert", str(tmp_path / "m18.onnx"), "--opset", "13", "-o", str(tmp_path / "m13.onnx")]) == 0
    capsys.readouterr()
    m13 = onnx.load(tmp_path / "m13.onnx")
    node = m13.graph.node[0]
    assert [list(a.ints) for a in node.attribute if a.name == "axes"] == [[0, 2]]
    x = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4) / 8
    # ONNX Runtime cannot run m18 itself ("Cannot parse data from external tensors"): numpy is the oracle
    got = ort.InferenceSession(str(tmp_path / "m13.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, np.prod(x, axis=(0, 2), keepdims=True))


@pytest.mark.parametrize("command", ["convert", "optimize"])
def test_static_shapes_for_a_model_over_2_gib(big_model, capsys, command):
    # onnxsim's --overwrite-input-shape and onnxruntime's make_dynamic_shape_fixed refuse models
    # over 2 GiB (they serialize the whole model); only declared shapes change here
    m = onnx.load(str(big_model), load_external_data=False)
    for vi in (m.graph.input[0], m.graph.output[0]):
        vi.type.tensor_type.shape.dim[0].dim_param = "rows"
    onnx.save(m, str(big_model))
    out = big_model.parent / "static.onnx"
    args = [command, str(big_model), "-o", str(out), "--fix-dim", f"rows={DIMS[0]}"]
    if command == "convert":
        args[2:2] = ["--opset", "18"]
    assert cli.main(args) == 0, capsys.readouterr().err
    written = onnx.load(str(out), load_external_data=False)
    assert [d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim] == DIMS
    assert [d.dim_value for d in written.graph.output[0].type.tensor_type.shape.dim] == DIMS
    _assert_weights_copied(out)
