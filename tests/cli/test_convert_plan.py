"""`rewriter convert --plan`: what a conversion would do, every blocker named, nothing written."""

from __future__ import annotations

import json
import os

import onnx
import pytest
from onnx import TensorProto, helper

from rewriter.cli import main


def _model(path, *, blocked: bool) -> str:
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln", axis=-1),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    outputs = [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3, 4])]
    if blocked:
        nodes += [helper.make_node("DFT", ["y"], ["d"], name="dft1"), helper.make_node("DFT", ["y"], ["e"], name="dft2")]
        outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3, 4, 2]) for n in ("d", "e")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [4]),
                                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, path)
    return str(path)


def test_plan_of_an_impossible_conversion_names_every_blocker_and_writes_nothing(tmp_path, capsys):
    src = _model(tmp_path / "m.onnx", blocked=True)
    assert main(["convert", src, "--opset", "16", "--plan"]) == 2
    out = capsys.readouterr().out
    assert "impossible: 2 node(s) block it" in out
    assert "node 'dft1' (DFT)" in out and "node 'dft2' (DFT)" in out and "targets >= 17" in out
    assert "LayerNormalization: 1 node(s): expanded x1" in out
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_plan_of_a_possible_conversion_exits_0(tmp_path, capsys):
    src = _model(tmp_path / "m.onnx", blocked=False)
    assert main(["convert", src, "--opset", "17", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "opset 18 -> 17: possible" in out and "Relu: 1 node(s)" in out
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_plan_as_json(tmp_path, capsys):
    src = _model(tmp_path / "m.onnx", blocked=True)
    assert main(["convert", src, "--opset", "16", "--plan", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["source_opset"] == 18 and doc["target_opset"] == 16
    assert sorted(b["node"].split("'")[1] for b in doc["blockers"]) == ["dft1", "dft2"]
    assert {r["op"] for r in doc["ops"]} >= {"DFT", "LayerNormalization", "Relu"}


def test_convert_without_output_or_plan_is_a_usage_error(tmp_path, capsys):
    src = _model(tmp_path / "m.onnx", blocked=False)
    assert main(["convert", src, "--opset", "17"]) == 2
    assert capsys.readouterr().err.startswith("error: convert needs -o OUT")


@pytest.mark.parametrize("count", [25])
def test_a_refusal_lists_twenty_blockers_then_a_count(tmp_path, capsys, count):
    # GridSample (opset 16) has no function body and no decomposition: blocked at 13
    nodes = [helper.make_node("GridSample", ["x", "grid"], [f"d{i}"], name=f"gs{i}") for i in range(count)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2]),
                                           helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 2, 2, 2])],
                              [helper.make_tensor_value_info(f"d{i}", TensorProto.FLOAT, [1, 1, 2, 2])
                               for i in range(count)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), "--opset", "13", "-o", str(tmp_path / "o.onnx")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{count} node(s) block it" in err
    assert err.count("(GridSample)") == 20 and f"and {count - 20} more" in err
    assert not (tmp_path / "o.onnx").exists()


def test_plan_on_a_directory_without_output_is_a_usage_error(tmp_path, capsys):
    _model(tmp_path / "m.onnx", blocked=False)
    assert main(["convert", str(tmp_path), "--opset", "17", "--plan"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "--plan takes one model file" in err


@pytest.mark.parametrize("extra", [["-o", "out.onnx"], ["--verify"]])
def test_plan_with_output_or_verify_is_refused(tmp_path, capsys, extra):
    src = _model(tmp_path / "m.onnx", blocked=False)
    extra = [str(tmp_path / e) if e.endswith(".onnx") else e for e in extra]
    assert main(["convert", src, "--opset", "17", "--plan", *extra]) == 2
    assert "--plan writes and verifies nothing" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_plan_counts_the_steps_of_the_models_nodes_apart_from_those_the_conversion_makes(tmp_path, capsys):
    """Relu 18 -> 13 is one step of one node; the LayerNormalization body's nodes are listed apart."""
    src = _model(tmp_path / "m.onnx", blocked=False)
    assert main(["convert", src, "--opset", "13", "--plan", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["op"]: r for r in doc["ops"]}
    assert rows["Relu"]["nodes"] == 1 and rows["Relu"]["steps"] == {"type-only": 1}
    assert rows["LayerNormalization"]["steps"] == {"expanded": 1}
    made = {r["op"] for r in doc["made_by_the_conversion"]}
    assert {"Add", "Div"} <= made and "Relu" not in made  # body nodes that take steps (Add 14 -> 13, ...)
    assert main(["convert", src, "--opset", "13", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "steps of the nodes the conversion makes" in out and "  Relu: 1 node(s): type-only x1" in out


def test_plan_json_has_its_schema_status_and_structured_blockers(tmp_path, capsys):
    import json as _json

    import onnx as _onnx
    from onnx import helper as _h

    model = _h.make_model(_h.make_graph([_h.make_node("GridSample", ["x", "grid"], ["y"], name="dft")], "g",
                                        [_h.make_tensor_value_info("x", 1, [1, 1, 2, 2]),
                                         _h.make_tensor_value_info("grid", 1, [1, 2, 2, 2])],
                                        [_h.make_tensor_value_info("y", 1, [1, 1, 2, 2])]),
                          opset_imports=[_h.make_opsetid("", 18)])
    path = str(tmp_path / "dft.onnx")
    _onnx.save(model, path)
    assert main(["convert", path, "--opset", "15", "--plan", "--json"]) == 2
    doc = _json.loads(capsys.readouterr().out)
    assert doc["schema"] == "rewriter.plan/1" and doc["exit_status"] == 2 and not doc["ok"]
    blocker = doc["blockers"][0]
    assert blocker["name"] == "dft" and blocker["where"] == "main graph" and blocker["op"] == "GridSample"
