"""The oracle of the lowering tests: a one-node ``ai.onnx.ml`` model run by ONNX Runtime's own
kernel, against its lowered form run by ONNX Runtime and by onnx.reference; the lowered model must
pass the full checker and hold only standard ONNX nodes."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnxruntime as ort
from onnx import TensorProto, helper

from rewriter.convert.lower_ops import lower_ops
from rewriter.graph import traversal
from tests.convert.support.exact_int8 import ort_model

ML = "ai.onnx.ml"


def value(name, elem, shape):
    if elem == "seq_map_int64":
        return helper.make_value_info(name, helper.make_sequence_type_proto(
            helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None))))
    if elem == "seq_map_string":
        return helper.make_value_info(name, helper.make_sequence_type_proto(
            helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, None))))
    return helper.make_tensor_value_info(name, elem, shape)


def one_node(op, inputs, outputs, *, opset=13, ml_opset=1, initializers=(), name="n", **attrs):
    """A model of one ``ai.onnx.ml`` node: inputs/outputs as (name, elem type, shape) triples."""
    held = {t.name for t in initializers}
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], domain=ML, name=name, **attrs)
    graph = helper.make_graph([node], "g", [value(*i) for i in inputs if i[0] not in held],
                              [value(*o) for o in outputs], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(ML, ml_opset)])
    model.ir_version = 8
    return model


def ort_run(model, feeds, threads=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(ort_model(model).SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ref_run(model, feeds):
    return [np.asarray(o) for o in onnx.reference.ReferenceEvaluator(model).run(None, feeds)]


def same_bits(expected, actual) -> bool:
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype != a.dtype:
        return False
    if e.dtype.kind != "f":
        return bool(np.array_equal(e, a))
    nan_e, nan_a = np.isnan(e), np.isnan(a)
    if not np.array_equal(nan_e, nan_a):
        return False
    view = np.uint32 if e.dtype == np.float32 else np.uint64
    return bool(np.array_equal(e[~nan_e].view(view), a[~nan_a].view(view)))


def assert_outputs(expected, actual, *, exact, rtol=1e-6, atol=1e-7, what=""):
    assert len(expected) == len(actual), what
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = np.asarray(e), np.asarray(a)
        assert e.shape == a.shape, (what, i, e.shape, a.shape)
        if e.dtype.kind in "OUS":
            assert e.tolist() == np.asarray(a, dtype=object).tolist(), (what, i)
            continue
        assert e.dtype == a.dtype, (what, i, e.dtype, a.dtype)
        if exact or e.dtype.kind != "f":
            assert same_bits(e, a), (what, i, e, a)
        else:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{what} output {i}")


def only_standard(model) -> bool:
    """Only default-domain nodes, besides calls of the model's own functions."""
    local = {(f.domain, f.name) for f in model.functions}
    return all(n.domain in ("", "ai.onnx") or (n.domain, n.op_type) in local
               for s in traversal.iter_scopes(model) for n in s.body.node)


def check_lowering(model, feeds, *, exact_ort=True, exact_ref=True, rtol=1e-6, atol=1e-7, ops=None, opset=None,
                   reference=True):
    """Lower ``model``; its outputs in ONNX Runtime (and onnx.reference) equal the original's in
    ONNX Runtime: bit for bit where ``exact_*``, else within rtol/atol. Returns the lowered model."""
    expected = ort_run(model, feeds)
    lowered, report = lower_ops(model, ops, opset=opset)
    onnx.checker.check_model(lowered, full_check=True)
    assert only_standard(lowered)
    assert_outputs(expected, ort_run(lowered, feeds), exact=exact_ort, rtol=rtol, atol=atol, what="onnxruntime")
    if reference:
        assert_outputs(expected, ref_run(lowered, feeds), exact=exact_ref, rtol=rtol, atol=atol, what="reference")
    return lowered
