"""onnx2tf into LiteRT as a ``--target`` (``litert``, ``litert==2.6``): the measured data
(rewriter/targets/data/litert.json, tools/runtime_probe.py through tools/runtime_run_litert.py) read
as one Target, conversions that follow it, and the runner itself in the litert venv (skipped when
tools/runtime_venvs.py has not made it).

Oracles: the data file (``missing`` / ``wrong`` per op and schema version), onnx.defs for the
schema version of a node at the result's opset, ONNX Runtime for what a model computes.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter import RewriterError
from rewriter.graph.schemas import schema_version_at_domain
from rewriter.targets import parse_target
from tests.targets.runtime_runs import ROOT, run_in

DATA = ROOT / "rewriter" / "targets" / "data" / "litert.json"


def _entry() -> dict:
    return json.loads(DATA.read_text())["releases"]["2.6"]


def _bad() -> dict:
    """op -> the schema versions it computes wrongly, or refuses even with its inputs constant."""
    entry, bad = _entry(), {}
    constant = entry.get("needs_constant", {}).get("", {})
    for key in ("missing", "wrong"):
        for op, versions in entry.get(key, {}).get("", {}).items():
            bad.setdefault(op, set()).update(v for v in versions if key == "wrong" or v not in constant.get(op, ()))
    return bad


def test_litert_alone_is_its_measured_release():
    bare, pinned = parse_target("litert"), parse_target("litert==2.6")
    assert (bare.runtime, bare.release_of("litert")) == ("litert", "2.6")
    assert bare == pinned
    assert _entry()["litert"].startswith("2.6.")  # the onnx2tf release the venv held
    with pytest.raises(rewriter.RewriterError, match="known: 2.6"):
        parse_target("litert==9.1")


def test_lacks_is_the_data():
    target = parse_target("litert")
    for op, versions in _bad().items():
        for v in versions:
            assert target.lacks("", op, v), (op, v)


def _one_node(op: str, opset: int, shape, attrs=None, inits=()) -> onnx.ModelProto:
    names = ["x"] + [i.name for i in inits]
    node = helper.make_node(op, names, ["y"], name="n", **(attrs or {}))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"d{i}" for i in range(len(shape))])],
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _result_ops(model: onnx.ModelProto) -> set:
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    return {(n.op_type, schema_version_at_domain(n.op_type, opset, "")) for n in model.graph.node}


@pytest.mark.parametrize("op,opset,attrs", [("Gelu", 20, {}), ("Mish", 18, {}), ("HardSwish", 14, {}),
                                            ("Softsign", 13, {}), ("ReduceL1", 18, {"keepdims": 1})])
def test_a_conversion_leaves_no_form_the_data_refuses(op, opset, attrs):
    """Every node of ``convert --target litert``'s result is in an (op, version) the data does not
    list as missing or wrong, and computes what the source does (ONNX Runtime); or the
    conversion refuses naming the node."""
    model = _one_node(op, opset, [2, 3, 4], attrs)
    try:
        result = rewriter.convert_opset(model, target="litert")
    except rewriter.RewriterError as e:
        assert "'n'" in str(e)
        return
    bad = _bad()
    for node_op, version in _result_ops(result):
        assert version not in bad.get(node_op, ()), (node_op, version)
    x = np.random.default_rng(0).uniform(-2, 2, size=(2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_reference(result, {"x": x}), _reference(model, {"x": x}), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------
# the runner, in the litert venv (skipped when absent)


def _run(model: onnx.ModelProto, feeds: dict) -> dict:
    return run_in("litert", "2.6", model, feeds, timeout=600)


def _reference(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("shape,op", [([1, 3, 6, 5], "Conv"), ([5, 5, 5, 5], "LRN"), ([2, 4, 5, 5], "MaxPool")])
def test_channel_last_outputs_come_back_in_the_onnx_layout(shape, op):
    """onnx2tf leaves Conv / LRN / pool outputs channel-last: the runner gives them in the ONNX
    layout, also where the shape cannot tell (C equal to H and W)."""
    rng = np.random.default_rng(1)
    c = shape[1]
    if op == "Conv":
        w = numpy_helper.from_array(rng.standard_normal((4, c, 3, 3)).astype(np.float32), "w")
        model = _one_node("Conv", 13, shape, {"pads": [1, 1, 1, 1]}, [w])
    elif op == "LRN":
        model = _one_node("LRN", 13, shape, {"size": 3})
    else:
        model = _one_node("MaxPool", 13, shape, {"kernel_shape": [2, 2]})  # [2, 4, 4, 4]
    x = rng.standard_normal(shape).astype(np.float32)
    result = _run(model, {"x": x})
    assert result["ok"], result
    expected = _reference(model, {"x": x})
    np.testing.assert_allclose(result["values"][0], expected, rtol=1e-4, atol=1e-5)


def test_a_model_litert_computes_wrongly_is_refused_naming_the_node():
    """Hardmax-13 (the axis semantics of opset 13) is computed wrongly by onnx2tf 2.6.9 + LiteRT, as
    the data says, and so is Hardmax-11 (the probe's one-node form: axis 1 of a rank-4 input, which
    opset 11 flattens to 2-D; on the last axis it is right, but the data is per op version): there is
    no version to convert to, and convert refuses naming the node."""
    assert 13 in _bad()["Hardmax"] and 11 in _bad()["Hardmax"]
    model = _one_node("Hardmax", 13, [2, 3, 4])
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    expected = _reference(model, {"x": x})
    as_is = _run(model, {"x": x})
    assert not (as_is["ok"] and np.array_equal(as_is["values"][0], expected))
    with pytest.raises(RewriterError, match=r"'n' \(Hardmax\)"):
        rewriter.convert_opset(model, target="litert")


def test_dynamic_input_dims_are_converted_at_the_fed_shape():
    """A model with a dynamic dim runs at the shape fed (converted from a copy with static dims)."""
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((4, 3, 3)).astype(np.float32), "w")
    model = _one_node("Conv", 13, ["batch", 3, "time"], {"pads": [1, 1]}, [w])
    x = np.random.default_rng(4).standard_normal((2, 3, 50)).astype(np.float32)
    result = _run(model, {"x": x})
    assert result["ok"], result
    np.testing.assert_allclose(result["values"][0], _reference(model, {"x": x}), rtol=1e-4, atol=1e-5)


def test_a_refusal_is_reported_with_onnx2tf_s_reason():
    """ArgMax with select_last_index=1: onnx2tf's flatbuffer_direct validation refuses it."""
    model = _one_node("ArgMax", 13, [2, 3], {"axis": 1, "select_last_index": 1})
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    result = _run(model, {"x": np.zeros((2, 3), np.float32)})
    assert not result["ok"] and result["stage"] == "load"
    assert "select_last_index" in result["error"]


def test_the_runner_leaves_the_model_file_as_it_was(tmp_path):
    """onnx2tf 2.6 saves its simplified model over the file it converts: a static model whose weight
    is also a graph input lost that input on disk when the runner gave onnx2tf the caller's file."""
    import subprocess

    from tests.targets.runtime_runs import tool

    python = tool("runtime_venvs").venv_python("litert", "2.6")
    if python is None:
        pytest.skip("no litert 2.6 venv (python tools/runtime_venvs.py litert==2.6)")
    w = numpy_helper.from_array(np.random.default_rng(5).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                               helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    path, feeds, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(model, path)
    before = path.read_bytes()
    x = np.random.default_rng(6).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(feeds, x=x)
    done = subprocess.run([str(python), str(ROOT / "tools" / "runtime_run_litert.py"), str(path), str(feeds), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert json.loads(done.stdout.strip().splitlines()[-1])["ok"], done.stdout[-500:]
    assert path.read_bytes() == before
    with np.load(out) as got:
        np.testing.assert_allclose(got["y"], _reference(model, {"x": x}), rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
