"""A double tensor the graph computes (the SVM lowerings sum their votes' products in double): LiteRT
refuses CumSum on it (onnx2tf turns a double graph input into float, not a double made inside), as
tools/runtime_probe.py measures with runtime_probe_forms.double_inside_cases; convert --target
litert names such a CumSum, and keeps one on a double graph input and the other releases' ones."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter import RewriterError
from rewriter.convert.for_target import convert_for
from tests.targets.runtime_runs import ROOT, tool

_PROBE = tool("runtime_probe")
CASES = _PROBE.gen.double_inside_cases(_PROBE.Case, None)


def _verdicts(runtime, release):
    entry = json.loads((ROOT / "rewriter" / "targets" / "data" / f"{runtime}.json").read_text())["releases"][release]
    return {v: forms["double_inside"] for v, forms in entry["form_verdicts"][""]["CumSum"].items()}


def test_the_data_says_litert_refuses_it_and_the_others_run_it():
    assert all(v.startswith("refused") for v in _verdicts("litert", "2.6").values())
    for runtime, release in (("openvino", "2026.4"), ("openvino", "2024.6"), ("tract", "0.23"), ("tvm", "0.27")):
        assert set(_verdicts(runtime, release).values()) == {"ok"}, runtime


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_convert_names_the_cumsum_for_litert_only(case):
    with pytest.raises(RewriterError, match=r"node 'n' \(CumSum\).*refuses CumSum-\d+ on a double tensor the graph "
                                            r"computes \('xd'"):
        convert_for(case.model, runtime="litert==2.6")
    result, _ = convert_for(case.model, runtime="openvino==2026.4")
    assert "CumSum" in {n.op_type for n in result.graph.node}


def test_a_cumsum_on_a_double_graph_input_is_not_named():
    graph = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["y"], name="n")], "g",
                              [helper.make_tensor_value_info("x", T.DOUBLE, [2, 5])],
                              [helper.make_tensor_value_info("y", T.DOUBLE, [2, 5])],
                              [numpy_helper.from_array(np.array(1, np.int64), "axis")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    result, _ = convert_for(model, runtime="litert==2.6")
    assert [n.op_type for n in result.graph.node] == ["CumSum"]
