"""The measured data of OpenVINO, tract, TVM and LiteRT (onnx2tf) releases (rewriter/targets/data/<runtime>.json,
raw verdicts in tools/runtime_data/<runtime>-<release>.json, both written by tools/runtime_probe.py).

Without the runtimes (CI): each file parses, names the probe's command, versions and date, its
summary is what the raw verdicts give, every op version it lists exists in onnx, and the findings
the issue reported and the probe confirmed are in it.  With a runtime's venv
(tools/runtime_venvs.py; skipped when absent): a model converted by the rewriter runs there and
matches numpy, and the data's verdicts hold when run again.
"""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.targets.runtime_runs import ROOT, run_in, tool

DATA = ROOT / "rewriter" / "targets" / "data"
RAW = ROOT / "tools" / "runtime_data"
RUNTIMES = {"openvino": ["2026.4", "2024.6"], "tract": ["0.23"], "tvm": ["0.27"], "litert": ["2.6"]}
RELEASES = [(rt, rel) for rt, rels in RUNTIMES.items() for rel in rels]
PUBLISHED = [(rt, rel) for rt, rel in RELEASES if rt != "tvm"]  # TVM publishes no per-op list


def _table(runtime: str) -> dict:
    return json.loads((DATA / f"{runtime}.json").read_text())


def _raw(runtime: str, release: str) -> dict:
    return json.loads((RAW / f"{runtime}-{release}.json").read_text())


# ------------------------------------------------------------------------------------------
# the files, without the runtimes


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_entry_names_its_probe_versions_and_date(runtime, release):
    table = _table(runtime)
    assert "tools/runtime_probe.py" in table["source"]
    entry = table["releases"][release]
    probe = entry["probe"]
    assert probe["command"].startswith("python tools/runtime_probe.py --runtime ")
    assert f"{runtime}=={release}" in probe["command"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", probe["date"])
    assert str(entry[runtime]).startswith(release + ".")  # the release the venv held
    assert probe["versions"]["onnx"] and probe["versions"]["numpy"]
    assert probe["raw"] == f"tools/runtime_data/{runtime}-{release}.json"
    assert (ROOT / probe["raw"]).is_file()


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_opsets_and_ir_are_measured_numbers(runtime, release):
    entry = _table(runtime)["releases"][release]
    raw = _raw(runtime, release)
    assert isinstance(entry["opsets"][""], int) and 7 <= entry["opsets"][""] <= raw["onnx_newest"]["opset"]
    assert isinstance(entry["ir_version"], int) and 7 <= entry["ir_version"] <= raw["onnx_newest"]["ir_version"]
    assert raw["opset_probe"]["ai.onnx"][str(entry["opsets"][""])] == "ok"
    assert raw["opset_probe"]["ir"][str(entry["ir_version"])] == "ok"
    # no release measured here runs an ai.onnx.ml op: the opset is then absent, not guessed
    assert ("ai.onnx.ml" in entry["opsets"]) == any(v == "ok" for v in raw["opset_probe"]["ai.onnx.ml"].values())


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_summary_is_what_the_raw_verdicts_give(runtime, release):
    probe = tool("runtime_probe")
    entry = _table(runtime)["releases"][release]
    again = probe.summarize(_raw(runtime, release))
    for key in ("opsets", "ir_version", "missing", "wrong", "partial", "dtype_differs", "needs_constant", "types_refused",
                "counts"):
        assert entry[key] == again[key], key
    for key in ("type_verdicts", "form_verdicts", "unmeasured"):  # (only LiteRT's data has them so far)
        assert entry.get(key, {}) == again[key], key


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_listed_op_versions_are_schema_versions(runtime, release):
    entry = _table(runtime)["releases"][release]
    for part in ("missing", "wrong", "dtype_differs"):
        for domain, ops in entry[part].items():
            for op, versions in ops.items():
                assert versions == sorted(set(versions)), (part, op)
                for v in versions:
                    assert onnx.defs.get_schema(op, v, domain).since_version == v, (part, domain, op, v)


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_counts_add_up(runtime, release):
    raw = _raw(runtime, release)
    counts = _table(runtime)["releases"][release]["counts"]
    verdicts = ("ok", "refused", "wrong", "dtype", "crash", "timeout", "not_probed")
    for kind, row in counts.items():
        if kind in ("node", "expanded", "form"):
            assert row["cases"] == sum(row[v] for v in verdicts)
            assert row["cases"] == sum(r["kind"] == kind for r in raw["cases"].values())
    # every ONNX backend node test case of the onnx that made the file was tried
    assert counts["node"]["cases"] + counts["expanded"]["cases"] >= 1800


def test_openvino_2026_4_ignores_the_reduce_axes_attribute_at_13_to_17():
    """Issue 41: OpenVINO 2026.4.1 reduces every axis of ReduceL1 / ReduceLogSum / ReduceLogSumExp
    when the axes are an attribute at opsets 13 to 17; right at 11 (schema version 11) and at 18
    (axes an input); 2024.6 is right."""
    entry = _table("openvino")["releases"]["2026.4"]
    raw = _raw("openvino", "2026.4")["cases"]
    for op in ("ReduceL1", "ReduceLogSum", "ReduceLogSumExp"):
        assert 13 in entry["wrong"][""][op]
        assert 11 not in entry["wrong"][""].get(op, [])
        for opset in (13, 17):
            row = raw[f"form/{op}-13/opset{opset}/float/axes=attr[1]/keepdims=1"]
            assert row["verdict"] == "wrong" and "shape [1, 1, 1], expected [2, 1, 4]" in row["detail"]
            assert raw[f"form/{op}-13/opset{opset}/float/axes=none/keepdims=1"]["verdict"] == "ok"
        assert raw[f"form/{op}-11/opset11/float/axes=attr[1]/keepdims=1"]["verdict"] == "ok"
        assert raw[f"form/{op}-18/opset18/float/axes=const[1]/keepdims=1"]["verdict"] == "ok"
    other = _table("openvino")["releases"]["2024.6"]["wrong"].get("", {})
    for op in ("ReduceL1", "ReduceLogSum", "ReduceLogSumExp"):
        assert 13 not in other.get(op, [])
    # the other Reduce ops take the attribute at 13-17
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare"):
        assert 13 not in entry["wrong"][""].get(op, []), op


def test_openvino_was_judged_in_float32():
    for release in RUNTIMES["openvino"]:
        config = _table("openvino")["releases"][release]["config"]
        assert config["INFERENCE_PRECISION_HINT"] == "f32" and config["device"] == "CPU"


def test_tract_needs_reduce_axes_constant():
    """Issue 41: tract refuses a Reduce whose axes are a graph input (opset 18's form fed at run
    time) and runs the same node with the axes constant."""
    raw = _raw("tract", "0.23")["cases"]
    for op in ("ReduceSum", "ReduceL1", "ReduceMax", "ReduceMean"):
        version = 13 if op == "ReduceSum" else 18
        assert raw[f"form/{op}-{version}/opset18/float/axes=input[1]/keepdims=1"]["verdict"] == "refused"
        assert raw[f"form/{op}-{version}/opset18/float/axes=const[1]/keepdims=1"]["verdict"] == "ok"


def test_tract_needs_squeeze_axes_given_and_constant():
    raw = _raw("tract", "0.23")["cases"]
    assert raw["form/Squeeze-11/opset11/float/axes=none"]["verdict"] == "refused"
    assert raw["form/Squeeze-11/opset11/float/axes=attr[1]"]["verdict"] == "ok"
    for opset in (13, 17, 18):
        assert raw[f"form/Squeeze-13/opset{opset}/float/axes=input[1]"]["verdict"] == "refused"
        assert raw[f"form/Squeeze-13/opset{opset}/float/axes=const[1]"]["verdict"] == "ok"
        assert raw[f"form/Unsqueeze-13/opset{opset}/float/axes=const[0]"]["verdict"] == "ok"


@pytest.mark.parametrize("runtime,release", PUBLISHED)
def test_published_list_cross_checked(runtime, release):
    published = _table(runtime)["releases"][release]["published"]
    assert published["source"] and published["agree"] > 0
    for key, n in published["counts"].items():
        assert len(published[key]) == n
    readme = (RAW / "README.md").read_text()
    assert f"{runtime}-{release}" in readme or f"{runtime} {release}" in readme


# ------------------------------------------------------------------------------------------
# in the real runtimes (skipped when the venv is absent)


def _reduce_model(op: str, opset: int, axes_input: bool) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    if axes_input:
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
        inits = [numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")]
    else:
        node = helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)
        inits = []
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


X = np.random.default_rng(0).uniform(0.5, 2.0, size=(2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_converted_reduce_runs_and_matches_there(runtime, release):
    """ReduceSum at opset 18 (axes a constant input) converted down to 11 by the rewriter, and
    ReduceL1 at 11 converted up to 18: both run in the release and match numpy."""
    from rewriter import convert_opset

    for op, source, target, ref in (("ReduceSum", 18, 11, X.sum(axis=1)),
                                    ("ReduceL1", 11, 18, np.abs(X).sum(axis=1))):
        converted = convert_opset(_reduce_model(op, source, source >= (13 if op == "ReduceSum" else 18)), target)
        result = run_in(runtime, release, converted, {"x": X})
        assert result["ok"], result
        np.testing.assert_allclose(result["values"][0], ref, rtol=1e-5)


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_data_verdicts_hold_when_run_again(runtime, release):
    """A few verdicts of the shipped data, run again in the release: a wrong form is still wrong,
    a missing op still refused with a message, an op that ran still matches."""
    entry = _table(runtime)["releases"][release]
    wrong = entry["wrong"].get("", {})
    model = _reduce_model("ReduceL1", 13, False)
    result = run_in(runtime, release, model, {"x": X})
    expected = np.abs(X).sum(axis=1)
    computed_right = result["ok"] and result["values"][0].shape == expected.shape and np.allclose(
        result["values"][0], expected, rtol=1e-4)
    assert computed_right == (13 not in wrong.get("ReduceL1", [])), result
    if 22 in entry["missing"].get("", {}).get("Det", []):
        node = helper.make_node("Det", ["x"], ["y"])
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
        refused = run_in(runtime, release, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]),
                       {"x": np.eye(2, dtype=np.float32)})
        assert not refused["ok"] and refused["error"]
