"""Shapes computed from dims that are not static (rewriter/targets/computed_shapes.py): which nodes
compute one, the note convert and check give for a release whose data measured real models refused
so (LiteRT 2.6), and the tool that writes that data from a benchmark run. Oracles: hand-built
graphs whose shape inputs are or are not read from a Shape, and LiteRT itself where its venv
exists: a lowered com.microsoft Attention with a mask index of its own length, which LiteRT fails to
prepare as convert writes it without static dims and runs, matching ONNX Runtime, with them (and
one as long as the batch, which it runs as it is)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter import convert_opset
from rewriter.targets import parse_target
from rewriter.targets.computed_shapes import computed_shape_nodes, computed_shapes_note
from tests.targets.runtime_runs import ROOT, run_in, tool

MEASURED = {"refused": {"contrib/a": "run: RuntimeError: XNNPack delegate failed to reshape runtime"},
            "ran": ["contrib/b", "torch/c"], "ran_static": 1, "reason": "RuntimeError: XNNPack delegate failed"}


def _model(nodes, inits=(), dims=("batch", 8), opset=17, graph_inputs=None, out=None) -> onnx.ModelProto:
    inputs = graph_inputs or [helper.make_tensor_value_info("x", T.FLOAT, list(dims))]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", T.FLOAT, out)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _label(name, op):
    return f"node '{name}' ({op}) in main graph"


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _flatten_by_shape() -> onnx.ModelProto:
    """Reshape(x, Concat(Shape(x)[0], [-1])): the batch read by Shape."""
    return _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
                   helper.make_node("Concat", ["b", "minus1"], ["shape"], axis=0),
                   helper.make_node("Reshape", ["x", "shape"], ["y"], name="flat")],
                  [_i64("zero", [0]), _i64("minus1", [-1])], out=["batch", 8])


def _positions() -> onnx.ModelProto:
    """x + Range(0, Shape(x)[1]): a Range whose limit is read by Shape (convert keeps it for LiteRT)."""
    return _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
                   helper.make_node("Range", ["zero", "n", "one"], ["r"], name="positions"),
                   helper.make_node("Cast", ["r"], ["rf"], to=T.FLOAT), helper.make_node("Add", ["x", "rf"], ["y"])],
                  [_i64("zero", 0), _i64("one", 1)], out=["batch", 8])


def test_a_shape_read_by_shape_is_found_and_a_constant_one_is_not():
    assert computed_shape_nodes(_flatten_by_shape()) == [_label('flat', 'Reshape')]
    constant = _model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="flat")], [_i64("shape", [0, -1])])
    assert computed_shape_nodes(constant) == []


def test_a_shape_computed_from_values_is_not_a_computed_shape():
    """A Range whose limit is the input's values (ReduceMax, Cast), not its dims."""
    model = _model([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
                    helper.make_node("Cast", ["m"], ["n"], to=T.INT64),
                    helper.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
                    helper.make_node("Cast", ["r"], ["y"], to=T.FLOAT)], [_i64("zero", 0), _i64("one", 1)])
    assert computed_shape_nodes(model) == []


def test_size_counts_and_only_the_shape_slots_do():
    """Size reads dims too; a Shape-derived value in a data slot (Expand's input) is not a shape."""
    nodes = [helper.make_node("Size", ["x"], ["n"]), helper.make_node("Reshape", ["n", "one"], ["n1"]),
             helper.make_node("Cast", ["n1"], ["nf"], to=T.FLOAT),
             helper.make_node("Expand", ["nf", "dims"], ["e"], name="data_slot"),
             helper.make_node("Range", ["zero", "n", "one0"], ["r"], name="by_size"),
             helper.make_node("Cast", ["r"], ["y"], to=T.FLOAT)]
    model = _model(nodes, [_i64("one", [1]), _i64("dims", [2, 1]), _i64("zero", 0), _i64("one0", 1)])
    assert computed_shape_nodes(model) == [_label('by_size', 'Range')]


def test_a_value_reached_twice_is_decided_after_its_inputs():
    """d = Shape(x)[1]; a = d + 0; shape = Concat(a, d): ``a`` is met before ``d`` is decided."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["d"], axis=0),
             helper.make_node("Add", ["d", "zero"], ["a"]), helper.make_node("Concat", ["a", "d"], ["c"], axis=0),
             helper.make_node("Slice", ["c", "zero", "one"], ["shape"]),
             helper.make_node("Reshape", ["x", "minus1"], ["flat"], name="constant"),
             helper.make_node("ConstantOfShape", ["shape"], ["y"], name="zeros")]
    model = _model(nodes, [_i64("one", [1]), _i64("zero", [0]), _i64("minus1", [-1])])
    assert computed_shape_nodes(model) == [_label('zeros', 'ConstantOfShape')]
    alone = _model([helper.make_node("Add", ["d", "zero"], ["a"]),
                    helper.make_node("Concat", ["a", "d"], ["c"], axis=0),
                    helper.make_node("ConstantOfShape", ["c"], ["y"], name="zeros")], [_i64("zero", [0])],
                   graph_inputs=[helper.make_tensor_value_info("d", T.INT64, [1])])
    assert computed_shape_nodes(alone) == []  # a graph input's values are not dims read


def test_a_deep_chain_is_walked_without_recursion():
    nodes = [helper.make_node("Shape", ["x"], ["v0"])]
    nodes += [helper.make_node("Identity", [f"v{i}"], [f"v{i + 1}"]) for i in range(5000)]
    nodes.append(helper.make_node("Reshape", ["x", "v5000"], ["y"], name="deep"))
    assert computed_shape_nodes(_model(nodes)) == [_label('deep', 'Reshape')]


def test_a_node_in_a_subgraph_is_labelled_with_its_scope():
    body = helper.make_graph([helper.make_node("Shape", ["x"], ["s"]),
                              helper.make_node("Reshape", ["x", "s"], ["o"], name="inner")], "body", [],
                             [helper.make_tensor_value_info("o", T.FLOAT, None)])
    model = _model([helper.make_node("If", ["c"], ["y"], name="branch", then_branch=body, else_branch=body)],
                   graph_inputs=[helper.make_tensor_value_info("x", T.FLOAT, ["batch", 8]),
                                 helper.make_tensor_value_info("c", T.BOOL, [])])
    found = computed_shape_nodes(model)
    assert len(found) == 2 and all("inner" in f and "branch" in f for f in found)


def test_the_note_names_the_nodes_the_inputs_and_the_measure():
    notes = computed_shapes_note(_flatten_by_shape(), MEASURED, "litert 2.6")
    assert len(notes) == 1
    note = notes[0]
    assert note.startswith("litert 2.6 refused 1 of the 3 real models measured")
    assert "'flat'" in note and "'x' [batch, 8]" in note and "with --input-shape it ran 1 of them" in note
    assert "XNNPack delegate failed" in note


def test_no_note_for_static_inputs_nor_without_a_measured_refusal():
    static = convert_opset(_flatten_by_shape(), 17, input_shapes={"x": [2, 8]})
    assert computed_shapes_note(static, MEASURED, "litert 2.6") == []
    fixed_only = onnx.ModelProto()
    fixed_only.CopyFrom(_flatten_by_shape())
    for d in fixed_only.graph.input[0].type.tensor_type.shape.dim:
        d.dim_value = d.dim_value or 2
    assert computed_shape_nodes(fixed_only) == [_label('flat', 'Reshape')]
    assert computed_shapes_note(fixed_only, MEASURED, "r") == []
    assert computed_shapes_note(_flatten_by_shape(), {**MEASURED, "refused": {}}, "r") == []
    assert computed_shapes_note(_flatten_by_shape(), {}, "r") == []


def test_litert_data_holds_the_measure_and_the_note_reads_it():
    """The shipped entry: written by the tool from a benchmark run, every refused model with its reason."""
    target = parse_target("litert==2.6")
    measured = target.computed_shapes
    assert measured["measured"]["command"].startswith("python tools/runtime_computed_shapes.py")
    assert measured["refused"] and all(isinstance(r, str) and r for r in measured["refused"].values())
    assert not set(measured["refused"]) & set(measured["ran"])
    assert measured["ran_static"] == sum(measured["static"].get(n) == "match" for n in measured["refused"])
    note = computed_shapes_note(_flatten_by_shape(), measured, target.name)[0]
    total = len(measured["refused"]) + len(measured["ran"])
    assert f"refused {len(measured['refused'])} of the {total} real models" in note
    for other in ("openvino==2026.4", "tract==0.23", "tvm==0.27", "onnxruntime==1.20"):
        assert computed_shapes_note(_flatten_by_shape(), parse_target(other).computed_shapes, other) == []


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "rewriter", *args], capture_output=True, text=True, cwd=ROOT)


def test_convert_and_check_give_the_note(tmp_path):
    src = tmp_path / "positions.onnx"
    onnx.save(_positions(), src)
    done = _cli("convert", str(src), "--target", "litert==2.6", "-o", str(tmp_path / "out.onnx"))
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "real models measured whose shapes are computed" in said and _label("positions", "Range") in said
    fixed = _cli("convert", str(src), "--target", "litert==2.6", "--input-shape", "x:2,8",
                 "-o", str(tmp_path / "o2.onnx"))
    assert fixed.returncode == 0 and "shapes are computed" not in fixed.stdout + fixed.stderr
    check = _cli("check", str(src), "--target", "litert==2.6", "--json")
    notes = json.loads(check.stdout)["target"]["run_notes"]
    assert any(_label("positions", "Range") in n and "--input-shape" in n for n in notes)
    plain = _cli("check", str(src), "--target", "tract==0.23", "--json")
    assert not any("shapes are computed" in n for n in json.loads(plain.stdout)["target"]["run_notes"])


def _attention_mask_index(lengths: str = "lengths") -> tuple[onnx.ModelProto, dict]:
    """com.microsoft Attention with a 1-d mask index (end positions, ``[lengths]``), then a MatMul and
    a residual Add. Its own symbol: [B] or [2B] is told at run time, by Slices of the batch."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((16, 48)) * 0.3).astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal(48) * 0.1).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.3).astype(np.float32), "wo")]
    nodes = [helper.make_node("Attention", ["x", "w", "b", "mask"], ["a"], domain="com.microsoft", num_heads=2),
             helper.make_node("MatMul", ["a", "wo"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"])]
    graph = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 16]),
                                              helper.make_tensor_value_info("mask", T.INT32, [lengths])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", 16])], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    feeds = {"x": rng.standard_normal((2, 7, 16)).astype(np.float32), "mask": np.array([7, 5], np.int32)}
    return model, feeds


def test_litert_fails_without_static_dims_and_runs_with_them():
    model, feeds = _attention_mask_index()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    dynamic = convert_opset(model, target="litert==2.6")
    assert computed_shape_nodes(dynamic) and computed_shapes_note(dynamic, parse_target("litert==2.6").computed_shapes,
                                                                  "litert 2.6")
    fixed = convert_opset(model, target="litert==2.6", input_shapes={"x": [2, 7, 16], "mask": [2]})
    assert computed_shapes_note(fixed, parse_target("litert==2.6").computed_shapes, "litert 2.6") == []
    got = ort.InferenceSession(fixed.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    refused = run_in("litert", "2.6", dynamic, feeds)
    assert not refused["ok"] and "failed to" in refused["error"]
    ran = run_in("litert", "2.6", fixed, feeds)
    assert ran["ok"], ran
    out = ran["values"][0]
    assert np.linalg.norm(out - want) / np.linalg.norm(want) <= 1e-4


def test_a_mask_index_as_long_as_the_batch_runs_in_litert_without_static_dims():
    """Declared [batch], the queries' own symbol, the mask holds end positions only and the lowering
    slices nothing by the batch (contrib_attention_core.key_mask): LiteRT runs it as convert writes it."""
    model, feeds = _attention_mask_index("batch")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    dynamic = convert_opset(model, target="litert==2.6")
    assert not {"Slice", "ConstantOfShape"} & {n.op_type for n in dynamic.graph.node}
    ran = run_in("litert", "2.6", dynamic, feeds)
    assert ran["ok"], ran
    out = ran["values"][0]
    assert np.linalg.norm(out - want) / np.linalg.norm(want) <= 1e-4


def test_the_tool_counts_only_models_that_compute_shapes(tmp_path):
    mod = tool("runtime_computed_shapes")
    onnx.save(_positions(), tmp_path / "flat.onnx")
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], out=["batch", 8]), tmp_path / "relu.onnx")
    fixed = convert_opset(_positions(), 17, input_shapes={"x": [2, 8]})
    onnx.save(fixed, tmp_path / "static.onnx")
    files = {f"c/{n}": tmp_path / f"{n}.onnx" for n in ("flat", "relu", "static")}
    X, S = mod.CONVERT, mod.STATIC
    cells = [{"runtime": "litert==2.6", "model": "c/flat", "column": X, "verdict": "refused", "by": "runtime",
              "reason": "run: RuntimeError: XNNPack delegate failed to reshape runtimeNode number 7 (X) failed"},
             {"runtime": "litert==2.6", "model": "c/flat", "column": S, "verdict": "match"},
             {"runtime": "litert==2.6", "model": "c/relu", "column": X, "verdict": "refused", "by": "runtime",
              "reason": "run: other"},
             {"runtime": "litert==2.6", "model": "c/static", "column": X, "verdict": "match"},
             {"runtime": "tract==0.23", "model": "c/flat", "column": X, "verdict": "match"}]
    entry = mod.classify(cells, "litert==2.6", files)
    assert entry["refused"] == {"c/flat": cells[0]["reason"]} and entry["ran"] == [] and entry["wrong"] == []
    assert entry["ran_static"] == 1 and entry["static"] == {"c/flat": "match"}
    assert entry["reason"] == "RuntimeError: XNNPack delegate failed to reshape runtime"
    cells[3]["model"] = "c/flat2"
    files["c/flat2"] = files["c/flat"]
    cells[1]["verdict"], cells[1]["reason"] = "refused", "load: no"
    more = [{"runtime": "litert==2.6", "model": "c/flat3", "column": X, "verdict": "WRONG"},
            {"runtime": "litert==2.6", "model": "c/flat2", "column": S, "verdict": "match"}]  # ran anyway
    entry = mod.classify([*cells, *more], "litert==2.6", {**files, "c/flat3": files["c/flat"]})
    assert entry["ran"] == ["c/flat2"] and entry["wrong"] == ["c/flat3"] and entry["ran_static"] == 0
    assert entry["static"]["c/flat"] == "refused: load: no"
    tool_refused = [{**cells[0], "by": "tool"}]
    assert mod.classify(tool_refused, "litert==2.6", files)["refused"] == {}


def test_the_tool_writes_the_release_entry(tmp_path):
    mod = tool("runtime_computed_shapes")
    data = {"releases": {"2.6": {"litert": "2.6.9"}}}
    (tmp_path / "litert.json").write_text(json.dumps(data))
    entry = {"refused": {"a": "r"}, "ran": [], "wrong": [], "ran_static": 0, "static": {}, "reason": "r"}
    mod.record("litert==2.6", entry, "python tools/runtime_computed_shapes.py b.json --target litert==2.6", "b.json",
               tmp_path)
    written = json.loads((tmp_path / "litert.json").read_text())["releases"]["2.6"]
    assert written["litert"] == "2.6.9" and written["computed_shapes"]["refused"] == {"a": "r"}
    assert written["computed_shapes"]["measured"]["bench"] == "b.json"
    assert "computed_shapes" in tool("runtime_probe").OTHER_PROBES  # a re-probe keeps it
