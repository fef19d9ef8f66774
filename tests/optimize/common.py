"""Helpers for the optimize tests: parse a model, run one pass, optimize and compare with ORT."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

from rewriter.optimize import OptimizeOptions, optimize_proto
from tests import oracle


def parse(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def run_pass(model: onnx.ModelProto, pass_) -> tuple[ir.Model, bool]:
    m = ir.serde.deserialize_model(model)
    return m, pass_(m).modified


def ops(model) -> list[str]:
    """Op types of the main graph, in order (ModelProto or onnx_ir.Model)."""
    if isinstance(model, onnx.ModelProto):
        return [n.op_type for n in model.graph.node]
    return [n.op_type for n in model.graph]


def feeds_for(model: onnx.ModelProto, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 2 for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = (rng.random(dims) + 0.5).astype(dtype)
        elif dtype == np.bool_:
            feeds[vi.name] = np.asarray(rng.random(dims) > 0.5)
        else:
            feeds[vi.name] = rng.integers(-3, 4, dims).astype(dtype)
    return feeds


def optimize_and_compare(model: onnx.ModelProto, rtol: float = 1e-5, **options):
    """Optimize, check the result (full check, strict inference, ORT) and its outputs against
    the original's on random inputs; returns (result, report)."""
    result, report = optimize_proto(model, OptimizeOptions(**options))
    oracle.assert_valid(result)
    feeds = feeds_for(model)
    want, got = oracle.run(model, feeds), oracle.run(result, feeds)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.shape == g.shape and w.dtype == g.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)
    return result, report
