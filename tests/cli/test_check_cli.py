"""``rewriter check`` and the shape verification run by convert / fold / optimize."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnx.parser
import pytest
from onnx import numpy_helper

from rewriter import cli

GOOD = '''<ir_version: 8, opset_import: ["" : 13]>
g (float[N,3,4] x) => (float[N,1,4] y, float[N,3] z) {
  y = ReduceProd <axes=[1], keepdims=1> (x)
  z = ReduceProd <axes=[-1], keepdims=0> (x)
}'''

BAD_DECLARATIONS = {
    "graph_output_wrong_dims": GOOD.replace("float[N,1,4] y", "float[N,3,4] y"),
    "keepdims0_declared_with_input_rank": GOOD.replace("float[N,3] z", "float[N,3,1] z"),
    "wrong_value_info": GOOD.replace("=> (float[N,1,4] y, float[N,3] z) {",
                                     "=> (float[N,1,4] y, float[N,3] z) <float[N,3,4] r> {\n r = ReduceProd <axes=[1]> (x)"),
    "wrong_in_if_branch": '''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2,3,4] x, bool c) => (float[2,4] y) {
          y = If (c) <then_branch = t () => (float[2,4] ty) { ty = ReduceProd <axes=[1], keepdims=0> (x) },
                      else_branch = e () => (float[2,4] ey) <float[2,5] er> {
                        er = ReduceProd <axes=[1], keepdims=0> (x)
                        ey = Identity (er) }> }''',
    "declared_number_is_another_number": GOOD.replace("float[N,1,4] y", "float[N,1,7] y"),
}


def _named(model: onnx.ModelProto) -> onnx.ModelProto:
    """Name every ReduceProd after its output, so messages can be checked for it."""
    def walk(graph):
        for node in graph.node:
            if node.op_type == "ReduceProd":
                node.name = f"rp_{node.output[0]}"
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
    walk(model.graph)
    return model


def _save(tmp_path, text: str, name: str = "m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(_named(onnx.parser.parse_model(text)), path)
    return path


def test_check_good_model_prints_table_and_verdict(tmp_path, capsys):
    path = _save(tmp_path, GOOD)
    assert cli.main(["check", path]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = lines[1].split()
    assert header == ["node", "location", "form", "dtype", "input", "axes", "keepdims", "noop",
                      "expected", "inferred", "declared", "status"]
    assert any(line.startswith("rp_y ") and "[N,1,4]" in line and line.endswith("ok") for line in lines)
    assert any(line.startswith("rp_z ") and "[-1]" in line and "[N,3]" in line for line in lines)
    assert lines[-1].startswith("OK: 2 ReduceProd")


@pytest.mark.parametrize("case", sorted(BAD_DECLARATIONS))
def test_check_bad_declaration_exits_1_naming_the_node(tmp_path, capsys, case):
    path = _save(tmp_path, BAD_DECLARATIONS[case])
    assert cli.main(["check", path]) == 1
    out = capsys.readouterr().out
    problems = [line for line in out.splitlines() if line.startswith("problem:")]
    assert problems and all("node 'rp_" in line for line in problems)
    assert out.splitlines()[-1].startswith("FAILED")


def test_check_json_carries_every_field(tmp_path, capsys):
    path = _save(tmp_path, BAD_DECLARATIONS["keepdims0_declared_with_input_rank"])
    assert cli.main(["check", path, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "rewriter.check/1" and doc["ok"] is False and doc["model"] == path
    assert doc["reduce_prod_count"] == 2 and doc["problem_count"] == len(doc["problems"]) == 1
    rows = {r["node"]: r for r in doc["nodes"]}
    z = rows["rp_z"]
    assert z == {"node": "rp_z", "location": "main graph", "opset_form": 13, "dtype": "float",
                 "input_shape": ["N", 3, 4], "axes": [-1], "keepdims": 0, "noop_with_empty_axes": None,
                 "expected": ["N", 3], "inferred": ["N", 3], "declared": ["N", 3, 1],
                 "output": "z", "status": "problem"}
    assert rows["rp_y"]["status"] == "ok"
    (p,) = doc["problems"]
    assert set(p) == {"node", "op_type", "location", "output", "kind", "expected", "inferred",
                      "declared", "reason"}
    assert (p["node"], p["op_type"], p["kind"], p["declared"]) == ("rp_z", "ReduceProd", "declared", ["N", 3, 1])


def test_check_json_good_model(tmp_path, capsys):
    path = _save(tmp_path, GOOD)
    assert cli.main(["check", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["problems"] == [] and len(doc["nodes"]) == 2


def test_check_bad_input_exits_2(tmp_path, capsys):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00not a model")
    assert cli.main(["check", str(garbage)]) == 2
    assert cli.main(["check", str(tmp_path / "missing.onnx")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 2 and "Traceback" not in err


def test_check_model_without_reduce_prod(tmp_path, capsys):
    path = _save(tmp_path, '''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2] x) => (float[2] y) { y = Relu (x) }''')
    assert cli.main(["check", path]) == 0
    assert "no ReduceProd node" in capsys.readouterr().out


# ---------------------------------------------------------------- verification inside rewrites

def _break_declaration(model: onnx.ModelProto) -> onnx.ModelProto:
    """What a faulty rewrite could produce: keepdims flipped on ReduceProd 'rp_y'."""
    for node in model.graph.node:
        if node.name == "rp_y":
            for a in node.attribute:
                if a.name == "keepdims":
                    a.i = 0
    return model


def test_convert_refuses_a_rewrite_that_introduces_a_problem(tmp_path, monkeypatch, capsys):
    from rewriter import convert

    real = convert.convert_for

    def faulty(model, target, *args, **kwargs):
        result, report = real(model, target, *args, **kwargs)
        return _break_declaration(result), report

    monkeypatch.setattr(convert, "convert_for", faulty)
    path, out = _save(tmp_path, GOOD), str(tmp_path / "out.onnx")
    assert cli.main(["convert", path, "--opset", "11", "-o", out]) == 1
    assert not os.path.exists(out)
    err = capsys.readouterr().err
    assert "node 'rp_y' (ReduceProd)" in err and "introduced" in err
    # --no-verify skips the ReduceProd shape check, but not the final gate: the input passes
    # onnx's full check, so a result that fails it is never written
    assert cli.main(["convert", path, "--opset", "11", "-o", out, "--no-verify"]) == 1
    assert not os.path.exists(out)
    assert "full check (the input passes it)" in capsys.readouterr().err


def test_convert_with_a_faulty_adapter_is_refused(tmp_path, monkeypatch, capsys):
    from rewriter.convert import registry as adapters

    lookup = getattr(adapters, "lookup", None)  # the registry loads its adapters on first lookup
    real = lookup("ReduceProd", 13, 18) if lookup else adapters.ADAPTERS[("ReduceProd", 13, 18)]

    def faulty(node, ctx):
        real(node, ctx)
        for a in node.attribute:
            if a.name == "keepdims":
                a.i = 1 - a.i

    monkeypatch.setitem(adapters.ADAPTERS, ("ReduceProd", 13, 18), faulty)
    cache_clear = getattr(getattr(adapters, "adapter_path", None), "cache_clear", lambda: None)
    cache_clear()
    try:
        path, out = _save(tmp_path, GOOD), str(tmp_path / "out.onnx")
        # convert's own validation of its result may refuse it first (exit 2); either way
        # the rewrite is refused, nothing is written and the node is named
        assert cli.main(["convert", path, "--opset", "18", "-o", out]) in (1, 2)
        assert not os.path.exists(out)
        assert "rp_y" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        cache_clear()


@pytest.mark.parametrize("command", ["fold", "optimize"])
def test_fold_refuses_a_rewrite_that_introduces_a_problem(tmp_path, monkeypatch, capsys, command):
    from rewriter import fold

    real = fold.fold_model

    def faulty(model, *args, **kwargs):
        result, report = real(model, *args, **kwargs)
        return _break_declaration(result), report

    monkeypatch.setattr(fold, "fold_model", faulty)
    path, out = _save(tmp_path, GOOD), str(tmp_path / "out.onnx")
    assert cli.main([command, path, "-o", out]) == 1
    assert not os.path.exists(out)
    assert "rp_y" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["fold"],
    ["convert", "--opset", "18"],
    ["optimize"],
])
def test_problem_already_in_the_input_is_a_warning(tmp_path, capsys, argv):
    path = _save(tmp_path, BAD_DECLARATIONS["graph_output_wrong_dims"])
    out = str(tmp_path / "out.onnx")
    assert cli.main([argv[0], path, *argv[1:], "-o", out]) == 0
    assert os.path.exists(out)
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings and "rp_y" in warnings[0]
    assert "error:" not in err


def test_fold_of_a_constant_reduce_prod_verifies(tmp_path, capsys):
    model = _named(onnx.parser.parse_model('''<ir_version: 8, opset_import: ["" : 13]>
        g (float[2,3] x) => (float[2,3] y) {
          p = ReduceProd <axes=[0], keepdims=1> (c)
          y = Mul (x, p) }'''))
    model.graph.initializer.append(numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3), "c"))
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "out.onnx")
    onnx.save(model, path)
    assert cli.main(["fold", path, "-o", out]) == 0
    folded = onnx.load(out)
    assert [n.op_type for n in folded.graph.node] == ["Mul"]
    assert "warning:" not in capsys.readouterr().err


@pytest.mark.parametrize("opset", [13, 18])
def test_if_output_declared_against_its_branches_reduce_prod(tmp_path, capsys, opset):
    """At 18 ONNX cannot infer a branch's ReduceProd whose axes are an outer-scope initializer:
    the rule's shape stands in, so the If output's wrong declaration is still caught."""
    def branch(name):
        if opset >= 18:
            node = onnx.helper.make_node("ReduceProd", ["x", "axes"], [name], keepdims=0)
        else:
            node = onnx.helper.make_node("ReduceProd", ["x"], [name], axes=[-1], keepdims=0)
        return onnx.helper.make_graph([node], name, [], [onnx.helper.make_empty_tensor_value_info(name)])

    inits = [numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")] if opset >= 18 else []
    for declared, verdict in (([None, 3], 0), ([None, 3, 1], 1)):
        graph = onnx.helper.make_graph(
            [onnx.helper.make_node("If", ["c"], ["y"], name="choose",
                                   then_branch=branch("t"), else_branch=branch("e"))], "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 4]),
             onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, declared)], inits)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        model.ir_version = 8
        path = str(tmp_path / f"if{opset}.onnx")
        onnx.save(model, path)
        assert cli.main(["check", path]) == verdict, declared
        problems = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("problem:")]
        assert len(problems) == verdict
        assert all("node 'choose' (If) in main graph" in ln for ln in problems)
