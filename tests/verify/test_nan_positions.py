"""Numerical check: NaN in different places is a mismatch.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

The oracle: numpy on the very feeds the check uses (``random_inputs`` with the same seed),
and ONNX Runtime running each model, say where the NaNs are; the report must agree.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as h

from rewriter import verify_numerics as public_verify_numerics
from rewriter.verify.numerics import random_inputs, verify_numerics

F, D = TensorProto.FLOAT, TensorProto.DOUBLE


def _model(ops: list[str], elem: int = F, shape=(4, 5)) -> onnx.ModelProto:
    """y = ops[-1](...ops[0](x))."""
    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        nodes.append(h.make_node(op, [prev], [out]))
        prev = out
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", elem, list(shape))],
                         [h.make_tensor_value_info("y", elem, list(shape))])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _nan_masks_differ(a: onnx.ModelProto, b: onnx.ModelProto, seed: int) -> bool:
    feeds = random_inputs(a, seed)
    return not np.array_equal(np.isnan(_ort(a, feeds)[0]), np.isnan(_ort(b, feeds)[0]))


def test_sqrt_against_sqrt_of_abs_is_not_ok():
    sqrt, sqrt_abs = _model(["Sqrt"]), _model(["Abs", "Sqrt"])
    for seed in (0, 1, 2):
        feeds = random_inputs(sqrt, seed)
        assert (feeds["x"] < 0).any(), "the premise: random inputs include negatives"
        assert _nan_masks_differ(sqrt, sqrt_abs, seed)
        for fn in (verify_numerics, public_verify_numerics):
            for a, b in ((sqrt, sqrt_abs), (sqrt_abs, sqrt)):  # NaN on either side
                report = fn(a, b, seed=seed)
                assert not report.ok, report.summary_lines()
                assert len(report.outputs) == 1
                out = report.outputs[0]
                assert not out.ok
                assert "nan" in out.reason.lower(), out.reason
                assert report.to_dict()["ok"] is False


def test_nan_mismatch_is_reported_even_with_huge_tolerances():
    """The finite elements agree exactly; only the NaN masks differ: no tolerance hides it."""
    sqrt, sqrt_abs = _model(["Sqrt"], D), _model(["Abs", "Sqrt"], D)
    report = verify_numerics(sqrt, sqrt_abs, rtol=1e9, atol=1e9)
    assert not report.ok
    assert not report.outputs[0].ok


def test_nan_in_the_same_places_is_ok():
    """Control: the same model twice (NaN where x < 0 on both sides) is ok."""
    sqrt = _model(["Sqrt"])
    assert not _nan_masks_differ(sqrt, _model(["Sqrt"]), 0)
    feeds = random_inputs(sqrt, 0)
    assert np.isnan(_ort(sqrt, feeds)[0]).any()
    report = verify_numerics(sqrt, _model(["Sqrt"]))
    assert report.ok, report.summary_lines()


def test_abs_abs_sqrt_matches_sqrt_abs():
    """Control: Sqrt(Abs(Abs(x))) and Sqrt(Abs(x)) have no NaN and the same values."""
    report = verify_numerics(_model(["Abs", "Sqrt"]), _model(["Abs", "Abs", "Sqrt"]))
    assert report.ok, report.summary_lines()
