"""A Squeeze, an Unsqueeze, or a Transpose that moves only dims of size 1, read by nothing but a
Reshape: the Reshape reads the layout op's input instead, and the layout op goes
(``Reshape(Squeeze(x), [-1, 192])`` is ``Reshape(x, [-1, 192])``).

Exact: a Reshape's result depends only on its input's elements in row-major order and their
count, as long as its shape has no 0 (a 0 copies an input dim, unless ``allowzero=1``): -1 and
positive sizes read nothing else. Squeeze and Unsqueeze keep the elements in their order; so
does a Transpose whose permutation keeps the dims that are not statically 1 in their order
(the dims it moves past them are all 1). Conditions: the Reshape's shape is a constant; the
layout op's output is read by this Reshape alone and is not a graph output; both are in the
same graph.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import const_ints
from rewriter.graph.schemas import is_default_domain

__all__ = ["RemoveLayoutOpsBeforeReshapePass"]

_LAYOUT = frozenset({"Squeeze", "Unsqueeze", "Transpose"})


def _keeps_order(transpose: ir.Node) -> bool:
    """The Transpose moves only dims that are statically 1."""
    x = transpose.inputs[0] if transpose.inputs else None
    perm = transpose.attributes.get("perm")
    if x is None or x.shape is None:
        return False
    rank = len(x.shape)
    order = list(perm.as_ints()) if perm is not None and not perm.is_ref() else list(range(rank))[::-1]
    if perm is not None and perm.is_ref() or sorted(order) != list(range(rank)):
        return False
    kept = [axis for axis in order if x.shape.dims[axis] != 1]
    return kept == sorted(kept)


class RemoveLayoutOpsBeforeReshapePass(NodeRewritePass):
    """Drop a Squeeze/Unsqueeze/order-keeping Transpose that only a Reshape reads (see the module
    doc); ``self.count`` counts them."""

    OPS = frozenset({"Reshape"})
    DONE = "removed %d Squeeze/Unsqueeze/Transpose node(s) before a Reshape"

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        if len(node.inputs) != 2 or node.inputs[0] is None:
            return
        data = node.inputs[0]
        layout = data.producer()
        shape = const_ints(node.inputs[1])
        allowzero = node.attributes.get("allowzero")
        if (layout is None or layout.op_type not in _LAYOUT or not is_default_domain(layout.domain)
                or layout.graph is not node.graph or not layout.inputs or layout.inputs[0] is None
                or data in scope.outputs or len(data.uses()) != 1 or shape is None
                or (allowzero is not None and allowzero.is_ref())):
            return
        if 0 in shape and not (allowzero is not None and allowzero.as_int() == 1):
            return  # a 0 copies a dim of the Reshape's input, which the layout op set
        if layout.op_type == "Transpose" and not _keeps_order(layout):
            return
        node.replace_input_with(0, layout.inputs[0])
        scope.graph.remove(layout, safe=True)
        self.count += 1
