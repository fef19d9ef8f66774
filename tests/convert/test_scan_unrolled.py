"""Scan unrolled over its static iteration count (rewriter/convert/decompositions/scan.py) for a
runtime without it (TVM 0.27): the unrolled model in ONNX Runtime against ONNX Runtime's own Scan
(hypothesis over the axes, directions and state counts), the backend node tests with their own
outputs, the refusals, and the unrolled form run in TVM 0.27 (skipped without its venv)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import rewriter
from rewriter.convert.for_target import convert_for
from tests.oracle import backend_cases


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _scan(steps, in_axes, in_dirs, out_axes, out_dirs, states=1, symbolic=False):
    """s' = s + x0_i (+ x1_i); outputs: s' * x0_i per iteration, and (x0_i - s') when two."""
    f = TensorProto.FLOAT
    body_in = [helper.make_tensor_value_info(f"s{k}", f, [3]) for k in range(states)]
    body_in += [helper.make_tensor_value_info(f"x{j}", f, [3]) for j in range(len(in_axes))]
    nodes = [helper.make_node("Add", ["s0", "x0"], ["t0"])]
    if len(in_axes) > 1:
        nodes.append(helper.make_node("Add", ["t0", "x1"], ["t1"]))
    last = "t1" if len(in_axes) > 1 else "t0"
    nodes.append(helper.make_node("Identity", [last], ["n0"]))
    nodes += [helper.make_node("Mul", [f"s{k}", "x0"], [f"n{k}"]) for k in range(1, states)]
    nodes.append(helper.make_node("Mul", ["n0", "x0"], ["o0"]))
    if len(out_axes) > 1:
        nodes.append(helper.make_node("Sub", ["x0", "n0"], ["o1"]))
    body_out = [helper.make_tensor_value_info(f"n{k}", f, [3]) for k in range(states)]
    body_out += [helper.make_tensor_value_info(f"o{k}", f, [3]) for k in range(len(out_axes))]
    body = helper.make_graph(nodes, "body", body_in, body_out)
    rng = np.random.default_rng(steps)
    feeds = {f"init{k}": rng.standard_normal(3).astype(np.float32) for k in range(states)}
    for j, axis in enumerate(in_axes):
        shape = [3, 3]
        shape.insert(axis % 2, steps)
        del shape[2]
        feeds[f"in{j}"] = rng.standard_normal(shape).astype(np.float32)
    inputs = [helper.make_tensor_value_info(k, f, ["n" if symbolic and k[2].isdigit() and i == ax % 2 else d
                                                   for i, d in enumerate(v.shape)])
              for k, v, ax in zip(feeds, feeds.values(), [0] * states + list(in_axes))]
    node = helper.make_node("Scan", list(feeds), [f"final{k}" for k in range(states)] +
                            [f"out{k}" for k in range(len(out_axes))], name="the_scan", body=body,
                            num_scan_inputs=len(in_axes), scan_input_axes=list(in_axes),
                            scan_input_directions=list(in_dirs), scan_output_axes=list(out_axes),
                            scan_output_directions=list(out_dirs))
    outputs = [helper.make_tensor_value_info(o, f, None) for o in node.output]
    model = helper.make_model(helper.make_graph([node], "g", inputs, outputs), opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    shapes = {o.name: o for o in onnx.shape_inference.infer_shapes(model).graph.output}
    for o in model.graph.output:  # (the checker wants a shape on each output)
        o.type.CopyFrom(shapes[o.name].type)
    return model, feeds


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.lists(st.sampled_from([0, 1, -1, -2]), min_size=1, max_size=2),
       st.data(), st.integers(1, 2))
def test_unrolled_equals_onnxruntime_scan(steps, in_axes, data, states):
    in_dirs = data.draw(st.lists(st.integers(0, 1), min_size=len(in_axes), max_size=len(in_axes)))
    outs = data.draw(st.integers(1, 2))
    out_axes = data.draw(st.lists(st.sampled_from([0, 1, -1]), min_size=outs, max_size=outs))
    out_dirs = data.draw(st.lists(st.integers(0, 1), min_size=outs, max_size=outs))
    model, feeds = _scan(steps, in_axes, in_dirs, out_axes, out_dirs, states)
    want = _run(model, feeds)
    result, report = convert_for(model, runtime="tvm==0.27")
    assert "Scan" not in {n.op_type for n in result.graph.node} and report.decomposed["Scan"] == 1
    got = _run(result, feeds)
    for w, g in zip(want, got, strict=True):
        assert w.shape == g.shape and np.array_equal(w, g)  # the same ops on the same values: bit for bit


CASES = backend_cases("Scan")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case(case):
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs)}
    if case.name == "test_scan_sum":  # Scan-8: batch axis and sequence_lens
        with pytest.raises(rewriter.RewriterError, match="Scan-8's batch axis"):
            convert_for(case.model, runtime="tvm==0.27")
        return
    result, report = convert_for(case.model, runtime="tvm==0.27")
    assert report.decomposed["Scan"] == 1
    for e, g in zip(expected, _run(result, feeds), strict=True):
        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)


def test_a_symbolic_iteration_count_is_refused_naming_the_input_shape_to_give():
    model, _ = _scan(3, [0], [0], [0], [0], symbolic=True)
    with pytest.raises(rewriter.RewriterError, match=r"node 'the_scan' \(Scan\).*iteration count.*is not static.*"
                                                     r"--input-shape NAME:DIMS for 'in0' \[n, 3\]"):
        convert_for(model, runtime="tvm==0.27")


def test_kept_for_onnxruntime():
    model, _ = _scan(3, [0], [0], [0], [0])
    result, report = convert_for(model, runtime="onnxruntime==1.20")
    assert [n.op_type for n in result.graph.node] == ["Scan"] and not report.decomposed


def test_the_unrolled_form_runs_in_tvm():
    from tests.targets.runtime_runs import run_in

    model, feeds = _scan(4, [1, 0], [1, 0], [1, 0], [0, 1], states=2)
    result, _ = convert_for(model, runtime="tvm==0.27")
    got = run_in("tvm", "0.27", result, feeds)
    assert got["ok"], got
    for w, g in zip(_run(model, feeds), got["values"], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
