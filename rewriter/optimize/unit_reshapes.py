"""Turn ``Reshape -> Transpose -> Reshape`` that only add or drop dims of size 1 into one Transpose.

(Reshape here is any of Reshape, Squeeze, Unsqueeze, Flatten: ops that keep the elements in
row-major order and only change the shape.)

Dynamo exports of ``k.transpose(-2, -1)`` in attention flatten the batch and heads first:
``Reshape([1, 2, 8, 16] -> [2, 8, 16])``, ``Transpose(perm=[0, 2, 1])``,
``Reshape(-> [1, 2, 16, 8])``; torch's ``unflatten``/``select`` of packed projections give
``Unsqueeze -> Transpose -> Squeeze``. Adding or dropping a dim of size 1 leaves every element where
it is in row-major order, so when both Reshapes only do that (the dims other than 1 are the
same, in the same order, before and after each of them) the three nodes are one Transpose of
the original input: the dims other than 1 move as the Transpose moves them, and the input's
size-1 dims fill the places of the result's size-1 dims. A symbolic dim counts as a dim other
than 1 (if it is 1 at run time, moving it changes no element's place either) and is matched
by name; every dim must be an int or a named symbolic dim, the
first two results read only by the next node and none of the three a graph output; the last
Reshape's result name and readers are kept.
"""

from __future__ import annotations


import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import named_dims
from rewriter.graph.schemas import is_default_domain

__all__ = ["FoldUnitReshapesIntoTransposePass"]


def _big(dims: list[int]) -> list[int]:
    return [i for i, d in enumerate(dims) if d != 1]


def _only_unit_dims_change(before: list[int], after: list[int]) -> bool:
    return [before[i] for i in _big(before)] == [after[i] for i in _big(after)]


_RESHAPES = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})


def _single_reader(value: ir.Value, ops: frozenset, outputs) -> ir.Node | None:
    uses = value.uses()
    if value in outputs or len(uses) != 1:
        return None
    node = uses[0].node
    if node.op_type not in ops or not is_default_domain(node.domain) or uses[0].idx != 0:
        return None
    return node


def _perm(node: ir.Node, rank: int):
    attr = node.attributes.get("perm")
    if attr is None:
        return list(reversed(range(rank)))
    if attr.is_ref():
        return None
    return list(attr.as_ints())


def _as_list(dims):
    return None if dims is None else list(dims)


class FoldUnitReshapesIntoTransposePass(NodeRewritePass):
    """Replace unit-dim Reshape -> Transpose -> Reshape by one Transpose (see the module doc)."""

    OPS = _RESHAPES
    DONE = 'folded %d Reshape/Transpose/Reshape chain(s) into a Transpose'

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        self._try(scope.graph, node, scope.outputs)

    def _try(self, graph, first: ir.Node, outputs) -> None:
        if not first.inputs or first.inputs[0] is None:
            return
        x = first.inputs[0]
        transpose = _single_reader(first.outputs[0], frozenset({"Transpose"}), outputs)
        if transpose is None:
            return
        last = _single_reader(transpose.outputs[0], _RESHAPES, outputs)
        if last is None:
            return
        if last.outputs[0] in outputs or transpose.graph is not first.graph or last.graph is not first.graph:
            return  # a reader inside a subgraph stays where it is
        a, b, t, c = (_as_list(named_dims(v)) for v in (x, first.outputs[0], transpose.outputs[0], last.outputs[0]))
        if a is None or b is None or t is None or c is None or len(a) != len(c):
            return
        perm = _perm(transpose, len(b))
        if perm is None or sorted(perm) != list(range(len(b))):
            return
        if not (_only_unit_dims_change(a, b) and _only_unit_dims_change(t, c)):
            return
        # A's dims other than 1, in B's order; the Transpose reorders B; place into C
        a_big, b_big = _big(a), _big(b)
        b_to_a = dict(zip(b_big, a_big))
        moved = [b_to_a[p] for p in perm if p in b_to_a]
        units = [i for i, d in enumerate(a) if d == 1]
        new_perm, it_big, it_unit = [], iter(moved), iter(units)
        for d in c:
            new_perm.append(next(it_unit) if d == 1 else next(it_big))
        if [a[p] for p in new_perm] != c:
            return
        out = last.outputs[0]
        node = ir.node("Transpose", [x], attributes={"perm": new_perm}, name=last.name)
        node.metadata_props.update(last.metadata_props)
        graph.insert_before(last, node)
        new = node.outputs[0]
        new.dtype, new.shape = out.dtype, out.shape
        out.replace_all_uses_with(new)
        graph.remove([last, transpose, first], safe=True)
        new.name = out.name
        self.count += 1
