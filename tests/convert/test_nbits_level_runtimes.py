"""MatMulNBits at accuracy_level 4 converted for the measured releases runs there and gives what ONNX
Runtime's kernel gives (its int8 activations written out by the lowering): in tract 0.23, TVM 0.27,
LiteRT 2.6 and OpenVINO 2024.6 the blocked DequantizeLinear becomes float weights, which alone are
about 5e-3 (relative L2) from ONNX Runtime; OpenVINO 2026.4 keeps the blocks. Each test skips when
its release's venv is absent (tools/runtime_venvs.py)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter.convert.for_target import convert_for
from tests.targets.runtime_runs import run_in

K, N, BLOCK = 64, 24, 32


def _model(level: int):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 256, size=(N, K // BLOCK, BLOCK // 2), dtype=np.uint8)  # two 4-bit codes per byte
    scales = rng.uniform(0.01, 0.1, size=(N * K // BLOCK,)).astype(np.float32)
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", name="proj",
                            K=K, N=N, bits=4, block_size=BLOCK, accuracy_level=level)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", T.FLOAT, [1, 5, K])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 5, N])],
                              [numpy_helper.from_array(codes, "b"), numpy_helper.from_array(scales, "s")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def _rel(got, want) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


FEEDS = {"a": np.random.default_rng(1).normal(size=(1, 5, K)).astype(np.float32)}


@pytest.mark.parametrize("runtime,release", [("tract", "0.23"), ("tvm", "0.27"), ("litert", "2.6"),
                                             ("openvino", "2024.6"), ("openvino", "2026.4")])
def test_level_4_runs_in_the_release_as_onnx_runtime_computes_it(runtime, release):
    model = _model(4)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, FEEDS)[0]
    level0 = ort.InferenceSession(_model(0).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, FEEDS)[0]
    assert _rel(level0, want) > 1e-3  # (what float weights alone give)
    result, _ = convert_for(model, runtime=f"{runtime}=={release}")
    assert "MatMulNBits" not in {n.op_type for n in result.graph.node}
    ran = run_in(runtime, release, result, FEEDS)
    assert ran.get("ok"), ran
    assert _rel(np.asarray(ran["values"][0]).reshape(want.shape), want) < 1e-5
