"""tools/runtime_probe_forms.control_flow_cases: Loop, Scan and If at every schema version on float
tensors only, so the versions whose node tests carry sequences are measured too; recurrent_cases:
RNN, GRU and LSTM at every version from 7 (TVM 0.27 has none of them). Each case is a
valid model of the version it names and ONNX Runtime gives its expected output; the releases that
lack Loop (tract 0.23, TVM 0.27, LiteRT) now list every version missing, and convert names the Loop
a lowering writes (the SVM probability models) instead of writing a model the runtime refuses."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.targets.runtime_runs import ROOT, run_in, tool

_PROBE = tool("runtime_probe")
CASES = _PROBE.gen.control_flow_cases(_PROBE.Case, None) + _PROBE.gen.recurrent_cases(_PROBE.Case, None)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_case_is_its_version_and_onnxruntime_gives_its_output(case):
    onnx.checker.check_model(case.model, full_check=True)
    assert onnx.defs.get_schema(case.op, case.opset, "").since_version == case.version
    got = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, case.feeds)
    for value, want in zip(got, case.expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)


def test_every_version_is_built():
    for op in ("Loop", "If", "GRU", "LSTM", "RNN"):
        versions = {s.since_version for s in onnx.defs.get_all_schemas_with_history()
                    if s.name == op and s.domain == "" and s.since_version <= onnx.defs.onnx_opset_version()}
        assert {c.version for c in CASES if c.op == op} == {v for v in versions if op in ("Loop", "If") or v >= 7}


@pytest.mark.parametrize("runtime,release", [("tract", "0.23"), ("tvm", "0.27"), ("litert", "2.6")])
def test_releases_without_loop_list_every_version(runtime, release):
    entry = json.loads((ROOT / "rewriter" / "targets" / "data" / f"{runtime}.json").read_text())["releases"][release]
    raw = json.loads((ROOT / "tools" / "runtime_data" / f"{runtime}-{release}.json").read_text())
    assert raw["cases"]["form/Loop-13/float/tensors_only"]["verdict"] in ("refused", "crash")
    assert {13, 16, 19, 21} <= set(entry["missing"][""]["Loop"])


def test_convert_unrolls_a_loop_for_tvm_and_names_one_it_cannot():
    """The probe's Loop has a constant trip count: unrolled for TVM, it gives the case's values; with
    the trip count fed at run time it is refused, naming the node and why."""
    from rewriter import RewriterError
    from rewriter.convert.for_target import convert_for
    from tests.oracle import run

    loop = next(c for c in CASES if c.id == "form/Loop-13/float/tensors_only")
    result, report = convert_for(loop.model, runtime="tvm==0.27")
    assert report.decomposed["Loop"] == 1 and "Loop" not in {n.op_type for n in result.graph.node}
    np.testing.assert_array_equal(run(result, loop.feeds)[0], loop.expected[0])
    fed = onnx.ModelProto()
    fed.CopyFrom(loop.model)
    trips = fed.graph.initializer[0]
    fed.graph.input.append(onnx.helper.make_tensor_value_info(trips.name, trips.data_type, list(trips.dims)))
    del fed.graph.initializer[:]
    with pytest.raises(RewriterError, match=r"unnamed Loop node #0 .*the trip count M \('trips'\) is not known before"):
        convert_for(fed, runtime="tvm==0.27")


def test_tvm_lists_every_recurrent_version_missing():
    entry = json.loads((ROOT / "rewriter" / "targets" / "data" / "tvm.json").read_text())["releases"]["0.27"]
    for op in ("RNN", "GRU", "LSTM"):
        assert {7, 14, 22} <= set(entry["missing"][""][op]), op


def test_if_runs_in_tvm():
    case = next(c for c in CASES if c.id == "form/If-13/float/tensors_only")
    got = run_in("tvm", "0.27", case.model, case.feeds)
    assert got["ok"] and np.array_equal(got["values"][0], case.expected[0])


def test_tract_wants_sequence_lens_constant_and_convert_unrolls_a_fed_one():
    from rewriter.convert.for_target import convert_for
    from tests.oracle import run

    entry = json.loads((ROOT / "rewriter" / "targets" / "data" / "tract.json").read_text())["releases"]["0.23"]
    for op in ("RNN", "GRU", "LSTM"):
        assert {7, 14, 22} <= set(entry["needs_constant"][""][op]), op
    fed = next(c for c in CASES if c.id == "form/GRU-14/float/forward_constant_weights/fed_sequence_lens")
    result, report = convert_for(fed.model, runtime="tract==0.23")  # unrolled (the decomposition's)
    assert "GRU" not in [n.op_type for n in result.graph.node] and report.decomposed["GRU"] == 1
    for want, got in zip(fed.expected, run(result, fed.feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    plain = next(c for c in CASES if c.id == "form/GRU-14/float/forward_constant_weights")
    result, _ = convert_for(plain.model, runtime="tract==0.23")
    assert [n.op_type for n in result.graph.node] == ["GRU"]
