"""A MatMulNBits at ``accuracy_level`` 4 refused by name for a release whose blocked
DequantizeLinear is folded to float weights (``quantized_forms`` DequantizeLinear: ``fold_blocks``:
tract 0.23, OpenVINO 2024.6, TVM 0.27; ``cast_and_scale``: LiteRT). At level 4 ONNX Runtime quantizes the
activations to int8 per block (its MLAS int8 path, chosen by the CPU) before the product; the lowering multiplies in float, as
ONNX Runtime does at level 0. Measured: onnxruntime-genai's llama_tiny_int4 is 7.3e-3 (relative L2)
from ONNX Runtime in OpenVINO 2024.6 and in tract (its activations' own quantization error); at
level 0 the two agree within float32 rounding. OpenVINO 2026.4 keeps the blocked
DequantizeLinear-21 and matches."""

from __future__ import annotations

import onnx

from rewriter.graph import traversal
from rewriter.graph.attributes import attribute_int

__all__ = ["nbits_level_blockers"]

_COM = "com.microsoft"


def nbits_level_blockers(source: onnx.ModelProto, target) -> list[tuple]:
    """(node label, "MatMulNBits", None, reason, node name) of every MatMulNBits of ``source`` at
    accuracy_level 4 when ``target``'s quantized forms fold blocked DequantizeLinear to float."""
    from rewriter.convert.lowering.quant_dequant import FOLDS_BLOCKS
    from rewriter.convert.lowering.quant_explicit import quantized_forms

    entry = quantized_forms(target).get("forms", {}).get("DequantizeLinear", {})
    if entry.get("form") not in FOLDS_BLOCKS:
        return []
    found = []
    for scope in traversal.iter_scopes(source):
        for node in scope.body.node:
            if node.op_type == "MatMulNBits" and node.domain == _COM and attribute_int(node, "accuracy_level", 0) == 4:
                found.append((traversal.node_label(node, scope), node.op_type, None,
                              f"accuracy_level 4: ONNX Runtime quantizes the activations to int8 per block before the "
                              f"product, and {target.name} gets the weights folded to float (no blocked "
                              f"DequantizeLinear), which computes it as level 0 does (measured: llama_tiny_int4 "
                              f"7.3e-3 from ONNX Runtime); a model exported at accuracy_level 0 converts", node.name))
    return found
