"""Independent oracles for tests: run a model with ONNX Runtime or onnx.reference, validate it."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import onnx
import onnx.reference

# ReduceProd types ONNX Runtime's CPU kernels lack.
_ORT_MISSING = {onnx.TensorProto.BFLOAT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}


def _default_opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _elem_types(model: onnx.ModelProto) -> set[int]:
    graph = model.graph
    types = {vi.type.tensor_type.elem_type for vi in [*graph.input, *graph.output]}
    types |= {t.data_type for t in graph.initializer}
    return types


def uses_ort(model: onnx.ModelProto) -> bool:
    """ORT guarantees opset >= 7 and lacks some ReduceProd types; onnx.reference covers the rest."""
    return _default_opset(model) >= 7 and not (_elem_types(model) & _ORT_MISSING)


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of ``model`` on ``feeds`` from ONNX Runtime where it applies, else onnx.reference."""
    if uses_ort(model):
        import onnxruntime as ort

        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    return [np.asarray(o) for o in onnx.reference.ReferenceEvaluator(model).run(None, feeds)]


def assert_valid(model: onnx.ModelProto) -> None:
    """The checker with full_check and strict, type-checking shape inference both accept it."""
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def assert_same_outputs(expected: list[np.ndarray], actual: list[np.ndarray]) -> None:
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        e, a = np.asarray(e), np.asarray(a)
        assert e.shape == a.shape, (e.shape, a.shape)
        assert e.dtype == a.dtype, (e.dtype, a.dtype)
        if e.dtype == ml_dtypes.bfloat16 or a.dtype == ml_dtypes.bfloat16:
            e, a = e.astype(np.float32), a.astype(np.float32)
        if np.issubdtype(e.dtype, np.integer):
            np.testing.assert_array_equal(a, e)
        else:
            np.testing.assert_allclose(a, e, rtol=1e-6, equal_nan=True)


@functools.lru_cache(maxsize=None)
def _backend_cases() -> tuple:
    """Every official ONNX backend node test case. onnx builds them once per process, when
    its case modules are first imported, keeping only the op of that first call: so every
    test module collects through here, and this collects them all."""
    import warnings

    with warnings.catch_warnings():  # building every op's cases warns about a few of them
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        return tuple(collect_testcases(None))


def backend_cases(op_type: str) -> list:
    """The single-node backend test cases of ``op_type`` (not the function-expanded variants)."""
    return [c for c in _backend_cases()
            if c.kind == "node" and c.data_sets and not c.name.endswith("_expanded")
            and c.model.graph.node and c.model.graph.node[0].op_type == op_type]
