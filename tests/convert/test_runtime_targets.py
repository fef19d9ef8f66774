"""Runtime targets: the shipped tables against the releases themselves, and models converted for
a release loading and computing the same there.

Oracles: older ONNX Runtime releases in their own venvs (``tools/ort_venvs.py``; these tests
skip when none is installed), running what was written; the current ONNX Runtime on the
source; for the data's own consistency, onnx's version table."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import cli
from rewriter.convert import convert_for
from rewriter.errors import RewriterError
from rewriter.targets import blockers, parse_target, releases
from tests import old_ort

F = TensorProto.FLOAT
INSTALLED = old_ort.releases()
KNOWN = [r for r in INSTALLED if r in releases("onnxruntime")]
needs_old = pytest.mark.skipif(not KNOWN, reason="no old onnxruntime venv (python tools/ort_venvs.py makes them)")


def _relu(opset, ir, domain_ml=None):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    imports = [helper.make_opsetid("", opset)]
    if domain_ml is not None:
        nodes = [helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="L1")]
        imports.append(helper.make_opsetid("ai.onnx.ml", domain_ml))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3])],
                              [helper.make_tensor_value_info("y", F, [2, 3])])
    return helper.make_model(graph, opset_imports=imports, ir_version=ir)


# ------------------------------------------------------------ the data

def test_every_onnxruntime_row_is_consistent_with_onnx_version_table():
    for release in releases("onnxruntime"):
        t = parse_target(f"onnxruntime=={release}")
        assert t.opsets[""] >= 7 and t.ir_version >= 3, release
        # the IR version a release loads holds its newest opset (else no model of it could load)
        needed = helper.find_min_ir_version_for([helper.make_opsetid("", t.opsets[""])])
        assert t.ir_version >= needed, (release, t.ir_version, needed)


def test_releases_are_in_order_and_names_are_checked():
    known = releases("onnxruntime")
    assert known[0] == "1.0" and known.index("1.15") < known.index("1.20")
    assert parse_target("ort==1.15.1").name == "onnxruntime 1.15"
    for bad in ("onnxruntime==0.9", "onnxruntime", "tflite==2.0", "onnxruntime==9.0", "tensorrt==7.2"):
        with pytest.raises(RewriterError):
            parse_target(bad)
    # a release between two the data knows takes the older one's limits (which it meets too)
    between = parse_target("tensorrt==10.8")
    assert between.opsets == parse_target("tensorrt==10.1").opsets and "as 10.1" in between.name


@needs_old
@pytest.mark.parametrize("release", KNOWN)
def test_the_table_row_is_what_the_release_loads(release):
    t = parse_target(f"onnxruntime=={release}")
    top, ir, ml = t.opsets[""], t.ir_version, t.opsets["ai.onnx.ml"]
    assert old_ort.loads(release, _relu(top, ir))[0], "its newest opset and IR version load"
    assert not old_ort.loads(release, _relu(top + 1, max(ir, 3)))[0], "the next opset does not"
    assert not old_ort.loads(release, _relu(min(top, 13), ir + 1))[0], "the next IR version does not"
    assert old_ort.loads(release, _relu(13, ir, domain_ml=ml))[0], "its ai.onnx.ml opset loads"


# ------------------------------------------------------------ what check --target says

def test_check_target_names_what_stops_an_old_release(tmp_path, capsys):
    path = str(tmp_path / "m.onnx")
    onnx.save(_relu(21, 10), path)
    assert cli.main(["check", path, "--target", "onnxruntime==1.15"]) == 1
    out = capsys.readouterr().out
    assert "IR version 10 (it loads up to" in out and "opset 21 of ai.onnx (it implements up to 19)" in out
    assert cli.main(["check", path, "--target", "onnxruntime==1.20", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == {"target": "onnxruntime 1.20", "loads": True, "blockers": [], "run_notes": []}


def test_a_profile_describes_any_runtime(tmp_path):
    profile = tmp_path / "npu.json"
    profile.write_text(json.dumps({"name": "npu 2.1", "opsets": {"": 13}, "ir_version": 7,
                                   "unsupported": {"": ["LayerNormalization"]}}))
    t = parse_target(str(profile))
    assert t.name == "npu 2.1" and t.lacks("", "LayerNormalization", 17) and not t.lacks("", "Relu", 13)
    profile.write_text(json.dumps({"opsets": {"": 13}, "colour": "red"}))
    with pytest.raises(RewriterError, match="unknown key"):
        parse_target(str(profile))


# ------------------------------------------------------------ converting for a release

def _layer_norm_model():
    """LayerNormalization-17 (an op TensorRT 8.5 lacks) at opset 21, IR 10, as dynamo exports."""
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, 8, dtype=np.float32), "scale")
    bias = numpy_helper.from_array(np.linspace(-0.2, 0.2, 8, dtype=np.float32), "bias")
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["n"], axis=-1, name="ln"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 8])],
                              [helper.make_tensor_value_info("y", F, [2, 8])], [scale, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_an_op_the_runtime_lacks_is_expanded_into_its_function_body(tmp_path):
    profile = tmp_path / "trt.json"
    profile.write_text(json.dumps({"opsets": {"": 17}, "ir_version": 8,
                                   "unsupported": {"": ["LayerNormalization"]}}))
    model = _layer_norm_model()
    result, report = convert_for(model, runtime=str(profile))
    ops = {n.op_type for n in result.graph.node}
    assert "LayerNormalization" not in ops and result.opset_import[0].version == 17 and result.ir_version == 8
    assert report.expanded["LayerNormalization"] == 1
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]  # noqa: E731
    np.testing.assert_allclose(run(result), run(model), rtol=1e-5, atol=1e-6)
    assert not blockers(result, parse_target(str(profile)))


def test_an_op_the_runtime_lacks_without_a_body_blocks_naming_it(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"opsets": {"": 21}, "unsupported": {"": ["Sqrt"]}}))
    model = _relu(21, 10)
    model.graph.node[0].op_type, model.graph.node[0].name = "Sqrt", "root"
    with pytest.raises(RewriterError, match=r"node 'root' \(Sqrt\).*does not implement Sqrt-13"):
        convert_for(model, runtime=str(profile))


def test_an_op_the_runtime_lacks_with_a_body_is_expanded(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"opsets": {"": 21}, "unsupported": {"": ["Relu"]}}))
    result, report = convert_for(_relu(21, 10), runtime=str(profile))
    assert "Relu" not in {n.op_type for n in result.graph.node} and report.expanded["Relu"] == 1


@needs_old
@pytest.mark.parametrize("release", KNOWN)
def test_a_dynamo_like_export_converted_for_a_release_loads_and_matches_there(release):
    model = _layer_norm_model()
    result, _ = convert_for(model, runtime=f"onnxruntime=={release}")
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    there = old_ort.run(release, result, {"x": x})
    assert there["ok"], there["error"]
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(there["outputs"]["y"], expected, rtol=1e-5, atol=1e-6)


def test_the_kernel_tables_agree_with_what_the_releases_lack():
    """The documented kernel ranges (an 'a+' range implements schema a only) already say what
    the releases' own loading found missing at their newest opset (the probe's data); where the
    documents list a kernel the release does not have, the measured list says so."""
    table = json.load(open("rewriter/targets/data/onnxruntime.json"))["releases"]
    t = parse_target("onnxruntime==1.15")
    probed = table["1.15"]["missing_kernels"][""]
    for op, versions in probed.items():
        for v in versions:
            assert t.lacks("", op, v), (op, v)
    # the documents alone already say each of the 15 kernels 1.15 lacks at opset 19
    docs_only = parse_target("onnxruntime==1.15")
    object.__setattr__(docs_only, "missing", None)
    assert len(probed) == 15 and {op for op in probed if docs_only.lacks("", op, 19)} == set(probed)
    assert not t.lacks("", "Resize", 19) and not t.lacks("", "LayerNormalization", 17)
    assert not t.lacks("", "Constant", 13) and not docs_only.lacks("", "Constant", 19)  # no kernel needed
    assert parse_target("onnxruntime==1.20").lacks("ai.onnx.ml", "TreeEnsemble", 5)


def test_the_tensorrt_rows_are_what_their_operator_lists_say():
    table = json.load(open("rewriter/targets/data/tensorrt.json"))["releases"]
    for release, entry in table.items():
        low, high = entry["opsets"][""]
        assert f"{high}" in entry["header"] and low <= high, release  # "... up to Opset 17" / "opset 9 to opset 20"
        assert not set(entry["supported"]) & set(entry["unsupported"]), release
        t = parse_target(f"tensorrt=={release}")
        for op in entry["unsupported"]:
            assert t.lacks("", op, 13), (release, op)
        for op in entry["supported"]:
            assert not t.lacks("", op, 13), (release, op)
    assert parse_target("tensorrt==8.5").lacks("", "LayerNormalization", 17)
    assert not parse_target("tensorrt==8.6").lacks("", "LayerNormalization", 17)


def _tree_ensemble_5():
    from tests.convert.test_ml_convert import _regressor

    model = _regressor([0.25, 0.0, 0.0], TensorProto.FLOAT)
    up, _ = convert_for(model, ml_opset=5)
    up.opset_import[0].version = 21
    return up


def test_an_ml_op_the_release_lacks_takes_the_ml_opset_down():
    # ONNX Runtime 1.20 takes ai.onnx.ml 5 but has no TreeEnsemble-5 kernel
    result, _ = convert_for(_tree_ensemble_5(), runtime="onnxruntime==1.20")
    assert [(o.domain, o.version) for o in result.opset_import if o.domain] == [("ai.onnx.ml", 4)]
    assert [n.op_type for n in result.graph.node] == ["TreeEnsembleRegressor"]


@pytest.mark.skipif("1.20" not in INSTALLED, reason="no onnxruntime 1.20 venv")
def test_a_tree_ensemble_converted_for_1_20_runs_there():
    model = _tree_ensemble_5()
    x = {"x": np.array([[0.1], [0.3], [0.25], [-1.0]], np.float32)}
    assert not old_ort.loads("1.20", model)[0]
    result, _ = convert_for(model, runtime="onnxruntime==1.20")
    there = old_ort.run("1.20", result, x)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]
    assert there["ok"], there["error"]
    np.testing.assert_array_equal(there["outputs"]["y"], expected)


@pytest.mark.parametrize("argv", [
    ["convert", "{m}", "--target", "onnxruntime==1.15", "-o", "{o}"],
    ["convert", "{m}", "--target", "onnxruntime==1.15", "--plan"],
    ["convert", "{m}", "--target", "onnxruntime==1.20", "--dtype", "float16", "-o", "{o}"],
    ["check", "{m}", "--target", "onnxruntime==1.15"],
])
def test_a_target_is_parsed_once_per_run(tmp_path, monkeypatch, argv):
    """--target becomes one TargetSpec in the command's preflight; nothing below parses it again."""
    import rewriter.targets as targets
    import rewriter.targets.spec as spec_module

    calls = []

    def counting(text):
        calls.append(text)
        return parse_target(text)

    monkeypatch.setattr(spec_module, "parse_target", counting)
    monkeypatch.setattr(targets, "parse_target", counting)
    m, o = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(_relu(21, 10), m)
    assert cli.main([a.format(m=m, o=o) for a in argv]) in (0, 1)
    assert calls == [argv[argv.index("--target") + 1]]
