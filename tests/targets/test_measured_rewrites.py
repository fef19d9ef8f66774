"""Forms a measured release computes wrongly that convert rewrites into another form of the same
values (rewriter/targets/measured_rewrites.py, ``rewrite_forms`` in the release's data): OpenVINO
2026.4 tiles a rank-4 / rank-5 tensor along axis 1 wrongly after a broadcast (the attention mask of
onnxruntime-genai's Llama: llama_tiny_fp16's logits at relative L2 0.694), so such a Tile becomes
one of rank 6.  The rules run without the runtime; with the OpenVINO venvs (tools/runtime_venvs.py;
skipped when absent) the small model runs in 2026.4 (wrong as it is, right converted) and 2024.6."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from tests.targets.runtime_runs import ROOT, run_in, tool

DATA = json.loads((ROOT / "rewriter" / "targets" / "data" / "openvino.json").read_text())["releases"]


def _tile_after_broadcast(rank: int = 4, repeats=None, opset: int = 13, fed_repeats: bool = False) -> onnx.ModelProto:
    """Add(x [b, 1, .., 1, t], Expand(c [1, .., 1, s, t], a shape computed from both)), then Tile:
    the form of the Llama's mask (OpenVINO turns the Expand into a Broadcast after the Add)."""
    vi, node = helper.make_tensor_value_info, helper.make_node
    repeats = repeats or [1, 4] + [1] * (rank - 2)
    ones = [1] * (rank - 3)
    inputs = [vi("x", TensorProto.FLOAT, ["b", *ones, 1, "t"]), vi("c", TensorProto.FLOAT, [1, *ones, "s", "t"])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             [("i0", [0]), ("is", [rank - 2]), ("it", [rank - 1]), ("ones", ones)]]
    if fed_repeats:
        inputs.append(vi("reps", TensorProto.INT64, [rank]))
    else:
        inits.append(numpy_helper.from_array(np.array(repeats, np.int64), "reps"))
    nodes = [node("Shape", ["x"], ["sx"], name="sx"), node("Shape", ["c"], ["sc"], name="sc"),
             node("Gather", ["sx", "i0"], ["b"], axis=0, name="gb"), node("Gather", ["sc", "is"], ["s"], axis=0, name="gs"),
             node("Gather", ["sx", "it"], ["t"], axis=0, name="gt"),
             node("Concat", ["b", "ones", "s", "t"], ["shape"], axis=0, name="shape"),
             node("Expand", ["c", "shape"], ["ce"], name="expand"), node("Add", ["x", "ce"], ["sum"], name="add"),
             node("Tile", ["sum", "reps"], ["y"], name="the_tile")]
    graph = helper.make_graph(nodes, "g", inputs, [vi("y", TensorProto.FLOAT, [None] * rank)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _feeds(rank: int = 4, repeats=None) -> dict:
    rng = np.random.default_rng(0)
    ones = [1] * (rank - 3)
    return {"x": rng.standard_normal((2, *ones, 1, 5)).astype(np.float32),
            "c": rng.standard_normal((1, *ones, 3, 5)).astype(np.float32),
            "reps": np.array(repeats or [1, 4] + [1] * (rank - 2), np.int64)}


def _ort(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})[0]


def _convert(model: onnx.ModelProto, target: str = "openvino==2026.4"):
    return convert_for(model, runtime=target)


def test_the_data_rewrites_the_tile_for_2026_4_only():
    assert parse_target("openvino==2026.4").rewrite_forms["Tile"]["form"] == "rank_6"
    assert "2026-12-06" in DATA["2026.4"]["rewrite_forms"]["Tile"]["measured"]
    assert "Tile" not in parse_target("openvino==2024.6").rewrite_forms
    assert "rewrite_forms" in tool("runtime_probe").OTHER_PROBES  # a re-probe keeps it


@pytest.mark.parametrize("rank,opset", [(4, 13), (5, 13), (4, 12), (5, 12)])
def test_a_tile_along_axis_1_becomes_rank_6_with_the_same_values(rank, opset):
    model = _tile_after_broadcast(rank, opset=opset)
    result, report = _convert(model)
    tile = next(n for n in result.graph.node if n.op_type == "Tile")
    producers = {o: n for n in result.graph.node for o in n.output}
    readers = [n for n in result.graph.node if tile.output[0] in n.input]
    assert tile.name == "the_tile" and producers[tile.input[0]].op_type == "Unsqueeze"
    assert [n.op_type for n in readers] == ["Squeeze"] and readers[0].output[0] == "y"
    assert any("Tile node(s) of rank 4 or 5" in note and "'the_tile'" in note for note in report.target_notes)
    onnx.checker.check_model(result, full_check=True)
    feeds = _feeds(rank)
    assert np.array_equal(_ort(result, feeds), _ort(model, feeds))


def test_repeats_fed_at_run_time_are_widened_by_a_concat():
    model = _tile_after_broadcast(4, fed_repeats=True)
    result, _ = _convert(model)
    tile = next(n for n in result.graph.node if n.op_type == "Tile")
    producers = {o: n for n in result.graph.node for o in n.output}
    assert producers[tile.input[1]].op_type == "Concat"
    feeds = _feeds(4, [2, 3, 1, 2])
    assert np.array_equal(_ort(result, feeds), _ort(model, feeds))


@pytest.mark.parametrize("repeats", [[1, 1, 2, 1], [2, 1, 1, 3]])
def test_a_tile_with_a_constant_1_along_axis_1_is_kept(repeats):
    result, report = _convert(_tile_after_broadcast(4, repeats))
    assert "Unsqueeze" not in [n.op_type for n in result.graph.node]
    assert not any("Tile node(s)" in note for note in report.target_notes)


def test_other_ranks_and_releases_keep_the_tile():
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Tile", ["x", "r"], ["y"], name="t3")], "g",
                              [vi("x", TensorProto.FLOAT, ["a", 1, "c"])], [vi("y", TensorProto.FLOAT, [None] * 3)],
                              [numpy_helper.from_array(np.array([1, 4, 1], np.int64), "r")])
    rank3 = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    assert [n.op_type for n in _convert(rank3)[0].graph.node] == ["Tile"]
    result, _ = _convert(_tile_after_broadcast(4), "openvino==2024.6")
    assert "Unsqueeze" not in [n.op_type for n in result.graph.node]


@pytest.mark.parametrize("rank", [4, 5])
def test_openvino_2026_4_tiles_the_form_wrongly_and_the_rank_6_form_right(rank):
    model, feeds = _tile_after_broadcast(rank), _feeds(rank)
    del feeds["reps"]
    want = _ort(model, feeds)
    as_is = run_in("openvino", "2026.4", model, feeds)
    assert as_is["ok"] and not np.array_equal(as_is["values"][0], want)
    converted = run_in("openvino", "2026.4", _convert(model)[0], feeds)
    assert converted["ok"] and np.array_equal(converted["values"][0], want)


def test_openvino_2024_6_tiles_the_form_right():
    model, feeds = _tile_after_broadcast(4), _feeds(4)
    del feeds["reps"]
    result = run_in("openvino", "2024.6", model, feeds)
    assert result["ok"] and np.array_equal(result["values"][0], _ort(model, feeds))
