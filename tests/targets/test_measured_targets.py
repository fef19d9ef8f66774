"""OpenVINO, tract, TVM and LiteRT (onnx2tf) as ``--target``s: the releases' measured data (what each refuses and
what it computes wrongly, tools/runtime_probe.py) read as one Target, and a conversion for it
never leaves a node in a form the data says the release refuses or computes wrongly.

Oracle: the data files themselves (``missing`` and ``wrong`` per op and schema version) and
onnx.defs for the schema version a node has at the result's opset."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.graph.schemas import schema_version_at_domain
from rewriter.targets import parse_target

DATA = os.path.join(os.path.dirname(rewriter.__file__), "targets", "data")
RELEASES = [(r, rel) for r in ("openvino", "tract", "tvm", "litert") if os.path.exists(os.path.join(DATA, f"{r}.json"))
            for rel in json.load(open(os.path.join(DATA, f"{r}.json")))["releases"]]


def _bad(runtime: str, release: str) -> dict:
    entry = json.load(open(os.path.join(DATA, f"{runtime}.json")))["releases"][release]
    bad: dict = {}
    constant = entry.get("needs_constant", {}).get("", {})  # refused only with inputs fed at run time
    for key in ("missing", "wrong"):
        for op, versions in entry.get(key, {}).get("", {}).items():
            bad.setdefault(op, set()).update(v for v in versions if key == "wrong" or v not in constant.get(op, ()))
    return bad


@pytest.mark.parametrize("runtime,release", RELEASES)
def test_the_release_is_a_typed_target_whose_lacks_is_its_data(runtime, release):
    target = parse_target(f"{runtime}=={release}")
    assert (target.runtime, target.release_of(runtime)) == (runtime, release)
    for op, versions in _bad(runtime, release).items():
        for v in versions:
            assert target.lacks("", op, v), (op, v)


def _reduce(op: str, opset: int) -> onnx.ModelProto:
    as_input = op == "ReduceSum"  # (its axes are an input from opset 13)
    node = helper.make_node(op, ["x", "axes"] if as_input else ["x"], ["y"], name="r", keepdims=1,
                            **({} if as_input else {"axes": [1]}))
    axes = [onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")] if as_input else []
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 4])], axes)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("runtime,release", RELEASES)
@pytest.mark.parametrize("op", ["ReduceL1", "ReduceLogSum", "ReduceLogSumExp", "ReduceSum", "ReduceMean"])
def test_a_converted_reduce_is_in_no_form_the_release_gets_wrong(runtime, release, op):
    """OpenVINO 2026.4.1 ignores ReduceL1/ReduceLogSum/ReduceLogSumExp's axes at opsets 13-17 (the
    issue's finding): a model at 17 for it must leave those schema versions; the result computes
    what the source does (ONNX Runtime both)."""
    model = _reduce(op, 17)
    try:
        result = rewriter.convert_opset(model, target=f"{runtime}=={release}")
    except rewriter.RewriterError as e:  # refusing is allowed only naming the node
        assert "'r'" in str(e)
        return
    opset = next(o.version for o in result.opset_import if o.domain in ("", "ai.onnx"))
    bad = _bad(runtime, release)
    for node in result.graph.node:
        assert schema_version_at_domain(node.op_type, opset, "") not in bad.get(node.op_type, ()), node.op_type
    x = np.random.default_rng(0).uniform(0.5, 2.0, size=(2, 3, 4)).astype(np.float32)
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]  # noqa: E731
    np.testing.assert_allclose(run(result), run(model), rtol=1e-5, atol=1e-6)


def test_openvino_2026_4_gets_reduce_l1_at_17_wrong_per_its_data():
    if ("openvino", "2026.4") not in RELEASES:
        pytest.skip("no OpenVINO data")
    assert 13 in _bad("openvino", "2026.4").get("ReduceL1", set())
    result = rewriter.convert_opset(_reduce("ReduceL1", 17), target="openvino==2026.4")
    opset = next(o.version for o in result.opset_import if o.domain in ("", "ai.onnx"))
    assert schema_version_at_domain("ReduceL1", opset, "") != 13
