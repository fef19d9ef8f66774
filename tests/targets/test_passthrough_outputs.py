"""A Loop or Scan body output that is one of the body's inputs written by an Identity
(rewriter/targets/passthrough_outputs.py, ``rewrite_forms`` ``identity_written`` of openvino.json
and tract.json): OpenVINO 2026.4 refuses such a body at load (2024.6 runs both right), tract 0.23
aborts on the Scan.  The rule runs without the runtimes; with their venvs
(tools/runtime_venvs.py; skipped when absent) the small models are refused or wrong as they are and
give ONNX Runtime's values converted."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.convert.for_target import convert_for
from rewriter.targets import parse_target
from rewriter.targets.passthrough_outputs import identity_written
from tests.targets.runtime_runs import run_in

F, vi = TensorProto.FLOAT, helper.make_tensor_value_info


def _loop(nested: bool = False) -> onnx.ModelProto:
    """acc = x; repeat 4 times: acc += w, with w carried and passed on unchanged (tf2onnx's while
    loops carry their weights so); ``nested``: the Loop inside an If's branch."""
    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                              helper.make_node("Add", ["acc_in", "w_in"], ["acc_out"])], "body",
                             [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", F, [3]),
                              vi("w_in", F, [3])],
                             [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", F, [3]), vi("w_in", F, [3])])
    loop = helper.make_node("Loop", ["n", "", "x", "w"], ["acc", "wf"], name="loop", body=body)
    nodes = [loop]
    if nested:
        branch = helper.make_graph([loop], "then", [], [vi("acc", F, [3]), vi("wf", F, [3])])
        other = helper.make_graph([helper.make_node("Identity", ["x"], ["acc2"]), helper.make_node("Identity", ["w"], ["wf2"])],
                                  "else", [], [vi("acc2", F, [3]), vi("wf2", F, [3])])
        nodes = [helper.make_node("If", ["flag"], ["acc_if", "wf_if"], name="if", then_branch=branch, else_branch=other),
                 helper.make_node("Identity", ["acc_if"], ["acc_o"]), helper.make_node("Identity", ["wf_if"], ["wf_o"])]
    outs = ["acc_o", "wf_o"] if nested else ["acc", "wf"]
    graph = helper.make_graph(nodes, "g", [vi("x", F, [3]), vi("w", F, [3])], [vi(o, F, [3]) for o in outs],
                              [helper.make_tensor("n", TensorProto.INT64, [], [4]),
                               helper.make_tensor("flag", TensorProto.BOOL, [], [True])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


def _scan() -> onnx.ModelProto:
    """s = s0 + sum of the rows of xs; ys = xs * k, with k a state passed on unchanged."""
    body = helper.make_graph([helper.make_node("Add", ["s_in", "xi"], ["s_out"]),
                              helper.make_node("Mul", ["xi", "k_in"], ["yi"])], "body",
                             [vi("s_in", F, [3]), vi("k_in", F, [3]), vi("xi", F, [3])],
                             [vi("s_out", F, [3]), vi("k_in", F, [3]), vi("yi", F, [3])])
    graph = helper.make_graph([helper.make_node("Scan", ["s0", "k", "xs"], ["s", "kf", "ys"], name="scan", body=body,
                                                num_scan_inputs=1)], "g",
                              [vi("s0", F, [3]), vi("k", F, [3]), vi("xs", F, [4, 3])],
                              [vi("s", F, [3]), vi("kf", F, [3]), vi("ys", F, [4, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


def _feeds(model: onnx.ModelProto) -> dict:
    rng = np.random.default_rng(0)
    return {v.name: rng.random([d.dim_value for d in v.type.tensor_type.shape.dim], dtype=np.float32)
            for v in model.graph.input}


def _ort(model: onnx.ModelProto, feeds: dict) -> dict:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _reference(model: onnx.ModelProto, feeds: dict) -> dict:
    """The values, in numpy float32 in the body's order: ONNX Runtime 1.15 to 1.32 compute the Scan
    as it is wrongly (zeros for the passed-on state and every scan row after the first), and
    onnx.reference the Loop (acc left at x)."""
    outputs = [o.name for o in model.graph.output]
    if "xs" in feeds:
        s = feeds["s0"].copy()
        for row in feeds["xs"]:
            s = s + row
        return dict(zip(outputs, [s, feeds["k"], feeds["xs"] * feeds["k"]]))
    acc = feeds["x"].copy()
    for _ in range(4):
        acc = acc + feeds["w"]
    return dict(zip(outputs, [acc, feeds["w"]]))


def _bodies(model: onnx.ModelProto, op: str) -> list[onnx.GraphProto]:
    from rewriter.graph import traversal

    return [a.g for s in traversal.iter_scopes(model) for n in s.body.node if n.op_type == op
            for a in n.attribute if a.name == "body"]


@pytest.mark.parametrize("op,build", [("Loop", _loop), ("Loop", lambda: _loop(nested=True)), ("Scan", _scan)])
def test_identity_written_same_values(op, build):
    model = build()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    notes = identity_written(op)(out, "openvino 2026.4")
    onnx.checker.check_model(out, full_check=True)
    body = _bodies(out, op)[0]
    inputs = {v.name for v in body.input}
    assert not inputs & {v.name for v in body.output}
    before = {n.output[0] for n in _bodies(model, op)[0].node}
    new = [n for n in body.node if n.output[0] not in before]
    assert [n.op_type for n in new] == ["Identity"] and new[0].input[0] == ("w_in" if op == "Loop" else "k_in")
    assert new[0].output[0] in {v.name for v in body.output}
    assert len(notes) == 1 and "1 output(s) of 1 " + op in notes[0] and "'" + op.lower() + "'" in notes[0]
    feeds = _feeds(model)
    want, got = _reference(model, feeds), _ort(out, feeds)
    assert want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want)


def test_bodies_without_passthrough_left():
    model = _scan()
    body = _bodies(model, "Scan")[0]
    body.node.append(helper.make_node("Identity", ["k_in"], ["k_out"]))
    body.output[1].name = "k_out"
    before = model.SerializeToString()
    assert identity_written("Scan")(model, "tract 0.23") == [] and model.SerializeToString() == before
    assert identity_written("Loop")(_scan(), "tract 0.23") == []


def test_new_names_are_fresh():
    """A body value already named as the Identity's output would be: another name is taken."""
    model = _scan()
    body = _bodies(model, "Scan")[0]
    body.node[1].output[0] = body.output[2].name = "k_in_passed"
    onnx.checker.check_model(model, full_check=True)
    identity_written("Scan")(model, "tract 0.23")
    onnx.checker.check_model(model, full_check=True)
    outputs = [o for n in body.node for o in n.output]
    assert len(outputs) == len(set(outputs)) == 3
    feeds = _feeds(model)
    want, got = _reference(model, feeds), _ort(model, feeds)
    assert all(np.array_equal(want[k], got[k]) for k in want)


def test_new_names_avoid_a_body_initializer():
    """A name only a body's initializer has (no node reads it) is taken too."""
    model = _scan()
    body = _bodies(model, "Scan")[0]
    body.initializer.append(helper.make_tensor("k_in_passed", F, [1], [0.0]))
    identity_written("Scan")(model, "tract 0.23")
    onnx.checker.check_model(model, full_check=True)
    written = next(n for n in body.node if n.op_type == "Identity")
    assert written.input[0] == "k_in" and written.output[0] != "k_in_passed"


def test_data_names_the_forms():
    for target, ops in [("openvino==2026.4", {"Loop", "Scan"}), ("openvino==2024.6", set()), ("tract==0.23", {"Scan"}),
                        ("onnxruntime==1.15", {"Scan"}), ("onnxruntime==1.20", {"Scan"}), ("onnxruntime==1.32", {"Scan"}),
                        ("onnxruntime==1.14", set())]:
        forms = parse_target(target).rewrite_forms
        named = {op: f if isinstance(f := forms.get(op, {}).get("form", []), list) else [f] for op in ("Loop", "Scan")}
        assert {op for op, f in named.items() if "identity_written" in f} == ops, target
    assert parse_target("tract==0.23").rewrite_forms["Scan"]["form"] == ["identity_written", "read_outputs_written"]


def _measured(runtime: str, release: str, model: onnx.ModelProto, target: str):
    feeds = _feeds(model)
    want = _reference(model, feeds)
    as_is = run_in(runtime, release, model, feeds)
    converted, report = convert_for(model, runtime=target)
    assert any("written by an Identity" in n for n in report.target_notes)
    got = run_in(runtime, release, converted, feeds)
    assert got["ok"], got
    assert len(got["values"]) == len(want)  # (in the graph's output order; tract names them otherwise)
    assert all(np.array_equal(want[o.name], v) for o, v in zip(model.graph.output, got["values"]))
    return as_is, want


def test_openvino_2026_refuses_as_is_and_runs_converted():
    for build in (_loop, _scan):
        as_is, _ = _measured("openvino", "2026.4", build(), "openvino==2026.4")
        assert not as_is["ok"] and ("canonical inputs size" in as_is["error"] or "Scan-15" in as_is["error"])


def test_tract_aborts_on_scan_as_is_and_runs_converted():
    as_is, _ = _measured("tract", "0.23", _scan(), "tract==0.23")
    assert not as_is["ok"] and as_is["stage"] == "crash" and "panic" in as_is["error"]


def _scan_output_passed() -> onnx.ModelProto:
    """s = s0 + sum of the rows of xs; ys = xs, each row a scan output as the body read it."""
    body = helper.make_graph([helper.make_node("Add", ["s_in", "xi"], ["s_out"])], "body",
                             [vi("s_in", F, [3]), vi("xi", F, [3])], [vi("s_out", F, [3]), vi("xi", F, [3])])
    graph = helper.make_graph([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], name="scan", body=body,
                                                num_scan_inputs=1)], "g",
                              [vi("s0", F, [3]), vi("xs", F, [4, 3])], [vi("s", F, [3]), vi("ys", F, [4, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


@pytest.mark.parametrize("build", [_scan, _scan_output_passed])
def test_onnxruntime_computes_as_is_wrongly_and_converted_right(build):
    """Every ONNX Runtime release with a venv (tools/ort_venvs.py; none: only the installed one runs
    the converted model) gives zeros for a passed-on state or scan row as it is, and the values
    converted for it."""
    from tests import old_ort

    model = build()
    feeds = _feeds(model)
    s = feeds["s0"].copy()
    for row in feeds["xs"]:
        s = s + row
    want = {"s": s, **({"kf": feeds["k"], "ys": feeds["xs"] * feeds["k"]} if "k" in feeds else {"ys": feeds["xs"]})}
    converted, report = convert_for(model, runtime="onnxruntime==1.20")
    assert any("written by an Identity" in n for n in report.target_notes)
    got = _ort(converted, feeds)
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    for release in old_ort.releases():
        as_is, fixed = old_ort.run(release, model, feeds), old_ort.run(release, converted, feeds)
        assert as_is["ok"] and fixed["ok"], release
        assert not np.array_equal(as_is["outputs"]["ys"], want["ys"]), release
        assert all(np.array_equal(fixed["outputs"][k], want[k]) for k in want), release


def test_check_plan_and_verify(tmp_path, capsys):
    """``check --target`` names the Scan as a measured form and says what convert would write;
    ``--plan`` says it too; ``--verify`` passes on the converted model and on a plain opset change
    (both runs written so that ONNX Runtime computes them right), where comparing ONNX Runtime's
    own runs of the original would fail the right result."""
    from rewriter.cli.main import main

    path, out = tmp_path / "scan.onnx", tmp_path / "out.onnx"
    onnx.save(_scan(), path)
    code = main(["check", str(path), "--target", "onnxruntime==1.20"])
    text = capsys.readouterr().out
    assert code == 1 and "1 thing(s) stop it" in text and "form: 1 output(s) of 1 Scan bodies" in text
    assert text.count("written by an Identity") == 2  # the finding and what convert would do
    assert main(["check", str(path), "--target", "openvino==2024.6"]) == 0
    assert "nothing stops it" in capsys.readouterr().out
    assert main(["convert", str(path), "--target", "onnxruntime==1.20", "--plan"]) == 0
    assert "target: 1 output(s) of 1 Scan bodies" in capsys.readouterr().out
    for args in (["--target", "onnxruntime==1.20"], ["--opset", "17"]):
        assert main(["convert", str(path), *args, "--verify", "-o", str(out)]) == 0, args
        text = capsys.readouterr().out
        assert "kf (float): max abs diff 0" in text and "MISMATCH" not in text


def test_onnxruntime_data_survives_a_rebuild(tmp_path, monkeypatch):
    """tools/runtime_data/build_tables.py rebuilds onnxruntime.json from git: the measured forms of
    the file it replaces are kept."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("build_tables", root / "tools" / "runtime_data" / "build_tables.py")
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    fresh = {"releases": {"1.20": {"opsets": {"": 21}}, "1.3": {"opsets": {"": 10}}}}
    kept = tables._with_measured(fresh, "onnxruntime.json")
    shipped = json.loads((root / "rewriter" / "targets" / "data" / "onnxruntime.json").read_text())["releases"]
    assert kept["releases"]["1.20"]["rewrite_forms"] == shipped["1.20"]["rewrite_forms"]
    assert "rewrite_forms" not in kept["releases"]["1.3"]


def _framing() -> onnx.ModelProto:
    """frames[:, t] = Concat(prev, x[:, t]) and the next state its last 6 values (onnx-asr's
    wespeaker frames its samples so): a scan output a body node reads too."""
    inits = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("hop", 4), ("big", 2 ** 63 - 1), ("one", 1))]
    body = helper.make_graph([helper.make_node("Concat", ["prev", "curr"], ["frame"], axis=1),
                              helper.make_node("Slice", ["frame", "hop", "big", "one", "one"], ["next"])], "body",
                             [vi("prev", F, [1, 6]), vi("curr", F, [1, 4])], [vi("next", F, [1, 6]), vi("frame", F, [1, 10])],
                             inits)
    graph = helper.make_graph([helper.make_node("Scan", ["x0", "x"], ["last", "frames"], name="framing", body=body,
                                                num_scan_inputs=1, scan_input_axes=[1], scan_output_axes=[1])], "g",
                              [vi("x0", F, [1, 6]), vi("x", F, [1, 5, 4])], [vi("last", F, [1, 6]), vi("frames", F, [1, 5, 10])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _framed(feeds: dict) -> dict:
    state, frames = feeds["x0"], []
    for t in range(feeds["x"].shape[1]):
        frame = np.concatenate([state, feeds["x"][:, t]], axis=1)
        frames.append(frame)
        state = frame[:, 4:]
    return {"last": state, "frames": np.stack(frames, axis=1)}


def test_read_outputs_written():
    model = _framing()
    assert identity_written("Scan")(model, "tract 0.23") == []  # no body output is a body input
    out = onnx.ModelProto()
    out.CopyFrom(model)
    notes = identity_written("Scan", read=True)(out, "tract 0.23")
    onnx.checker.check_model(out, full_check=True)
    body = _bodies(out, "Scan")[0]
    written = next(n for n in body.node if n.op_type == "Identity")
    assert written.input[0] == "frame" and body.output[1].name == written.output[0] and body.output[0].name == "next"
    assert "or are read in the body too" in notes[0] and "'framing'" in notes[0]
    feeds = {"x0": np.random.default_rng(3).random((1, 6), dtype=np.float32),
             "x": np.random.default_rng(4).random((1, 5, 4), dtype=np.float32)}
    want, got = _framed(feeds), _ort(out, feeds)
    assert all(np.array_equal(want[k], got[k]) for k in want)


def test_tract_refuses_a_read_scan_output_and_runs_it_written():
    model = _framing()
    feeds = {"x0": np.random.default_rng(3).random((1, 6), dtype=np.float32),
             "x": np.random.default_rng(4).random((1, 5, 4), dtype=np.float32)}
    converted, report = convert_for(model, runtime="tract==0.23")
    assert any("or are read in the body too" in n for n in report.target_notes)
    as_is = run_in("tract", "0.23", model, feeds)
    assert not as_is["ok"] and "Impossible to unify" in as_is["error"]
    got = run_in("tract", "0.23", converted, feeds)
    assert got["ok"], got
    want = _framed(feeds)
    assert all(np.array_equal(want[o.name], v) for o, v in zip(model.graph.output, got["values"]))
