"""An op version a release computes wrongly only when an input after the first is fed at run time
(TVM 0.27's Expand takes a fed shape literally, without broadcasting a 1 against the input's dim)
is ``needs_constant``, not ``wrong``: tools/runtime_probe.py reruns wrong cases with constant
inputs too, and convert then keeps the node when its later inputs are constants and names it when
they are fed."""

from __future__ import annotations

import copy
import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter import RewriterError
from rewriter.convert.for_target import convert_for
from tests.targets.runtime_runs import ROOT, run_in, tool

RAW = ROOT / "tools" / "runtime_data" / "tvm-0.27.json"
CHANGED = "test_expand_dim_changed"


def _summary(raw):
    return tool("runtime_probe").summarize(raw)


def _expand_in(table, key):
    return 13 in table[key].get("", {}).get("Expand", [])


def test_a_case_wrong_as_given_and_right_with_constants_needs_constants():
    raw = json.loads(RAW.read_text())
    assert raw["cases"][CHANGED]["verdict"] == "wrong" and raw["cases"][CHANGED]["const_inputs"] == "ok"
    summary = _summary(raw)
    assert _expand_in(summary, "needs_constant") and not _expand_in(summary, "wrong")


def test_wrong_with_constants_too_or_a_refusal_that_constants_do_not_lift_stays_wrong():
    raw = json.loads(RAW.read_text())
    still = copy.deepcopy(raw)
    still["cases"][CHANGED]["const_inputs"] = "wrong"
    summary = _summary(still)
    assert _expand_in(summary, "wrong") and not _expand_in(summary, "needs_constant")
    refused = copy.deepcopy(raw)
    refused["cases"]["test_expand_dim_unchanged"].update(verdict="refused", detail="refused", const_inputs="refused")
    summary = _summary(refused)
    assert _expand_in(summary, "wrong") and not _expand_in(summary, "needs_constant")


def _expand(fed: bool, name="grow"):
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [3, 1])]
    inits = []
    if fed:
        inputs.append(helper.make_tensor_value_info("s", T.INT64, [3]))
    else:
        inits.append(numpy_helper.from_array(np.array([2, 1, 6], np.int64), "s"))
    graph = helper.make_graph([helper.make_node("Expand", ["x", "s"], ["y"], name=name)], "g", inputs,
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3, 6])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_convert_for_tvm_keeps_a_constant_shape_and_names_a_fed_one():
    result, _ = convert_for(_expand(False), runtime="tvm==0.27")
    assert [n.op_type for n in result.graph.node] == ["Expand"]
    with pytest.raises(RewriterError, match=r"node 'grow' \(Expand\).*'s' is computed from a graph input"):
        convert_for(_expand(True), runtime="tvm==0.27")


@pytest.mark.parametrize("fed", [False, True])
def test_in_tvm(fed):
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    model = _expand(fed)
    feeds = {"x": x, "s": np.array([2, 1, 6], np.int64)} if fed else {"x": x}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = run_in("tvm", "0.27", model, feeds)
    assert got["ok"]
    assert np.array_equal(got["values"][0], want) != fed  # the fed shape is taken literally: [2, 1, 6]
