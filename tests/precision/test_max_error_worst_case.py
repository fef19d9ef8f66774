"""--max-error judges a candidate by its worst error: over every calibration sample and both
ONNX Runtime optimization levels it is checked at. A candidate within the limit on one and beyond
it on another is rejected (issue 39).

Oracle: ONNX Runtime run here at each level on each sample, the error measured against the float32
model's outputs there (relative L2).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import rewriter
from rewriter.precision import convert_precision_proto

LIMIT = 1e-2
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL")
RNG = np.random.default_rng(3)
NEAR_ONE = {"x": (RNG.random(16) + 0.5).astype(np.float32)}  # 0.5 .. 1.5
NEAR_200 = {"x": (RNG.random(16) * 50 + 200).astype(np.float32)}  # 200 .. 250


def _model(nodes, inits):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [16])],
                         [h.make_tensor_value_info("y", T.FLOAT, [16])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _error(source, result, feeds, level) -> float:
    def run(model):
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return session.run(None, feeds)[0].astype(np.float64)

    want, got = run(source), run(result)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _worst(source, result, samples) -> float:
    return max(_error(source, result, s, level) for s in samples for level in LEVELS)


def test_within_the_limit_at_one_optimization_level_and_beyond_it_at_the_other_is_rejected():
    """(x + 1000) through two Identities, - 1000. In half, x + 1000 rounds to float16's 0.5 steps
    where the Identities (which have float16 kernels) hold it: with graph optimizations off; with
    them on, ONNX Runtime drops the Identities and computes Add and Sub (no float16 kernels) in
    float32 without the rounding."""
    k = nh.from_array(np.array(1000.0, np.float32), "k")
    m = _model([h.make_node("Add", ["x", "k"], ["a"], name="up"), h.make_node("Identity", ["a"], ["b"], name="id1"),
                h.make_node("Identity", ["b"], ["c"], name="id2"), h.make_node("Sub", ["c", "k"], ["y"], name="down")],
               [k])
    plain, _ = convert_precision_proto(m, "float16")
    assert _error(m, plain, NEAR_ONE, "ORT_ENABLE_ALL") <= LIMIT < _error(m, plain, NEAR_ONE, "ORT_DISABLE_ALL")
    result = rewriter.convert_precision(m, "float16", max_error=LIMIT, calibration_data=[NEAR_ONE])
    onnx.checker.check_model(result, full_check=True)
    assert _worst(m, result, [NEAR_ONE]) <= LIMIT


def test_within_the_limit_on_one_sample_and_beyond_it_on_another_is_rejected():
    """(x + 1000.3) - 1000.2: float16 stores the constants as 1000.5 and 1000, y moves by 0.4: a
    small error for x near 200, a large one for x near 1 (at both levels)."""
    up = nh.from_array(np.array(1000.3, np.float32), "up_by")
    down = nh.from_array(np.array(1000.2, np.float32), "down_by")
    m = _model([h.make_node("Add", ["x", "up_by"], ["a"], name="up"),
                h.make_node("Sub", ["a", "down_by"], ["y"], name="down")], [up, down])
    plain, _ = convert_precision_proto(m, "float16")
    for level in LEVELS:
        assert _error(m, plain, NEAR_200, level) <= LIMIT < _error(m, plain, NEAR_ONE, level)
    for samples in ([NEAR_200, NEAR_ONE], [NEAR_ONE, NEAR_200]):
        result = rewriter.convert_precision(m, "float16", max_error=LIMIT, calibration_data=samples)
        onnx.checker.check_model(result, full_check=True)
        assert _worst(m, result, samples) <= LIMIT
