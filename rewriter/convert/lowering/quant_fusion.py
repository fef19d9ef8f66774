"""QDQ groups fused as ONNX Runtime fuses them, for a runtime whose float arithmetic between
DequantizeLinear and QuantizeLinear gives other codes (form ``onnx_runtime_fusion`` of the key
``QDQ`` in a release's ``quantized_forms``: OpenVINO).

ONNX Runtime's default run of a QDQ model is not the graph as written: its graph optimizer (the QDQ
selectors and actions) replaces each DequantizeLinear -> Conv / MatMul / Add / Mul / Sigmoid /
Concat / ... -> QuantizeLinear group by an integer kernel (QLinearConv, QLinearMatMul, com.microsoft
QLinearAdd, ...), and drops the QDQ pairs around data movement (Reshape, Transpose, MaxPool, ...).
Its float sums (Conv, MatMul) in a runtime's own order give other codes than both of ONNX Runtime's
results (quant_table.REDUCTIONS). This form asks ONNX Runtime's own optimizer for that graph
(``ORT_ENABLE_EXTENDED``, saved with ``optimized_model_filepath``; layouts are level 3, not saved)
and lowers the com.microsoft ops it wrote with the project's exact lowerings; the standard QLinearConv
/ QLinearMatMul / QuantizeLinear left are the other ``quantized_forms``' business. What ONNX Runtime
does not fuse stays, and its QuantizeLinear after a float sum is refused as before.

Only a model with such a group (a QuantizeLinear of a Conv / ConvTranspose / MatMul / Gemm of a
DequantizeLinear output, main graph) is handed to ONNX Runtime (its external data read in); one ONNX
Runtime refuses or whose fused graph the lowerings cannot lower (shapes unknown to them) is left as it
was, and the refusals say why.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.convert.lowering.quant_table import REDUCTIONS

__all__ = ["FORM", "fuse_like_onnx_runtime", "has_qdq_reduction"]
FORM = "onnx_runtime_fusion"
_STANDARD = ("", "ai.onnx")


def has_qdq_reduction(model: onnx.ModelProto) -> bool:
    """Whether a QuantizeLinear of the main graph quantizes a Conv / ConvTranspose / MatMul / Gemm
    computed from a DequantizeLinear output."""
    producers = {o: n for n in model.graph.node for o in n.output}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.domain not in _STANDARD:
            continue
        op = producers.get(node.input[0])
        if op is None or op.op_type not in REDUCTIONS or op.domain not in _STANDARD:
            continue
        if any(producers.get(i) is not None and producers[i].op_type == "DequantizeLinear" for i in op.input):
            return True
    return False


def _onnx_runtime_graph(model: onnx.ModelProto) -> onnx.ModelProto | None:
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fused.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = path
        options.log_severity_level = 3
        try:
            ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            return onnx.load(path)
        except Exception:  # noqa: BLE001 (ONNX Runtime refuses the model: nothing is fused)
            return None


def fuse_like_onnx_runtime(model: onnx.ModelProto, base_dir: str | None = None) -> tuple[int, str]:
    """``model`` (in place; external data relative to ``base_dir``, which the command line's loader
    leaves in a large model's file) as ONNX Runtime's optimizer fuses its QDQ groups, the com.microsoft
    ops it wrote lowered; returns the number of quantized integer nodes it wrote (0: unchanged) and,
    when the lowerings refused the fused graph, why (a sentence to add to the refusals), else ""."""
    if not has_qdq_reduction(model):
        return 0, ""
    from rewriter.io.tensors import all_tensors

    whole = model
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t, _ in all_tensors(model)):
        from rewriter.io.load import tensor_reader

        read, whole = tensor_reader(base_dir), onnx.ModelProto()
        whole.CopyFrom(model)
        for t, _ in all_tensors(whole):  # ONNX Runtime is handed the bytes: the values inline
            if t.data_location == onnx.TensorProto.EXTERNAL:
                t.CopyFrom(numpy_helper.from_array(np.asarray(read(t)), t.name))
    fused = _onnx_runtime_graph(whole)
    if fused is None:
        return 0, ""
    from rewriter.convert.lower_ops import lower_ops
    from rewriter.errors import RewriterError

    contrib = {(n.domain, n.op_type) for n in fused.graph.node if n.domain == "com.microsoft"}
    count = sum(n.op_type.startswith("QLinear") or n.op_type == "QGemm" for n in fused.graph.node)
    if not count:
        return 0, ""
    try:
        lowered = lower_ops(fused, contrib)[0] if contrib else fused
    except RewriterError as e:
        return 0, f"; ONNX Runtime fuses the group, but its fused graph cannot be lowered here: {str(e)[:300]}"
    model.CopyFrom(lowered)
    return count, ""
