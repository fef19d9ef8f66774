"""Issue 39 §4: a half-precision result is judged against the floor (the float32 source's own
error with only its float inputs rounded to half), --keep-io-precision takes the inputs'
rounding out, and size is judged by the float tensors (metadata, names and attributes kept).

Oracles: ONNX Runtime on the float32 source (its inputs rounded by numpy), onnx.reference for
the half result's own arithmetic (ONNX Runtime's CPU provider runs Sub and Mul in float32 and
drops the Cast pair at the edge), and the tensors' bytes read back with onnx.numpy_helper."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import rewriter
from rewriter.errors import RewriterError
from rewriter.precision import convert_precision_proto
from rewriter.precision.floor import input_floors, output_floors, round_feeds, rounded_inputs, tolerance
from rewriter.precision.pipeline import HalfOptions, convert_half
from rewriter.verify.numerics.rel_l2 import compare_rel_l2

X = (1000 + np.random.default_rng(3).uniform(-1, 1, (2, 8))).astype(np.float32)


def _shifted(first=("Sub",)):
    """x -> [Transpose ->] Sub(1000) -> Mul(w) -> y: float16 holds x near 1000 in 0.5 steps,
    so rounding x alone moves y by about a fifth of itself."""
    nodes, value = [], "x"
    if "Transpose" in first:
        nodes.append(h.make_node("Transpose", ["x"], ["xt"], perm=[1, 0], name="move"))
        value = "xt"
    nodes += [h.make_node("Sub", [value, "c"], ["d"], name="sub"), h.make_node("Mul", ["d", "w"], ["y"], name="mul")]
    shape = [8, 2] if "Transpose" in first else [2, 8]
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                                  [h.make_tensor_value_info("y", T.FLOAT, shape)],
                                  [nh.from_array(np.array(1000.0, np.float32), "c"),
                                   nh.from_array(np.linspace(1, 2, shape[-1], dtype=np.float32), "w")]),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _ort(model, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(b - a) / np.linalg.norm(a))


def _oracle_floor(model):
    return _rel(_ort(model, {"x": X})[0], _ort(model, {"x": X.astype(np.float16).astype(np.float32)})[0])


def _cli(tmp_path, model, *flags):
    src, out, data = tmp_path / "m.onnx", tmp_path / "h.onnx", tmp_path / "x.npz"
    onnx.save(model, src)
    np.savez(data, x=X)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "--verify",
                          "--calibration-data", str(data), "-o", str(out), *flags], capture_output=True, text=True)
    return run, out


def test_verify_judges_against_twice_the_floor_and_prints_it(tmp_path):
    m = _shifted()
    floor = _oracle_floor(m)
    assert floor > 0.1
    run, out = _cli(tmp_path, m, "--json")
    assert run.returncode == 0, run.stderr
    (o,) = json.loads(run.stdout)["verification"]["numerics"]["outputs"]
    assert o["ok"] and o["floor"] == pytest.approx(floor, rel=1e-4)
    assert o["tolerance"].startswith(f"relative L2 <= {2 * floor:.2g} (2 x floor)")
    assert o["tolerance"].endswith(f"floor {floor:.2g}")
    # what a runtime computing in half sees: the input's rounding, about the floor, beyond 1e-2
    half = ReferenceEvaluator(onnx.load(out)).run(None, {"x": X})[0]
    assert 1e-2 < _rel(_ort(m, {"x": X})[0], half) <= 2 * floor
    run, _ = _cli(tmp_path, m)  # the line people read
    assert f"floor {floor:.2g}) ok" in run.stdout, run.stdout


def test_keep_io_precision_takes_the_floor_away(tmp_path):
    m = _shifted()
    run, out = _cli(tmp_path, m, "--json", "--keep-io-precision")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    (o,) = doc["verification"]["numerics"]["outputs"]
    assert o["floor"] == 0 and o["tolerance"].startswith("relative L2 <= 0.01 ")
    result = onnx.load(out)
    sub = next(n for n in result.graph.node if n.op_type == "Sub")
    assert sub.input[0] == "x"  # the input itself, not a rounded copy
    weight = next(t for t in result.graph.initializer if t.name == "c")
    assert weight.data_type == T.FLOAT16  # the weight stored in half, cast to float32 where read
    cast = next(n for n in result.graph.node if n.output[0] == sub.input[1])
    assert cast.op_type == "Cast" and cast.input[0] == "c" and cast.attribute[0].i == T.FLOAT
    assert next(n for n in result.graph.node if n.op_type == "Mul").input[1] == "w"  # Mul still in half
    reason = [k["reason"] for k in doc["changes"]["precision"]["kept"] if k["node"] == "node 'sub' (Sub)"]
    assert reason == ["--keep-io-precision: reads graph input 'x' (computed in float32, its weights stored in half)"]
    # in half arithmetic too, within 1e-2 of the float32 source
    assert _rel(_ort(m, {"x": X})[0], ReferenceEvaluator(result).run(None, {"x": X})[0]) <= 1e-2
    assert rounded_inputs(result) == {}


def test_keep_io_precision_passes_through_nodes_that_move_data():
    m = _shifted(("Transpose", "Sub"))
    plain, _ = convert_precision_proto(m, "float16")
    assert rounded_inputs(plain) == {"x": T.FLOAT16}
    result, report = convert_precision_proto(m, "float16", keep_io_precision=True)
    assert sorted(k.label for k in report.kept if k.code == "keep-io-precision") == [
        "node 'move' (Transpose)", "node 'sub' (Sub)"]
    assert rounded_inputs(result) == {}
    assert _rel(_ort(m, {"x": X})[0], ReferenceEvaluator(result).run(None, {"x": X})[0]) <= 1e-2
    # the same through the pipeline, and the default changes nothing
    piped, _ = convert_half(m, "float16", options=HalfOptions(keep_io_precision=True))
    assert piped.SerializeToString() == result.SerializeToString()
    assert convert_half(m, "float16")[0].SerializeToString() == plain.SerializeToString()


def test_keep_io_precision_needs_float32_inputs(tmp_path):
    with pytest.raises(RewriterError, match="keep_io_precision .* needs keep_io_types"):
        convert_half(_shifted(), "float16", options=HalfOptions(keep_io_types=False, keep_io_precision=True))
    run, out = _cli(tmp_path, _shifted(), "--keep-io-precision", "--no-keep-io-types")
    assert run.returncode == 2 and "drop --no-keep-io-types" in run.stderr
    src = tmp_path / "m.onnx"
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--opset", "18", "--keep-io-precision",
                          "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 2 and "--keep-io-precision: only for --dtype" in run.stderr


def test_rounded_inputs_are_those_the_result_rounds():
    def model(nodes, inputs):
        return h.make_model(h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, None)]),
                            opset_imports=[h.make_opsetid("", 17)])

    f32 = [h.make_tensor_value_info("a", T.FLOAT, [2]), h.make_tensor_value_info("b", T.FLOAT, [2])]
    through = model([h.make_node("Reshape", ["a", "s"], ["r"]), h.make_node("Cast", ["r"], ["rh"], to=T.BFLOAT16),
                     h.make_node("Cast", ["rh"], ["ra"], to=T.FLOAT), h.make_node("Add", ["ra", "b"], ["y"])], f32)
    assert rounded_inputs(through) == {"a": T.BFLOAT16}
    declared = model([h.make_node("Cast", ["a"], ["y"], to=T.FLOAT)], [h.make_tensor_value_info("a", T.FLOAT16, [2])])
    assert rounded_inputs(declared) == {"a": T.FLOAT16}
    after_math = model([h.make_node("Neg", ["a"], ["n"]), h.make_node("Cast", ["n"], ["y"], to=T.FLOAT16)], f32[:1])
    assert rounded_inputs(after_math) == {}
    feeds = round_feeds({"a": np.array([1000.3, 1.0], np.float32), "b": np.array([1000.3], np.float32),
                         "i": np.array([3])}, {"a": T.FLOAT16, "i": T.FLOAT16})
    assert feeds["a"].tolist() == [1000.5, 1.0] and feeds["a"].dtype == np.float32
    assert feeds["b"].tolist() == [np.float32(1000.3)] and feeds["i"].tolist() == [3]


def test_an_output_rounding_changes_in_shape_has_no_floor():
    a = [np.array([1.0, 2.0]), np.array([1, 2]), np.array([3.0, 4.0])]
    floors = output_floors(a, [np.array([1.0, 2.0, 5.0]), np.array([1, 3]), np.array([3.0, 4.4])])
    assert floors[:2] == [float("inf"), 0.0] and floors[2] == pytest.approx(0.4 / 5)
    assert tolerance(1e-2, float("inf")) == 1e-2 and tolerance(1e-2, None) == 1e-2
    assert tolerance(1e-2, 0.004) == 1e-2 and tolerance(1e-2, 0.03) == 0.06
    _, _, text, ok, _ = compare_rel_l2(np.array([3.0, 4.0]), np.array([3.0, 4.3]), 1e-2, float("inf"))
    assert not ok and "floor n/a (rounding the inputs alone changes it)" in text and "<= 0.01 " in text
    _, _, text, ok, _ = compare_rel_l2(np.array([3.0, 4.0]), np.array([3.0, 4.3]), 1e-2, 0.03)
    assert ok and text.startswith("relative L2 <= 0.06 (2 x floor)")  # 0.3 / 5 = 0.06
    _, _, text, ok, _ = compare_rel_l2(np.array([3.0, 4.0]), np.array([3.0, 4.31]), 1e-2, 0.03)
    assert not ok
    # the largest floor over the samples; none when the source refuses the rounded inputs
    runs = iter([[np.array([1.0, 2.1])], [np.array([1.0, 2.0])]])
    m = _shifted()
    assert input_floors(m, [{"x": X}, {"x": X}], lambda f: next(runs), [[np.array([1.0, 2.0])]] * 2) == [0.0]
    plain, _ = convert_precision_proto(m, "float16")
    runs = iter([[np.array([1.0, 2.1])], [np.array([1.0, 2.0])]])
    assert input_floors(plain, [{"x": X}, {"x": X}], lambda f: next(runs),
                        [[np.array([1.0, 2.0])]] * 2) == [pytest.approx(0.1 / np.sqrt(5))]

    def refuse(feeds):
        raise RuntimeError("no")

    assert input_floors(plain, [{"x": X}], refuse, [[np.array([1.0])]]) is None


def test_a_mismatch_the_floor_explains_suggests_keep_io_precision(tmp_path):
    # x -> Max(0) -> Greater(t) -> NonZero: which x exceed t, t (exact in float16) an x rounded
    # down, so rounding the input alone changes the count (no floor: the shape changes); ONNX
    # Runtime's Max has a float16 kernel, so its run of the result rounds x too
    x0 = next(v for v in X.reshape(-1) if np.float32(np.float16(v)) < v)
    t = np.float32(np.float16(x0))
    m = h.make_model(h.make_graph(
        [h.make_node("Max", ["x", "lo"], ["p"]), h.make_node("Greater", ["p", "t"], ["g"]),
         h.make_node("NonZero", ["g"], ["i"]), h.make_node("Cast", ["i"], ["y"], to=T.FLOAT)], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2, 8])], [h.make_tensor_value_info("y", T.FLOAT, [2, None])],
        [nh.from_array(np.array(0.0, np.float32), "lo"), nh.from_array(t, "t")]), opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    rounded = _ort(m, {"x": X.astype(np.float16).astype(np.float32)})[0]
    assert rounded.shape != _ort(m, {"x": X})[0].shape
    run, out = _cli(tmp_path, m)
    assert run.returncode == 1 and not out.exists()
    assert "floor n/a (rounding the inputs alone changes it)" in run.stdout, run.stdout
    assert "--keep-io-precision computes the nodes reading them in float32" in run.stderr


def _with_everything():
    """A model with metadata, names, doc strings and per-node attributes and metadata."""
    w = nh.from_array(np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32), "conv.weight")
    big = nh.from_array(np.array([1e6], np.float32), "big")  # beyond float16: stays float32
    conv = h.make_node("Conv", ["x", "conv.weight"], ["c"], name="features.0.conv", pads=[1, 1, 1, 1],
                       strides=[1, 1], dilations=[1, 1], doc_string="the first conv")
    conv.metadata_props.add(key="pkg.torch.onnx.stack_trace", value="File model.py, line 12")
    div = h.make_node("Div", ["c", "big"], ["y"], name="scale.div")
    graph = h.make_graph([conv, div], "main_graph", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], [w, big], doc_string="graph doc")
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], producer_name="pytorch",
                     producer_version="2.5", doc_string="model doc", ir_version=10)
    m.metadata_props.add(key="author", value="someone")
    onnx.checker.check_model(m, full_check=True)
    return m


def _float_bytes(model, elem):
    return sum(nh.to_array(t).nbytes for t in model.graph.initializer if t.data_type == elem)


def test_size_is_the_share_of_float32_tensor_bytes_halved_and_nothing_is_dropped(tmp_path):
    m = _with_everything()
    src, out = tmp_path / "m.onnx", tmp_path / "h.onnx"
    onnx.save(m, src)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out),
                          "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    p = json.loads(run.stdout)["changes"]["precision"]
    result = onnx.load(out)
    before, left = _float_bytes(m, T.FLOAT), _float_bytes(result, T.FLOAT)
    assert left == 4  # the constant beyond float16's range
    assert p["float32_tensor_bytes"] == before and p["float32_tensor_bytes_halved"] == before - left
    assert p["halved_fraction"] == pytest.approx((before - left) / before)
    assert _float_bytes(result, T.FLOAT16) == (before - left) // 2
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--dtype", "float16", "-o", str(out)],
                         capture_output=True, text=True)
    share = (before - left) / before
    assert f"float32 tensor bytes stored in float16: {share:.1%} ({before - left} B of {before} B)" in run.stdout
    # metadata, names, doc strings and attributes as they were
    assert result.metadata_props == m.metadata_props and result.doc_string == m.doc_string
    assert (result.producer_name, result.producer_version) == (m.producer_name, m.producer_version)
    assert (result.graph.name, result.graph.doc_string) == (m.graph.name, m.graph.doc_string)
    for node in m.graph.node:
        (same,) = [n for n in result.graph.node if n.name == node.name]
        assert list(same.attribute) == list(node.attribute) and same.doc_string == node.doc_string
        assert list(same.metadata_props) == list(node.metadata_props)
    assert {t.name for t in result.graph.initializer} >= {"conv.weight", "big"}


def test_the_share_is_below_the_bar_only_when_float32_tensors_stay(tmp_path):
    from rewriter.precision.sizes import halved_line

    assert halved_line("float16", 1000, 960) == "float32 tensor bytes stored in float16: 96.0% (960 B of 1000 B)"
    assert halved_line("float16", 1000, 949).endswith("; below 95%: the nodes kept float32 above hold the rest")
    assert halved_line("bfloat16", 0, 0) == "float32 tensors: none in the model (the size is its graph)"
    m = _with_everything()
    _, report = convert_precision_proto(m, "float16", keep_op_types=("Conv",))
    assert report.float_bytes == (_float_bytes(m, T.FLOAT), 0)
    assert report.to_dict()["halved_fraction"] == 0.0
    result = rewriter.convert_precision(m, "float16")
    assert _float_bytes(result, T.FLOAT) == 4
