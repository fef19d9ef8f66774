"""Merge ``Unsqueeze(Unsqueeze(x, a1), a2)`` into one Unsqueeze (``arange[:, None, None, None]``
in dynamo exports is Unsqueeze [1, 2] then Unsqueeze [3]).

The second Unsqueeze puts new dims at the positions a2 of its result; the dims it keeps, in
order, are the first result's dims, so a dim the first one inserted at position p ends at the
p-th smallest position not in a2. The merged axes are a2 and those positions, exactly the
same result. Applies when both axes lists are constant (inputs from opset 13, attributes
before), non-negative (or the rank of x is known), the first result is read only by the
second Unsqueeze and is not a graph output.

``Unsqueeze(Squeeze(x, a), a)`` is ``x`` itself: the Squeeze removes dims of size 1 at the
positions a, and the Unsqueeze puts dims of size 1 back at the same positions of a result of
x's rank (axes compared after normalizing against that rank; a Squeeze without axes is left).
The Unsqueeze's readers read x; the Squeeze goes when nothing else reads it.
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import add_constant, constant_array
from rewriter.graph.schemas import is_default_domain

__all__ = ["MergeUnsqueezesPass"]


def _axes(node: ir.Node, opset: int):
    if opset >= 13:
        if len(node.inputs) != 2:
            return None
        array = constant_array(node.inputs[1], max_size=64)
        if array is None or array.dtype != np.int64 or array.ndim != 1:
            return None
        return [int(a) for a in array]
    attr = node.attributes.get("axes")
    if attr is None or attr.is_ref():
        return None
    return list(attr.as_ints())


def _normalized(axes: list[int], rank: int | None):
    if any(a < 0 for a in axes):
        if rank is None:
            return None
        axes = [a + rank for a in axes]
    if len(set(axes)) != len(axes) or any(a < 0 for a in axes):
        return None
    return sorted(axes)


class MergeUnsqueezesPass(NodeRewritePass):
    """Merge chained Unsqueezes (see the module doc); ``self.count`` counts them."""

    OPS = frozenset({"Unsqueeze"})
    DONE = 'merged %d Unsqueeze pair(s)'

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        self._try(scope.graph, node, scope.outputs, scope.opset)

    def _try(self, graph, second: ir.Node, outputs, opset: int) -> None:
        mid = second.inputs[0] if second.inputs else None
        first = mid.producer() if mid is not None else None
        if first is not None and first.op_type == "Squeeze" and is_default_domain(first.domain):
            self._undo_squeeze(graph, first, second, outputs, opset)
            return
        if first is None or first.op_type != "Unsqueeze" or not is_default_domain(first.domain):
            return
        if first.graph is not second.graph or mid in outputs or len(mid.uses()) != 1 or first.inputs[0] is None:
            return
        x = first.inputs[0]
        a1, a2 = _axes(first, opset), _axes(second, opset)
        if a1 is None or a2 is None:
            return
        rank = len(x.shape) if x.shape is not None else None
        a1 = _normalized(a1, None if rank is None else rank + len(a1))
        a2 = _normalized(a2, None if rank is None else rank + len(a1 or []) + len(a2))
        if not a1 or not a2:
            return
        taken, free, pos = set(a2), [], 0
        while len(free) <= max(a1):
            if pos not in taken:
                free.append(pos)
            pos += 1
        merged = sorted(a2 + [free[p] for p in a1])
        if opset >= 13:
            array = np.array(merged, dtype=np.int64)
            second.replace_input_with(1, add_constant(graph, second, array, f"{second.outputs[0].name}_axes"))
        else:
            second.attributes["axes"] = ir.AttrInt64s("axes", merged)
        second.replace_input_with(0, x)
        graph.remove(first, safe=True)
        self.count += 1

    def _undo_squeeze(self, graph, squeeze: ir.Node, unsqueeze: ir.Node, outputs, opset: int) -> None:
        x = squeeze.inputs[0] if squeeze.inputs else None
        out = unsqueeze.outputs[0]
        if x is None or squeeze.graph is not unsqueeze.graph or out in outputs or x.shape is None:
            return
        if out.dtype is not None and x.dtype is not None and out.dtype != x.dtype:
            return
        a1, a2 = _axes(squeeze, opset), _axes(unsqueeze, opset)
        rank = len(x.shape)
        if not a1 or not a2 or _normalized(a1, rank) is None or _normalized(a1, rank) != _normalized(a2, rank):
            return
        out.replace_all_uses_with(x)
        graph.remove(unsqueeze, safe=True)
        if not squeeze.outputs[0].uses() and squeeze.outputs[0] not in outputs:
            graph.remove(squeeze, safe=True)
        self.count += 1
