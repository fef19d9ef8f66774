"""MatMulNBits at accuracy_level 4 (ONNX Runtime quantizes the activations to int8) is refused by
name for the releases that get its weights folded to float (tract 0.23, OpenVINO 2024.6, LiteRT); at level 0
it converts and computes what ONNX Runtime computes; OpenVINO 2026.4 (blocked DequantizeLinear kept)
converts it at level 4."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from rewriter import RewriterError
from rewriter.convert.for_target import convert_for
from rewriter.convert.lowering.nbits_level import nbits_level_blockers
from rewriter.targets import parse_target

K, N, BLOCK = 32, 8, 32


def _model(level: int):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 256, size=(N, 1, BLOCK // 2), dtype=np.uint8)  # two 4-bit codes per byte
    scales = rng.uniform(0.01, 0.1, size=(N,)).astype(np.float32)
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", name="proj",
                            K=K, N=N, bits=4, block_size=BLOCK, accuracy_level=level)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", T.FLOAT, [2, K])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, N])],
                              [numpy_helper.from_array(codes, "b"), numpy_helper.from_array(scales, "s")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def test_level_4_is_refused_by_name_where_the_weights_are_folded():
    for target in ("tract==0.23", "openvino==2024.6", "litert==2.6"):  # (LiteRT: cast_and_scale folds the blocks too)
        with pytest.raises(RewriterError, match=r"node 'proj' \(MatMulNBits\).*accuracy_level 4"):
            convert_for(_model(4), runtime=target)
        assert len(nbits_level_blockers(_model(4), parse_target(target))) == 1


def test_level_0_converts_and_computes_what_onnx_runtime_does():
    model = _model(0)
    out, _ = convert_for(model, runtime="tract==0.23")
    assert "MatMulNBits" not in {n.op_type for n in out.graph.node}
    a = np.random.default_rng(1).normal(size=(2, K)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    got = ort.InferenceSession(out.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_release_that_keeps_the_blocks_is_not_refused():
    assert nbits_level_blockers(_model(4), parse_target("openvino==2026.4")) == []
    convert_for(_model(4), runtime="openvino==2026.4")
