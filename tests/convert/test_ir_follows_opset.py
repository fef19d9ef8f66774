"""Going down, the IR version follows the opset; what keeps it higher is named with how to drop
it (issue 39: onnx-asr's preprocessors, silero-vad's op18 export and a dynamo BERT export
converted to opset 11 stayed at IR 10, which ONNX Runtime 1.15 refuses, without a word).

Oracles: the IR version each opset came with, as onnx's release table lists it (written out
here); onnx.checker's full check on the result; ONNX Runtime running input and result; ONNX
Runtime 1.15 loading the result when its venv exists (tools/ort_venvs.py).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.convert import convert_model
from tests import old_ort

F = T.FLOAT
OPSET_IR = {11: 6, 13: 7, 17: 8}  # onnx 1.6 (opset 11, IR 6), 1.8 (13, 7), 1.12 (17, 8)


def _meta(holder, key, value):
    entry = holder.metadata_props.add()
    entry.key, entry.value = key, value


def _dynamo_like(opset: int = 18) -> onnx.ModelProto:
    """What torch's dynamo exporter writes: IR 10, metadata_props on the graph, the values, the
    nodes and the initializers (stack traces, the exported program's signature)."""
    mean = (h.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1, name="node_mean") if opset >= 18 else
            h.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1, name="node_mean"))
    nodes = [mean,
             h.make_node("Sub", ["x", "m"], ["c"], name="node_sub"),
             h.make_node("MatMul", ["c", "w"], ["y"], name="node_linear")]
    w = nh.from_array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), "w")
    graph = h.make_graph(nodes, "main_graph", [h.make_tensor_value_info("x", F, ["batch", 4])],
                         [h.make_tensor_value_info("y", F, ["batch", 3])],
                         [w, nh.from_array(np.array([1], np.int64), "axes")],
                         value_info=[h.make_tensor_value_info("m", F, ["batch", 1])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=10)
    _meta(model.graph, "pkg.torch.export.ExportedProgram.graph_signature", "x: USER_INPUT")
    _meta(model.graph.input[0], "pkg.torch.onnx.original_node_name", "x")
    _meta(model.graph.value_info[0], "pkg.torch.onnx.original_node_name", "mean")
    _meta(model.graph.initializer[0], "pkg.torch.onnx.original_node_name", "linear.weight")
    for node in model.graph.node:
        _meta(node, "pkg.torch.onnx.stack_trace", f"model.py, in forward: {node.name}")
    return model


def _metadata(model):
    g = model.graph
    return {(type(x).__name__, getattr(x, "name", "")): [(p.key, p.value) for p in x.metadata_props]
            for x in [g, *g.input, *g.value_info, *g.initializer, *g.node] if x.metadata_props}


def _run(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("target", [11, 13, 17])
def test_metadata_holds_no_ir_version_going_down(target):
    model = _dynamo_like()
    result, report = convert_model(model, target)
    assert result.ir_version == OPSET_IR[target]
    assert _metadata(result) == _metadata(model)  # left where it was: readers of an older IR skip it
    assert not [n for n in report.notes if "IR version kept" in n] and not report.ir_changes
    onnx.checker.check_model(result, full_check=True)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(result, x), _run(model, x), rtol=1e-6, atol=1e-6)


@pytest.mark.skipif("1.15" not in old_ort.releases(), reason="no onnxruntime 1.15 venv (python tools/ort_venvs.py 1.15)")
def test_onnxruntime_1_15_loads_the_result_it_refuses_the_input_of():
    model = _dynamo_like()
    result, _ = convert_model(model, 11)
    ok, why = old_ort.loads("1.15", model)
    assert not ok, "the premise: ORT 1.15 refuses IR 10"
    ok, why = old_ort.loads("1.15", result)
    assert ok, why


def _with_function(count: int = 1) -> onnx.ModelProto:
    """y = ReluNeg(x), a model-local function (and ``count`` - 1 Identity ones called after it)."""
    body = [h.make_node("Relu", ["a"], ["r"]), h.make_node("Neg", ["r"], ["b"])]
    functions = [h.make_function("local", "ReluNeg", ["a"], ["b"], body, [h.make_opsetid("", 18)])]
    functions += [h.make_function("local", f"Same{i}", ["a"], ["b"], [h.make_node("Identity", ["a"], ["b"])],
                                  [h.make_opsetid("", 18)]) for i in range(1, count)]
    names = ["x", *(f"v{i}" for i in range(1, count)), "y"]
    calls = [h.make_node(f.name, [names[i]], [names[i + 1]], domain="local", name=f"call{i}")
             for i, f in enumerate(functions)]
    graph = h.make_graph(calls, "g", [h.make_tensor_value_info("x", F, [2, 4])], [h.make_tensor_value_info("y", F, [2, 4])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18), h.make_opsetid("local", 1)],
                        functions=functions, ir_version=10)


def test_a_model_local_function_keeps_ir_8_and_the_note_says_how_to_drop_it():
    model = _with_function()
    result, report = convert_model(model, 11)
    assert result.ir_version == 8 and len(result.functions) == 1  # functions came with IR 8; kept
    (note,) = [n for n in report.notes if n.startswith("IR version kept")]
    assert note == ("IR version kept at 8 (the opset imports need 6): model-local function 'ReluNeg' (the model): "
                    "--ir-version 6 rewrites it (inlined)")
    inlined, _ = convert_model(model, 11, ir_version=6)  # the note's advice works, and is exact
    assert inlined.ir_version == 6 and not inlined.functions
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(_run(inlined, x), -np.maximum(x, 0))
    np.testing.assert_array_equal(_run(result, x), -np.maximum(x, 0))


def test_a_feature_the_input_carried_above_its_own_ir_holds_it_at_most_at_the_inputs():
    model = _with_function()
    model.ir_version = 7  # functions came with IR 8: this file uses one above its own IR
    result, report = convert_model(model, 11)
    assert result.ir_version == 7 and len(result.functions) == 1
    assert [n for n in report.notes if n.startswith("IR version kept at 7 (the opset imports need 6)")]


def test_a_feature_no_older_ir_has_is_named_as_such():
    model = _dynamo_like(opset=13)
    model.ir_version = 7
    annotation = model.graph.quantization_annotation.add()  # IR 5's
    annotation.tensor_name = "w"
    entry = annotation.quant_parameter_tensor_names.add()
    entry.key, entry.value = "SCALE_TENSOR", "axes"
    result, report = convert_model(model, 11)
    assert result.ir_version == 6  # what opset 11 needs is above IR 5: nothing held
    assert not [n for n in report.notes if "IR version kept" in n]
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu")]
    model = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", F, [2])],
                                      [h.make_tensor_value_info("y", F, [2])]),
                         opset_imports=[h.make_opsetid("", 13)], ir_version=7)
    annotation = model.graph.quantization_annotation.add()
    annotation.tensor_name = "y"
    result, report = convert_model(model, 8)
    assert result.ir_version == 5
    (note,) = [n for n in report.notes if n.startswith("IR version kept")]
    assert note == ("IR version kept at 5 (the opset imports need 3): quantization annotations (main graph): "
                    "no IR version below 5 has it")


def test_more_than_three_features_are_counted_not_listed():
    _, report = convert_model(_with_function(count=5), 11)
    (note,) = [n for n in report.notes if n.startswith("IR version kept")]
    assert note.count("model-local function") == 3 and note.endswith("; and 2 more"), note


def test_going_up_or_pinned_says_nothing_of_a_kept_ir():
    _, report = convert_model(_with_function(), 18, ir_version=8)
    assert not [n for n in report.notes if "IR version kept" in n]
    _, report = convert_model(_dynamo_like(opset=13), 18)
    assert not [n for n in report.notes if "IR version kept" in n]


def test_the_command_line_summary_and_json_name_what_keeps_the_ir(tmp_path):
    path, out = tmp_path / "f.onnx", tmp_path / "out.onnx"
    onnx.save(_with_function(), path)
    done = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(path), "--opset", "11", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "IR version kept at 8 (the opset imports need 6): model-local function 'ReluNeg'" in done.stdout
    done = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(path), "--opset", "11", "-o", str(out),
                           "--json"], capture_output=True, text=True, timeout=120)
    import json

    doc = json.loads(done.stdout)
    assert any(n.startswith("IR version kept at 8") for n in doc["changes"]["notes"]), doc["changes"]
    assert doc["after"]["ir_version"] == 8 and onnx.load(str(out)).ir_version == 8
