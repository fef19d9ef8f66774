"""Drop a Reshape and its inverse around element-wise work: ``Reshape(f(Reshape(x, B)), A)``
where ``x`` has the static shape A becomes ``f(x)``.

Dynamo exports of GPT-2's MLP flatten to 2-D for the Gemm, reshape to 3-D, apply the GELU's
element-wise ops, then flatten again for the next Gemm. A Reshape keeps the elements in their
row-major order, and an element-wise op on same-shaped operands (or with a one-element
constant, whose broadcasting has no position) computes each element from the elements at
the same place: the ops give the same elements in the same order on A as on B, so both
Reshapes go, exactly.

The region is every node reached from the first Reshape's result through element-wise ops
(:data:`_UNARY`, :data:`_BINARY` with both operands in the region or the other one a
one-element constant of rank at most that of A and B). It applies only when every value of
the region is read by region nodes or by Reshapes back to exactly A, and none is a graph
output. With static shapes, what each Reshape gives is computed from its constant target;
with symbolic dims (``[8*batch, 128]``), from the inferred shapes, dims matched by name (ONNX:
equal names are equal sizes). The region's values get A as their shape.
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import constant_array, named_dims
from rewriter.graph.schemas import is_default_domain

__all__ = ["RemoveElementwiseReshapesPass"]

_UNARY = frozenset("""Relu Tanh Sigmoid Erf Exp Log Neg Abs Sqrt Reciprocal Floor Ceil Round Sign
Softplus Softsign Elu Selu LeakyRelu HardSigmoid HardSwish Gelu Mish Identity Not IsNaN Sin Cos
Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh ThresholdedRelu Celu""".split())
_BINARY = frozenset("Add Sub Mul Div Pow Max Min".split())


def _gives(node: ir.Node, data_shape: tuple, expected: tuple) -> bool:
    """Whether the Reshape ``node`` turns ``data_shape`` into ``expected``: computed from its
    constant shape when every dim is static, else read from its (inferred) output shape."""
    if all(isinstance(d, int) for d in data_shape):
        return _reshape_target(node, data_shape) == expected
    return _reshape_target_known(node) and named_dims(node.outputs[0]) == expected


def _reshape_target_known(node: ir.Node) -> bool:
    return len(node.inputs) == 2 and constant_array(node.inputs[1], max_size=64) is not None


def _reshape_target(node: ir.Node, data_shape: tuple[int, ...]):
    """The static shape ``node`` (a Reshape with a constant shape) gives ``data_shape``, or None."""
    if len(node.inputs) != 2 or node.inputs[1] is None:
        return None
    shape = constant_array(node.inputs[1], max_size=64)
    if shape is None or shape.dtype not in (np.int64, np.int32):
        return None
    attr = node.attributes.get("allowzero")
    if attr is not None and attr.is_ref():
        return None
    allowzero = attr is not None and attr.as_int() == 1
    target = [int(v) for v in shape.reshape(-1)]
    dims = []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            if i >= len(data_shape):
                return None
            t = data_shape[i]
        dims.append(t)
    total = 1
    for d in data_shape:
        total *= d
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        return None
    if -1 in dims:
        rest = 1
        for d in dims:
            if d != -1:
                rest *= d
        if rest == 0 or total % rest:
            return None
        dims[dims.index(-1)] = total // rest
    return tuple(dims)


def _scalar_constant(value: ir.Value | None, rank: int) -> bool:
    array = constant_array(value, max_size=1)
    return array is not None and array.size == 1 and array.ndim <= rank


class RemoveElementwiseReshapesPass(NodeRewritePass):
    """Remove a Reshape pair around element-wise ops (see the module doc); ``self.count`` counts Reshapes."""

    OPS = frozenset({"Reshape"})
    DONE = 'removed %d Reshape(s) around element-wise ops'

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        self._try(scope.graph, node, scope.outputs)

    def _try(self, graph, first: ir.Node, outputs) -> None:
        x, start = first.inputs[0] if first.inputs else None, first.outputs[0]
        a = named_dims(x)
        b = named_dims(start)
        if a is None or b is None or a == b or not _gives(first, a, b) or start in outputs:
            return
        rank = min(len(a), len(b))
        region: list[ir.Node] = []
        inside = {start}
        ends: list[ir.Node] = []
        frontier = [start]
        while frontier:
            value = frontier.pop()
            for use in value.uses():
                node = use.node
                if node in region or node in ends:
                    continue
                if node.graph is not first.graph or not is_default_domain(node.domain):
                    return
                if node.op_type == "Reshape" and use.idx == 0:
                    if not _gives(node, b, a) or node.outputs[0] in outputs:
                        return
                    ends.append(node)
                    continue
                if len(node.outputs) != 1 or any(attr.is_ref() for attr in node.attributes.values()):
                    return
                if node.op_type in _UNARY and len(node.inputs) == 1:
                    pass
                elif node.op_type in _BINARY and len(node.inputs) == 2:
                    for other in node.inputs:
                        if other not in inside and not _scalar_constant(other, rank) and not self._reaches(other, start):
                            return
                else:
                    return
                out = node.outputs[0]
                if out in outputs or named_dims(out) not in (None, b):
                    return
                region.append(node)
                inside.add(out)
                frontier.append(out)
        # every binary operand must now be inside the region or a scalar constant
        for node in region:
            for v in node.inputs:
                if v not in inside and not _scalar_constant(v, rank):
                    return
        if not ends:
            return
        for node in region:
            for i, v in enumerate(node.inputs):
                if v is start:
                    node.replace_input_with(i, x)
        for node in region:
            node.outputs[0].shape = x.shape
        for end in ends:
            end.outputs[0].replace_all_uses_with(end.inputs[0] if end.inputs[0] is not start else x)
        graph.remove([*ends, first], safe=True)
        self.count += 1 + len(ends)

    @staticmethod
    def _reaches(value: ir.Value, start: ir.Value) -> bool:
        """Whether ``value`` is computed from ``start`` (it will join the region later)."""
        seen, todo = set(), [value]
        while todo:
            v = todo.pop()
            if v is start:
                return True
            if v in seen or v is None:
                continue
            seen.add(v)
            producer = v.producer()
            if producer is not None and producer.op_type in _UNARY | _BINARY:
                todo.extend(producer.inputs)
        return False
