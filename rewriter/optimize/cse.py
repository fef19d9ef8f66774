"""Common-subexpression elimination in every graph, subgraph and model-local function.

Two nodes of the same op (domain, type, overload), attributes and the very same input
values compute the same thing: the later one is dropped and its uses read the earlier
one's outputs. Not merged: nodes holding subgraphs, non-deterministic ops, custom-domain
ops (their determinism is unknown), Constant nodes with more than ``size_limit``
elements, and a node whose output is a graph output (its name is part of the interface).

onnx_ir has a pass of the same name (``onnx_ir.passes.common.CommonSubexpressionEliminationPass``);
this one exists because that one walks the main graph only, where this one also merges inside
If/Loop/Scan bodies and model-local functions, and keeps the rules above.
"""

from __future__ import annotations


import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.graph.nondeterministic import NON_DETERMINISTIC_OPS as _NON_DETERMINISTIC
from rewriter.graph.schemas import is_default_domain

__all__ = ["CommonSubexpressionEliminationPass"]



def _attr_key(attr: ir.Attr, size_limit: int):
    if attr.is_ref():
        return ("ref", attr.ref_attr_name)
    t = attr.type
    if t in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
        return None
    if t == ir.AttributeType.TENSOR:
        tensor = attr.value
        if tensor.size > size_limit:
            return None
        array = tensor.numpy()
        return (tuple(array.shape), str(tensor.dtype), array.tobytes())
    if t in (ir.AttributeType.TENSORS, ir.AttributeType.SPARSE_TENSOR, ir.AttributeType.SPARSE_TENSORS,
             ir.AttributeType.TYPE_PROTO, ir.AttributeType.TYPE_PROTOS):
        return None
    value = attr.value
    if isinstance(value, (list, tuple)):
        value = tuple(value)
    return (int(t), value)


def _key(node: ir.Node, size_limit: int):
    if not is_default_domain(node.domain) or node.op_type in _NON_DETERMINISTIC:
        return None
    attrs = []
    for name, attr in sorted(node.attributes.items()):
        k = _attr_key(attr, size_limit)
        if k is None:
            return None
        attrs.append((name, k))
    return (node.domain or "", node.op_type, node.overload, len(node.outputs),
            tuple(id(v) for v in node.inputs), tuple(attrs))


class CommonSubexpressionEliminationPass(NodeRewritePass):
    """Drop nodes that repeat an earlier node of the same scope (see the module doc);
    ``self.count`` counts them."""

    DONE = "merged %d repeated node(s)"

    def __init__(self, size_limit: int = 1024):
        super().__init__()
        self.size_limit = size_limit

    def visit_graph(self, scope: GraphScope) -> None:
        self.count += self._graph(scope.graph)

    def _graph(self, graph) -> int:
        seen: dict = {}
        outputs = set(graph.outputs)
        removed = 0
        for node in list(graph):
            key = _key(node, self.size_limit)
            if key is None:
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = node
                continue
            if any(o in outputs for o in node.outputs):
                continue
            for old, new in zip(node.outputs, first.outputs):
                old.replace_all_uses_with(new)
            graph.remove(node, safe=True)
            removed += 1
        return removed
