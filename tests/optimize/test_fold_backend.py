"""Every official ONNX backend node case with its inputs made constant: what the folder computes
is what ONNX Runtime computes for the original node, bit for bit (integers, data movement and
correctly rounded float ops through onnx.reference, the rest through ONNX Runtime's kernels).
Where ONNX Runtime cannot run the original, the case's expected outputs are the oracle."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper as nh

from rewriter.optimize import optimize_proto
from tests import oracle


def _constant_case(case):
    if len(case.model.graph.node) != 1:
        # Multi-node (function-expanded) cases are left out: ONNX Runtime's CPU runs some float16
        # ops in float32 and, between two such nodes, may skip the rounding to float16 that
        # ONNX's semantics (and the folder, node by node) apply, so its own answer changes with
        # which intermediates are graph outputs.
        return None
    inputs, outputs = case.data_sets[0]
    names = [i.name for i in case.model.graph.input]
    if len(inputs) != len(names) or not all(isinstance(a, np.ndarray) and a.dtype != object
                                            for a in (*inputs, *outputs)):
        return None
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    del model.graph.input[:]
    model.graph.initializer.extend(nh.from_array(a, n) for n, a in zip(names, inputs))
    model.ir_version = max(model.ir_version, 4)
    return model, dict(zip(names, inputs)), outputs


def _ort(model, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        return ort.InferenceSession(model.SerializeToString(), options).run(None, feeds)
    except Exception:  # noqa: BLE001 - ORT lacks the op, type or opset: the case's outputs decide
        return None


def test_folding_every_backend_node_case_computes_what_the_runtime_computes():
    folded = mismatches = 0
    problems = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in oracle._backend_cases() if c.kind == "node" and c.data_sets
                 and not c.name.endswith("_expanded")]
        for case in cases:
            built = _constant_case(case)
            if built is None:
                continue
            model, feeds, expected = built
            result, _ = optimize_proto(model)
            if result.graph.node:  # not folded (custom domain, random, size, overflow ...)
                continue
            folded += 1
            values = {t.name: nh.to_array(t) for t in result.graph.initializer}
            got = [values[o.name] for o in result.graph.output]
            # ReduceProd: the exact product (the project's kernel) differs from ORT's sequential
            # product by design; the case's expected outputs (NumPy) are the oracle there
            runtime = None if case.model.graph.node[0].op_type == "ReduceProd" else _ort(case.model, feeds)
            for g, w in zip(got, runtime if runtime is not None else expected):
                w = np.asarray(w)
                same = g.shape == w.shape and g.dtype == w.dtype and (
                    np.array_equal(g, w, equal_nan=g.dtype.kind == "f") if runtime is not None
                    else np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-4, atol=1e-6, equal_nan=True)
                    if g.dtype.kind in "fc" else np.array_equal(g, w))
                if not same:
                    mismatches += 1
                    problems.append(case.name)
                    break
    assert folded > 700, folded
    assert not problems, problems


def test_backend_node_cases_of_strings_fold_to_what_their_cases_expect():
    """The string cases (left out above: object arrays): with their inputs constant, the result
    is written and valid (a folded string constant used to fail onnx_ir's serializer), and what
    folds holds the case's own expected outputs. (The folder leaves the string ops themselves,
    StringConcat, RegexFullMatch, ..., to run time; Equal of strings folds.)"""
    checked = seen = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in oracle._backend_cases():
            if case.kind != "node" or not case.data_sets or case.name.endswith("_expanded"):
                continue
            inputs, outputs = case.data_sets[0]
            names = [i.name for i in case.model.graph.input]
            arrays = (*inputs, *outputs)
            if len(inputs) != len(names) or not all(isinstance(a, np.ndarray) for a in arrays) \
                    or not any(a.dtype == object for a in arrays):
                continue
            model = onnx.ModelProto()
            model.CopyFrom(case.model)
            del model.graph.input[:]
            model.graph.initializer.extend(nh.from_array(a, n) for n, a in zip(names, inputs))
            model.ir_version = max(model.ir_version, 4)
            result, _ = optimize_proto(model)
            onnx.checker.check_model(result)
            seen += 1
            if result.graph.node:
                continue
            values = {t.name: nh.to_array(t) for t in result.graph.initializer}
            for o, want in zip(result.graph.output, outputs):
                got = values[o.name]
                assert got.shape == want.shape and got.tolist() == want.tolist(), case.name
            checked += 1
    assert seen >= 20 and checked >= 2, (seen, checked)
