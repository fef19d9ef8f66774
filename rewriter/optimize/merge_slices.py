"""Merge two Slices on different axes into one: ``Slice(Slice(x, ..., axes=[2]), ..., axes=[3])``.

Exporters slice one axis per node (torch legacy export of ``x[:, :, ::2, ::2]``). A Slice on
axis a reads and changes only dim a, so two Slices on disjoint axes are one Slice with both
lists of starts/ends/axes/steps, exactly. Applies from opset 10 (starts/ends/axes/steps as
inputs) when every list is a constant int64/int32 vector, the axes of both are known (absent
axes mean 0..n-1; negative axes need the input's rank) and disjoint, and the first Slice's
result is read by the second one only and is not a graph output. The merged lists are int64.
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import add_constant, const_ints
from rewriter.graph.schemas import is_default_domain

__all__ = ["MergeSlicesPass"]


def _params(node: ir.Node, rank: int | None):
    """(starts, ends, axes, steps) with non-negative axes, or None."""
    inputs = list(node.inputs) + [None] * (5 - len(node.inputs))
    starts, ends = const_ints(inputs[1]), const_ints(inputs[2])
    if starts is None or ends is None or len(starts) != len(ends):
        return None
    axes = list(range(len(starts))) if inputs[3] is None else const_ints(inputs[3])
    steps = [1] * len(starts) if inputs[4] is None else const_ints(inputs[4])
    if axes is None or steps is None or len(axes) != len(starts) or len(steps) != len(starts):
        return None
    if any(a < 0 for a in axes):
        if rank is None:
            return None
        axes = [a + rank if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes):
        return None
    return starts, ends, axes, steps


class MergeSlicesPass(NodeRewritePass):
    """Merge chains of Slices on disjoint axes (see the module doc); ``self.count`` counts them."""

    OPS = frozenset({"Slice"})
    DONE = "merged %d Slice pair(s)"
    MIN_OPSET = 10  # Slice's parameters are inputs from 10

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        self._merge(scope.graph, node, scope.outputs)

    def _merge(self, graph, second: ir.Node, outputs) -> None:
        if second.op_type != "Slice" or not is_default_domain(second.domain) or not second.inputs:
            return
        mid = second.inputs[0]
        first = mid.producer() if mid is not None else None
        if first is None or first.op_type != "Slice" or not is_default_domain(first.domain):
            return
        if first.graph is not second.graph:
            return
        if mid in outputs or len(mid.uses()) != 1 or first.inputs[0] is None:
            return
        x = first.inputs[0]
        rank = len(x.shape) if x.shape is not None else None
        a, b = _params(first, rank), _params(second, rank)
        if a is None or b is None or set(a[2]) & set(b[2]):
            return
        lists = [np.array(p + q, dtype=np.int64) for p, q in zip(a, b)]
        names = ("starts", "ends", "axes", "steps")
        values = [add_constant(graph, first, arr, f"{second.outputs[0].name}_{n}") for arr, n in zip(lists, names)]
        if len(second.inputs) < 5:
            second.resize_inputs(5)
        for i, v in enumerate(values, start=1):
            second.replace_input_with(i, v)
        second.replace_input_with(0, x)
        graph.remove(first, safe=True)
        self.count += 1
