"""Shared helpers for the feature/meaning-change adapter tests (test_softmax, test_shape, ...)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.convert import convert_model
from tests.oracle import assert_same_outputs, assert_valid, backend_cases, run

LATEST = onnx.defs.onnx_opset_version()
BACKEND_TARGETS = (7, 11, 13, 17, 18, LATEST)


def model(nodes, opset, inputs, outputs, initializers=(), functions=(), infer=True, ir_version=None):
    """A model of ``nodes``; ``inputs``/``outputs`` are (name, elem_type, shape) triples."""
    graph = helper.make_graph(
        list(nodes), "g", [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    if functions:
        opsets.append(helper.make_opsetid("local", 1))
    m = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    m.ir_version = ir_version or (8 if opset >= 7 else 3)
    if functions:
        m.ir_version = max(m.ir_version, 8)
    return onnx.shape_inference.infer_shapes(m) if infer else m


def reference(m, feeds):
    """Outputs from onnx.reference (for what ONNX Runtime refuses to load)."""
    return [np.asarray(o) for o in onnx.reference.ReferenceEvaluator(m).run(None, feeds)]


def converts(m, target, feeds, expected=None, runner=run, rtol=None):
    """Convert ``m`` to ``target``; the result is valid, its node names unique, and it computes
    what ``m`` computes (or ``expected``). Returns (result, report)."""
    result, report = convert_model(m, target)
    assert_valid(result)
    names = [n.name for n in result.graph.node if n.name]
    names += [n.name for f in result.functions for n in f.node if n.name]
    assert len(names) == len(set(names)), names
    if expected is None:
        expected = runner(m, feeds)
    if rtol is None:
        assert_same_outputs(expected, runner(result, feeds))
    else:  # another kernel version of the runtime may sum in another order
        for e, g in zip(expected, runner(result, feeds)):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol * 1e-2)
    return result, report


def refused(m, target, *fragments):
    """The conversion is refused, naming every fragment (node, feature, ...)."""
    with pytest.raises(rewriter.RewriterError) as info:
        convert_model(m, target)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    return str(info.value)


def run_backend_case(case, targets=BACKEND_TARGETS):
    """Convert an official backend case to every target; a conversion that succeeds must
    reproduce the case's own expected outputs. Returns the number of targets converted."""
    m = case.model
    source = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    inputs, expected = case.data_sets[0]
    feeds = {i.name: _array(v) for i, v in zip(m.graph.input, inputs) if v is not None}  # None: an absent optional
    done = 0
    for target in targets:
        if target == source:
            continue
        try:
            converted, _ = convert_model(m, target)
        except rewriter.RewriterError:
            continue
        done += 1
        try:
            got = run(converted, feeds)
        except Exception:  # ORT lacks a kernel (type, op version): the reference has them all
            got = [np.asarray(o) for o in onnx.reference.ReferenceEvaluator(converted).run(None, feeds)]
        for e, g in zip(expected, got):
            e, g = _array(e), np.asarray(g)
            if e.dtype == object:
                continue
            assert e.shape == g.shape, (case.name, target, e.shape, g.shape)
            if e.dtype.kind not in "fciub?":  # ml_dtypes (bfloat16, float8, ...): compare as float32
                e, g = e.astype(np.float32), g.astype(np.float32)
                np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=f"{case.name} to {target}")
                e, g = np.nan_to_num(e), np.nan_to_num(g)
            if e.dtype.kind in "fc":
                # the case's own tolerance, as onnx's backend runner uses it (float16: runtimes round differently)
                rtol = max(getattr(case, "rtol", 1e-3), 1e-4 if e.dtype.itemsize >= 4 else 2e-3)
                atol = max(getattr(case, "atol", 1e-7), 1e-5 if e.dtype.itemsize >= 4 else 2e-4)
                np.testing.assert_allclose(g.astype(e.dtype), e, rtol=rtol, atol=atol, equal_nan=True,
                                           err_msg=f"{case.name} to {target}")
            else:
                np.testing.assert_array_equal(g, e, err_msg=f"{case.name} to {target}")
    return done


def _array(v):
    return onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def cases(*ops):
    return [c for op in ops for c in backend_cases(op) if "_expanded" not in c.name]


__all__ = ["model", "converts", "reference", "refused", "run_backend_case", "cases", "LATEST", "TensorProto", "helper",
           "np", "assert_valid", "assert_same_outputs", "run", "convert_model"]
