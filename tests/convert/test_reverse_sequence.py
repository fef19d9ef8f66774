"""ReverseSequence as GatherElements (rewriter/convert/decompositions/reverse_sequence.py) for the
runtimes that lack it (tract 0.23, TVM 0.27: measured by the probe's generated case): against
ONNX Runtime's own ReverseSequence (hypothesis over lengths, ranks, axes and element types), the
backend node tests with their own outputs, and the result run in tract 0.23 and TVM 0.27 (each
skipped without its venv)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from rewriter.convert.for_target import convert_for
from tests.oracle import backend_cases

TYPES = {TensorProto.FLOAT: np.float32, TensorProto.BOOL: np.bool_, TensorProto.INT64: np.int64}


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _model(shape, time, elem, lens_fed=True, opset=15):
    x = helper.make_tensor_value_info("x", elem, shape)
    batch = 1 - time
    ins, inits = [x], []
    lens = helper.make_tensor_value_info("lens", TensorProto.INT64, [shape[batch]])
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rev", time_axis=time, batch_axis=batch)
    graph = helper.make_graph([node], "g", ins + [lens] if lens_fed else ins,
                              [helper.make_tensor_value_info("y", elem, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _feeds(shape, time, elem, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10
    x = (x > 0) if elem == TensorProto.BOOL else x.astype(TYPES[elem])
    lens = rng.integers(1, shape[time] + 1, size=shape[1 - time]).astype(np.int64)
    return {"x": x, "lens": lens}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=4), st.integers(0, 1), st.sampled_from(sorted(TYPES)),
       st.integers(0, 2**16), st.sampled_from([11, 15, 21]))
def test_gathered_equals_onnxruntime(shape, time, elem, seed, opset):
    model, feeds = _model(shape, time, elem, opset=opset), _feeds(shape, time, elem, seed)
    result, report = convert_for(model, runtime="tract==0.23")
    assert report.decomposed["ReverseSequence"] == 1
    assert "ReverseSequence" not in {n.op_type for n in result.graph.node}
    onnx.checker.check_model(result, full_check=True)
    want, got = _run(model, feeds), _run(result, feeds)
    assert want.dtype == got.dtype and np.array_equal(want, got)


def test_an_opset_10_model_is_refused_naming_gather_elements():
    import rewriter

    with pytest.raises(rewriter.RewriterError, match=r"'rev' \(ReverseSequence\).*GatherElements, exists only from opset 11"):
        convert_for(_model([3, 2], 0, TensorProto.FLOAT, opset=10), runtime="tract==0.23")


def test_dims_not_static():
    model = _model(["T", "B", 3], 0, TensorProto.FLOAT)
    result, _ = convert_for(model, runtime="tvm==0.27")
    for shape in ([5, 2, 3], [2, 4, 3]):
        feeds = _feeds(shape, 0, TensorProto.FLOAT, 1)
        assert np.array_equal(_run(model, feeds), _run(result, feeds))


def test_kept_where_the_runtime_has_it():
    model = _model([3, 2], 0, TensorProto.FLOAT)
    for runtime in ("onnxruntime==1.20", "openvino==2026.4"):
        result, report = convert_for(model, runtime=runtime)
        assert [n.op_type for n in result.graph.node] == ["ReverseSequence"] and not report.decomposed


@pytest.mark.parametrize("case", backend_cases("ReverseSequence"), ids=lambda c: c.name)
def test_backend_case(case):
    inputs, expected = case.data_sets[0]
    if "bfloat16" in case.name:
        pytest.skip("ONNX Runtime's CPU has no bfloat16 GatherElements to run the result")
    feeds = {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs)}
    result, report = convert_for(case.model, runtime="tract==0.23")
    assert report.decomposed["ReverseSequence"] == 1
    np.testing.assert_array_equal(_run(result, feeds), expected[0])


@pytest.mark.parametrize("runtime,release", [("tract", "0.23"), ("tvm", "0.27")])
@pytest.mark.parametrize("time", [0, 1])
def test_the_result_runs_in_the_runtime(runtime, release, time):
    from tests.targets.runtime_runs import run_in

    shape = [5, 3, 4]
    model, feeds = _model(shape, time, TensorProto.FLOAT), _feeds(shape, time, TensorProto.FLOAT, 7)
    result, _ = convert_for(model, runtime=f"{runtime}=={release}")
    got = run_in(runtime, release, result, feeds)
    assert got["ok"], got
    assert np.array_equal(got["values"][0], _run(model, feeds))
