"""ONNX Runtime's contrib ops registered in the ONNX domain itself: LayerNormalization version 1 (below
opset 17, where ONNX has none) and SimplifiedLayerNormalization (ONNX never had it), which
onnxruntime.transformers.optimizer and onnxruntime-genai write with domain "". They are no standard
ONNX at the model's opset, so :func:`relabel` moves such nodes to ``com.microsoft`` in a copy (the
lowerings of :mod:`rewriter.convert.lowering.contrib_norm` then replace them); LayerNormalization
at opset >= 17 is standard and stays. ONNX Runtime itself knows them only in the ONNX domain, so a
model kept for it keeps them there, and :func:`relabel` is also what onnx's checker and strict shape
inference are shown of such a model (the nodes relabeled, every other node as it is)."""

from __future__ import annotations

import onnx

from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain

__all__ = ["ORT_ONNX_DOMAIN_OPS", "misplaced", "relabel"]

COM = "com.microsoft"
ORT_ONNX_DOMAIN_OPS = {"LayerNormalization": 17, "SimplifiedLayerNormalization": None}  # op -> first ONNX version


def misplaced(node: onnx.NodeProto, opset: int | None) -> bool:
    """Whether ``node`` is one of ONNX Runtime's ONNX-domain contrib ops where ONNX has no such op."""
    if not is_default_domain(node.domain) or node.op_type not in ORT_ONNX_DOMAIN_OPS:
        return False
    standard_from = ORT_ONNX_DOMAIN_OPS[node.op_type]
    return standard_from is None or opset is None or opset < standard_from


def relabel(model: onnx.ModelProto, ops=None) -> onnx.ModelProto:
    """``model`` itself when no node needs it, else a copy whose misplaced nodes are in
    ``com.microsoft`` (imported where they are). ``ops``: the (domain, op_type) pairs chosen (None:
    all); these nodes count as ``com.microsoft``'s."""
    if ops is not None:
        wanted = {o for d, o in ops if d == COM}
        if not wanted & set(ORT_ONNX_DOMAIN_OPS):
            return model
    if not any(misplaced(n, s.opset) for s in traversal.iter_scopes(model) for n in s.body.node):
        return model
    result = onnx.ModelProto()
    result.CopyFrom(model)
    holders = []
    for scope in traversal.iter_scopes(result):
        hit = False
        for node in scope.body.node:
            if misplaced(node, scope.opset):
                node.domain = COM
                hit = True
        if hit:
            holders.append(scope.root.body if scope.root.is_function else result)
    for holder in holders:
        if not any(o.domain == COM for o in holder.opset_import):
            holder.opset_import.append(onnx.helper.make_opsetid(COM, 1))
    return result

