"""Shared helpers of the Einsum decomposition tests (test_einsum_*.py): a one-node Einsum
model, the independent results (numpy.einsum, ONNX Runtime on the original), the oracle's verdict."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from tests.convert.support.expressible import why_inexpressible

F = TensorProto.FLOAT
NP = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.FLOAT16: np.float16,
      TensorProto.INT32: np.int32, TensorProto.INT64: np.int64, TensorProto.INT8: np.int8,
      TensorProto.UINT8: np.uint8, TensorProto.INT16: np.int16, TensorProto.UINT32: np.uint32, TensorProto.UINT64: np.uint64}


def einsum_model(equation, shapes, elem=F, opset=12, out_rank=None, name="e"):
    """A model of one Einsum node over inputs x0, x1, ... of ``shapes`` (None: unknown rank;
    a str dim is a dim_param). The output is declared with its rank (from numpy when the shapes
    are static and the equation valid, else ``out_rank``) and unknown dims."""
    inputs = [helper.make_tensor_value_info(f"x{i}", elem, s) for i, s in enumerate(shapes)]
    if out_rank is None:
        out_rank = np.einsum(equation, *[np.zeros(s) for s in shapes]).ndim
    out = helper.make_tensor_value_info("y", elem, [None] * out_rank)
    node = helper.make_node("Einsum", [f"x{i}" for i in range(len(shapes))], ["y"], name=name, equation=equation)
    m = helper.make_model(helper.make_graph([node], "g", inputs, [out]), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset < 14 else 8
    return m


def random_feeds(shapes, elem=F, seed=0):
    rng = np.random.default_rng(seed)
    dtype = NP[elem]
    if np.issubdtype(dtype, np.integer):
        return {f"x{i}": rng.integers(0, 5, size=s).astype(dtype) for i, s in enumerate(shapes)}
    return {f"x{i}": rng.normal(size=s).astype(dtype) for i, s in enumerate(shapes)}


def ort_run(model, feeds):
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def close(expected, got, dtype):
    """Integer results exactly; float sums may be reordered: within the rounding of the sums."""
    expected, got = np.asarray(expected), np.asarray(got)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(got, expected)
        return
    tol = {np.float16: 2e-2, np.float32: 2e-5, np.float64: 1e-12}[dtype]
    scale = max(1.0, float(np.abs(expected.astype(np.float64)).max(initial=0.0)))
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol * scale)


def oracle(model, target):
    """The expressibility oracle's verdict on the model's Einsum node (None: expressible)."""
    graph = model.graph
    types = {vi.name: vi.type for vi in [*graph.input, *graph.output, *graph.value_info]}
    return why_inexpressible(graph.node[0], next(o.version for o in model.opset_import if o.domain == ""), target,
                             types.get, lambda name: None)
