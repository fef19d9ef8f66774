"""tools/runtime_probe.py's verdicts per op version, from the raw cases of a release:

- every case refused as fed, most (over half) running with constant inputs and none wrong then:
  ``needs_constant`` (not ``missing``), the cases refused either way listed as ``partial``
  (LiteRT 2.6's Slice-13: 7 of 8, negative steps refused either way);
- a training-mode Dropout with a ratio above 0 is judged by shape and dtype, as the random ops;
- the generated forms feed TopK a k of 1 (not 0) and give Concat's second operand an output shape
  that inference agrees with."""

from __future__ import annotations

import copy
import json

import numpy as np
import onnx

from rewriter.targets import parse_target
from tests.targets.runtime_runs import ROOT, tool

RAW = ROOT / "tools" / "runtime_data" / "litert-2.6.json"


def _raw_with(op: str, version: int, rows: list[tuple[str, str | None]]) -> dict:
    """The LiteRT raw file with ``op``-``version``'s cases replaced by rows (verdict as fed is
    "refused" for each; the second item is its ``const_inputs``)."""
    raw = json.loads(RAW.read_text())
    cases = {cid: r for cid, r in raw["cases"].items() if not (r.get("op") == op and r.get("version") == version)}
    for i, (verdict, const) in enumerate(rows):
        row = {"kind": "node", "op": op, "domain": "", "version": version, "opset": version, "verdict": verdict,
               "detail": f"refused {i}", "types": ["float"]}
        if const is not None:
            row["const_inputs"] = const
            if const != "ok":
                row["const_detail"] = f"still refused {i}"
        cases[f"test_x_{i}"] = row
    return {**copy.deepcopy(raw), "cases": cases}


def _verdicts(raw: dict, op: str, version: int) -> dict:
    summary = tool("runtime_probe").summarize(raw)
    return {key: version in (summary[key].get("", {}).get(op) or ()) for key in ("missing", "needs_constant", "partial")
            if key != "partial"} | {"partial": (summary["partial"].get("", {}).get(op) or {}).get(str(version))}


def test_most_running_with_constants_needs_constants_the_rest_partial():
    got = _verdicts(_raw_with("Slice", 13, [("refused", "ok")] * 7 + [("refused", "refused")]), "Slice", 13)
    assert got["needs_constant"] and got["missing"]  # (missing as fed: needs_constant takes it out of what it lacks)
    assert got["partial"] == "refused 1 of 8 with constant inputs too: still refused 7"


def test_half_or_fewer_with_constants_stays_missing():
    got = _verdicts(_raw_with("Slice", 13, [("refused", "ok")] * 2 + [("refused", "refused")] * 2), "Slice", 13)
    assert got["missing"] and not got["needs_constant"] and got["partial"] is None


def test_a_case_wrong_with_constants_keeps_it_missing():
    got = _verdicts(_raw_with("Slice", 13, [("refused", "ok")] * 7 + [("refused", "wrong")]), "Slice", 13)
    assert got["missing"] and not got["needs_constant"]


def test_a_case_that_ran_as_fed_is_not_this_rule():
    """Some cases running as fed: the version is implemented (partial), never needs_constant by this rule."""
    got = _verdicts(_raw_with("Slice", 13, [("ok", None)] + [("refused", "ok")] * 6 + [("refused", "refused")]),
                    "Slice", 13)
    assert not got["missing"] and not got["needs_constant"] and got["partial"].startswith("refused 7 of 8: ")


def test_every_case_running_with_constants_still_needs_constants():
    got = _verdicts(_raw_with("Slice", 13, [("refused", "ok")] * 8), "Slice", 13)
    assert got["needs_constant"] and got["missing"] and got["partial"] is None


def test_the_shipped_litert_data_runs_slice_13_with_constants():
    entry = json.loads((ROOT / "rewriter" / "targets" / "data" / "litert.json").read_text())["releases"]["2.6"]
    assert 13 in entry["needs_constant"][""]["Slice"] and not parse_target("litert==2.6").lacks("", "Slice", 13)
    assert entry["partial"][""]["Slice"]["13"].startswith("refused 1 of 8 with constant inputs too")


class _Case:
    def __init__(self, op: str, cid: str):
        self.op, self.id, self.kind = op, cid, "node"


def test_training_dropout_with_a_ratio_is_random_and_zero_ratio_is_not():
    probe = tool("runtime_probe")
    assert probe._random_dropout(_Case("Dropout", "test_training_dropout_mask"))
    assert not probe._random_dropout(_Case("Dropout", "test_training_dropout_zero_ratio_mask"))
    assert not probe._random_dropout(_Case("Dropout", "test_dropout_default"))
    assert not probe._random_dropout(_Case("Relu", "test_training_relu"))


def test_generated_topk_asks_for_one_element_and_concat_gets_two_operands():
    forms = tool("runtime_probe_forms")
    model, feeds, expected = forms._generated(onnx.defs.get_schema("TopK", 11, ""), "defaults", seed=11)
    k = [i.name for i in model.graph.input if i.type.tensor_type.elem_type == onnx.TensorProto.INT64]
    assert k == ["K"] and feeds["K"].tolist() == [1] and expected[0].shape[-1] == 1
    model, feeds, expected = forms._generated(onnx.defs.get_schema("Concat", 11, ""), "defaults", seed=11)
    assert len(model.graph.node[0].input) == 2 and len(feeds) == 2
    np.testing.assert_array_equal(expected[0], np.concatenate(list(feeds.values()), axis=0))
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == list(expected[0].shape)
