"""tools/profile_probe.py: a profile measured through the user's runner, and what --target makes of it.

Without any runtime: the probe against a fake runner (onnx.reference, which refuses one op and
computes another wrongly) writes a profile that lists exactly those two op versions; with it,
``convert --target`` expands the one whose schema has a function body (onnx.defs) into it, and
the result computes what the source computes in ONNX Runtime (and runs in the fake runner), and
refuses the one without, naming it; the ops it runs right are kept. The profile's reading
(``missing``), the verdicts and their aggregation are tested directly. MNN's committed profile
(tools/runtime_data/profiles/mnn-*.json) is checked against its report; with MNN's venv
(~/.cache/rewriter/runtime-venvs/mnn, tools/runners/mnn.py says how to make it; skipped when
absent) a few of its verdicts are measured again and a converted model runs there and matches.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewriter.cli.main import main
from rewriter.errors import RewriterError
from rewriter.targets import parse_target

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "tools" / "runtime_data" / "profiles"
MNN_PYTHON = Path(os.environ.get("REWRITER_RUNTIME_VENVS") or "~/.cache/rewriter/runtime-venvs").expanduser() \
    / "mnn" / "bin" / "python"
REFUSED, WRONG = "Celu", "Sin"  # the fake runner's: Celu-12 has a function body, Sin-7 none
FAKE_RUNNER = f'''
import onnx
from onnx.reference import ReferenceEvaluator

NAME = "fake runtime 0.1"


def run(model_path, inputs):
    model = onnx.load(model_path)
    ops = {{n.op_type for n in model.graph.node}}
    if {REFUSED!r} in ops:
        raise RuntimeError("no kernel for {REFUSED}")
    outputs = ReferenceEvaluator(model).run(None, inputs)
    return [o + 1 for o in outputs] if {WRONG!r} in ops else outputs
'''


def _tool(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _probe(tmp: Path, runner: Path, *args: str, python: str = sys.executable) -> tuple[dict, dict]:
    out = tmp / "profile.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "profile_probe.py"), "--runner", str(runner),
                           "--python", python, "--out", str(out), *args], capture_output=True, text=True,
                          timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(out.read_text()), json.loads((tmp / "profile.report.json").read_text())


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fake")
    runner = tmp / "fake_runner.py"
    runner.write_text(FAKE_RUNNER)
    profile, report = _probe(tmp, runner, "--ops", REFUSED, WRONG, "Relu", "Softsign", "--opsets", "13", "17", "18")
    return tmp, runner, profile, report


def _model(ops: list[str], opset: int = 18) -> onnx.ModelProto:
    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        nodes.append(helper.make_node(op, [prev], [f"t{i}"], name=f"{op.lower()}_{i}"))
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


# ------------------------------------------------------------------------------------------
# the probe against the fake runner


def test_the_profile_lists_exactly_the_refused_and_the_wrong_op_versions(fake):
    _, _, profile, report = fake
    assert profile["missing"] == {"": {REFUSED: [12], WRONG: [7]}}
    assert profile["opsets"][""] == 18 and profile["min_opsets"] == {"": 13}
    assert profile["ir_version"] == onnx.IR_VERSION  # onnx.reference loads every IR version
    assert "ai.onnx.ml" in profile["opsets"] and "unsupported" not in profile  # it runs Binarizer
    ops = report["ops"]
    assert ops[f"{REFUSED}-12"]["status"] == "missing" and set(ops[f"{REFUSED}-12"]["counts"]) == {"refused"}
    assert ops[f"{WRONG}-7"]["status"] == "wrong"
    for key in ("Relu-13", "Relu-14", "Softsign-1"):
        assert ops[key]["status"] == "runs", (key, ops[key])
    assert ops["Relu-14"]["opsets"] == [17, 18]  # each opset asked where the version is in force,
    assert ops["Relu-14"]["origins"] == ["node"]  # by its node test at each
    assert profile["name"] == "fake runtime 0.1"
    source = profile["source"]
    assert "python tools/profile_probe.py --runner" in source and "fake_runner.py" in source
    assert "fake runtime 0.1" in source and f"onnx {onnx.__version__}" in source
    assert "python 3." in source and "numpy " in source


def test_the_profile_is_a_target_that_lacks_those_versions(fake):
    tmp, _, _, _ = fake
    target = parse_target(str(tmp / "profile.json"))
    assert target.runtime is None and target.missing[""][REFUSED] == frozenset({12})
    assert target.lacks("", REFUSED, 12) and target.lacks("", WRONG, 7)
    assert not target.lacks("", "Relu", 14) and not target.lacks("", "Softsign", 1)
    assert target.opsets[""] == 18


def test_convert_expands_or_refuses_exactly_what_the_runtime_lacks(fake):
    """What onnx.defs says decides: an op with a function body is expanded, one without refused."""
    tmp, runner, profile, _ = fake
    lacking = {op: vs for op, vs in profile["missing"][""].items()}
    schemas = {op: onnx.defs.get_schema(op, 18, "") for op in lacking}
    has_body = {op: s.has_function or s.has_context_dependent_function for op, s in schemas.items()}
    assert has_body == {REFUSED: True, WRONG: False}
    x = np.linspace(-2, 2, 10, dtype=np.float32).reshape(2, 5)
    spec = importlib.util.spec_from_file_location("fake_runner_module", runner)
    fake_runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake_runner)
    for op, body in has_body.items():
        source = _model(["Relu", op, "Softsign"])
        src, out = tmp / f"{op}.onnx", tmp / f"{op}.out.onnx"
        onnx.save(source, src)
        assert main(["check", str(src), "--target", str(tmp / "profile.json"), "-q"]) == 1
        code = main(["convert", str(src), "--target", str(tmp / "profile.json"), "-o", str(out), "-q"])
        if not body:
            assert code != 0 and not out.exists()
            continue
        assert code == 0
        result = onnx.load(out)
        kinds = [n.op_type for n in result.graph.node]
        assert op not in kinds and "Relu" in kinds and "Softsign" in kinds, kinds
        np.testing.assert_allclose(_ort(result, x), _ort(source, x), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(fake_runner.run(str(out), {"x": x})[0], _ort(source, x), rtol=1e-6, atol=1e-6)


def test_convert_names_the_op_it_refuses(fake, capsys):
    tmp, _, _, _ = fake
    src = tmp / "wrong.onnx"
    onnx.save(_model([WRONG]), src)
    capsys.readouterr()
    assert main(["convert", str(src), "--target", str(tmp / "profile.json"), "-o", str(tmp / "w.out.onnx")]) != 0
    said = capsys.readouterr()
    assert WRONG in said.out + said.err


def test_a_runner_that_does_not_start_stops_the_probe(tmp_path):
    runner = tmp_path / "broken.py"
    runner.write_text("import no_such_runtime_module\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "profile_probe.py"), "--runner", str(runner),
                           "--out", str(tmp_path / "p.json")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode != 0 and "no_such_runtime_module" in proc.stderr
    assert not (tmp_path / "p.json").exists()


# ------------------------------------------------------------------------------------------
# the pieces, directly


def test_judging_follows_onnx_backend_tolerance():
    probe = _tool("profile_probe")
    exp = np.array([1.0, 2.0, np.nan], dtype=np.float32)
    assert probe.compare(exp, exp.copy(), 1e-3, 1e-7) == ("ok", "")
    assert probe.compare(exp, exp * (1 + 5e-4), 1e-3, 1e-7)[0] == "ok"
    assert probe.compare(exp, exp * (1 + 2e-3), 1e-3, 1e-7)[0] == "wrong"
    assert probe.compare(exp, exp[:2], 1e-3, 1e-7)[0] == "wrong"
    assert probe.compare(np.array([1, 2], np.int64), np.array([1, 2], np.int32), 1e-3, 1e-7)[0] == "dtype"
    assert probe.compare(np.array([1, 2], np.int64), np.array([1, 3], np.int64), 1e-3, 1e-7)[0] == "wrong"


def _case(probe, cid, op, version, opset=13):
    return probe.Case(cid, op, "", version, opset, "node", None, {}, [])


def test_a_version_is_missing_when_wrong_once_or_refused_always():
    probe = _tool("profile_probe")
    cases = [_case(probe, "a1", "A", 1), _case(probe, "a2", "A", 1), _case(probe, "b1", "B", 1),
             _case(probe, "b2", "B", 1), _case(probe, "c1", "C", 1), _case(probe, "c2", "C", 1),
             _case(probe, "d1", "D", 1), _case(probe, "e1", "E", 1)]
    verdicts = {"a1": ("ok", ""), "a2": ("wrong", "x"), "b1": ("refused", "x"), "b2": ("crash", "x"),
                "c1": ("refused", "x"), "c2": ("ok", ""), "d1": ("dtype", "int32"), "e1": ("not_probed", "seq")}
    status = {k[1]: v["status"] for k, v in probe.op_status(cases, verdicts).items()}
    assert status == {"A": "wrong", "B": "missing", "C": "partial", "D": "runs", "E": "unprobed"}
    limits = {"opset": 20, "ir": 9, "ml": None}
    profile = probe.make_profile("x", limits, [11, 13], probe.op_status(cases, verdicts), "s")
    assert profile["missing"] == {"": {"A": [1], "B": [1]}}
    assert profile["opsets"] == {"": 13} and profile["min_opsets"] == {"": 11} and profile["ir_version"] == 9
    assert "TreeEnsemble" in profile["unsupported"]["ai.onnx.ml"]  # it loads no ai.onnx.ml model


def test_a_node_test_is_moved_to_another_version_only_when_it_still_holds():
    """Softmax-13 over axis 1 of a 3-D input is not Softmax-11's (which flattens from the axis):
    that test is not used at opset 11, where the one over the last axis is."""
    probe = _tool("profile_probe")
    cases, _ = probe.op_cases([11, 13], {"Softmax"}, once=False, log=lambda *a: None)
    at11 = {c.id.split("@")[0] for c in cases if c.opset == 11}
    at13 = {c.id.split("@")[0] for c in cases if c.opset == 13}
    assert "test_softmax_axis_1" in at13 and "test_softmax_axis_1" not in at11
    assert "test_softmax_axis_2" in at11  # the last axis: the same under both
    assert all(c.version == 11 for c in cases if c.opset == 11)


def test_a_schema_built_model_is_kept_only_when_the_oracles_agree():
    probe = _tool("profile_probe")
    rng = np.random.default_rng(0)
    built, why = probe._synthetic("Sin", 13, rng)
    assert built is not None and why == ""
    model, feeds, expected = built
    assert feeds["input"].dtype == np.float32 and feeds["input"].shape == (2, 3, 4)
    np.testing.assert_allclose(expected[0], np.sin(feeds["input"]), rtol=1e-6)
    assert probe._synthetic("Cast", 13, rng) == (None, "required attribute to")
    assert probe._synthetic("Reshape", 13, rng)[0] is None  # its shape input takes no float type


def test_a_profile_with_missing_is_read_and_checked(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"opsets": {"": 17}, "missing": {"ai.onnx": {"Gelu": [20]}}}))
    target = parse_target(str(path))
    assert target.missing == {"": {"Gelu": frozenset({20})}}
    assert target.lacks("", "Gelu", 20) and not target.lacks("", "Relu", 14)
    path.write_text(json.dumps({"opsets": {"": 17}, "missing": {"": {"Gelu": "20"}}}))
    with pytest.raises(RewriterError, match="missing"):
        parse_target(str(path))


# ------------------------------------------------------------------------------------------
# MNN


def _mnn_profiles() -> list[Path]:
    return sorted(PROFILES.glob("mnn-*.json")) if PROFILES.is_dir() else []


def _not_report(p: Path) -> bool:
    return not p.name.endswith(".report.json")


def test_mnn_profile_is_measured_and_matches_its_report():
    profiles = [p for p in _mnn_profiles() if _not_report(p)]
    assert profiles, "tools/runtime_data/profiles/mnn-VERSION.json is committed"
    for path in profiles:
        profile = json.loads(path.read_text())
        report = json.loads((path.parent / (path.stem + ".report.json")).read_text())
        assert profile["source"].startswith("measured on ") and "tools/runners/mnn.py" in profile["source"]
        assert profile["name"].startswith("MNN ") and profile["name"].split()[1] in path.name
        target = parse_target(str(path))
        lacking = {(op, v) for op, vs in profile["missing"][""].items() for v in vs}
        assert lacking == {(k.rsplit("-", 1)[0], int(k.rsplit("-", 1)[1])) for k, row in report["ops"].items()
                           if ":" not in k and row["status"] in ("wrong", "missing")}
        assert all(target.lacks("", op, v) for op, v in lacking)
        for op, vs in profile["missing"][""].items():  # every version it lists is one onnx knows
            assert all(onnx.defs.get_schema(op, v, "").since_version == v for v in vs)


mnn = pytest.mark.skipif(not MNN_PYTHON.exists(), reason="no MNN venv (see tools/runners/mnn.py)")


@mnn
def test_mnn_verdicts_hold_when_measured_again(tmp_path):
    path = next(p for p in _mnn_profiles() if _not_report(p))
    report = json.loads((path.parent / (path.stem + ".report.json")).read_text())["ops"]
    again, _ = _probe(tmp_path, ROOT / "tools" / "runners" / "mnn.py", "--ops", "Hardmax", "Relu", "--opsets", "13",
                      python=str(MNN_PYTHON))
    rows = json.loads((tmp_path / "profile.report.json").read_text())["ops"]
    for key in ("Hardmax-13", "Relu-13"):
        assert rows[key]["status"] == report[key]["status"], key
    assert again["missing"][""].get("Hardmax") == ([13] if report["Hardmax-13"]["status"] in ("wrong", "missing")
                                                   else None)


@mnn
def test_a_model_converted_for_mnn_runs_there_and_matches(tmp_path):
    """MNN's converter has no Mish; converted for MNN's profile it becomes its function body."""
    path = next(p for p in _mnn_profiles() if _not_report(p))
    assert parse_target(str(path)).lacks("", "Mish", 18)
    source = _model(["Relu", "Mish"], opset=18)
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(source, src)
    assert main(["convert", str(src), "--target", str(path), "-o", str(out), "-q"]) == 0
    assert "Mish" not in {n.op_type for n in onnx.load(out).graph.node}
    x = np.linspace(-2, 2, 10, dtype=np.float32).reshape(2, 5)
    np.save(tmp_path / "x.npy", x)
    code = ("import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import mnn; "
            "np.save(sys.argv[3], mnn.run(sys.argv[2], {'x': np.load(sys.argv[4])})[0])")
    proc = subprocess.run([str(MNN_PYTHON), "-c", code, str(ROOT / "tools" / "runners"), str(out),
                           str(tmp_path / "y.npy"), str(tmp_path / "x.npy")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), _ort(source, x), rtol=1e-5, atol=1e-6)
