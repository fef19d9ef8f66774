"""MatMul + Add on a rank >= 3 input, read only by Reshape nodes -> one shared Reshape + Gemm.

Linear layers on ``[batch, seq, K]`` activations export as ``MatMul(x, W)`` + ``Add(b)``
followed by a Reshape (head split). Gemm takes rank 2: ``Reshape(x, [-1, K])`` then
``Gemm(x2, W, b)`` computes the same rows, and the Reshape that followed reads the Gemm's
output directly (a Reshape depends only on the element order, which is the same). The
leading Reshape is shared by every projection of the same ``x`` (Q, K and V), so three
MatMul+Add+Reshape become one Reshape and three Gemm+Reshape.

Applies when: W is a rank-2 constant ``[K, N]``, the bias a constant of shape ``[N]`` (or
leading 1s then N), float types Gemm takes, x's last dim static, the MatMul read only by the
Add, the Add read only as the data input of Reshape nodes whose shape is a constant without
0 entries (0 would copy a dim of the rank-2 input), and no result is a graph output.
Gemm accumulates like MatMul (same runtime kernel family); its result may differ from
MatMul then Add by the rounding of the final addition (~1 ulp).
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import add_constant
from rewriter.graph.schemas import is_default_domain

__all__ = ["BatchedMatMulAddToGemmPass"]

_GEMM_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16})


def _const(value: ir.Value | None):
    if value is None or value.is_graph_input() or value.const_value is None:
        return None
    return value.const_value


def _single_use(value: ir.Value):
    uses = value.uses()
    return uses[0] if len(uses) == 1 else None


def _constant(graph, anchor: ir.Node, array: np.ndarray, hint: str) -> ir.Value:
    return add_constant(graph, anchor, array, f"{anchor.outputs[0].name}_{hint}")


class BatchedMatMulAddToGemmPass(NodeRewritePass):
    """Rewrite rank >= 3 MatMul + Add read by Reshapes into shared Reshape + Gemm (see the module doc)."""

    DONE = "rewrote %d MatMul+Add into Gemm"

    def visit_graph(self, scope: GraphScope) -> None:
        self._graph(scope.graph)

    def _graph(self, graph) -> None:
        outputs = frozenset(graph.outputs)
        flattened: dict = {}  # (x, K) -> the Reshape output shared by every projection of x
        for matmul in list(graph):
            found = self._match(matmul, outputs)
            if found is None:
                continue
            x, w, add, bias, readers, k = found
            key = (x, k)
            flat = flattened.get(key)
            if flat is None:
                shape = _constant(graph, matmul, np.array([-1, k], dtype=np.int64), "flat_shape")
                reshape = ir.node("Reshape", [x, shape], name=f"{matmul.name}_flatten" if matmul.name else "")
                graph.insert_before(matmul, reshape)
                flat = reshape.outputs[0]
                flat.dtype, flat.shape = x.dtype, None
                flattened[key] = flat
            b = bias
            if len(bias.shape) != 1:
                b = _constant(graph, matmul, bias.const_value.numpy().reshape(-1), "bias")
            gemm = ir.node("Gemm", [flat, w, b], name=matmul.name)
            gemm.metadata_props.update(matmul.metadata_props)
            graph.insert_before(matmul, gemm)
            gemm.outputs[0].dtype = add.outputs[0].dtype
            for reader in readers:
                reader.replace_input_with(0, gemm.outputs[0])
            graph.remove([add, matmul], safe=True)
            self.count += 1

    def _match(self, matmul: ir.Node, outputs):
        if matmul.op_type != "MatMul" or not is_default_domain(matmul.domain) or len(matmul.inputs) != 2:
            return None
        x, w = matmul.inputs
        wt = _const(w)
        if x is None or wt is None or len(wt.shape) != 2 or x.shape is None or len(x.shape) < 3:
            return None
        if x.dtype not in _GEMM_TYPES or wt.dtype != x.dtype:
            return None
        k = x.shape[-1]
        if not isinstance(k, int) or k != wt.shape[0]:
            return None
        n = wt.shape[1]
        mm_out = matmul.outputs[0]
        add = _single_use(mm_out)
        if mm_out in outputs or add is None or add.node.op_type != "Add" or not is_default_domain(add.node.domain):
            return None
        add = add.node
        bias = add.inputs[1 - add.inputs.index(mm_out)] if add.inputs.count(mm_out) == 1 else None
        bt = _const(bias)
        if bt is None or bt.dtype != x.dtype or not bt.shape or bt.shape[-1] != n or any(d != 1 for d in bt.shape[:-1]):
            return None
        if len(bt.shape) > len(x.shape):
            return None
        result = add.outputs[0]
        if result in outputs:
            return None
        readers = []
        for use in result.uses():
            node = use.node
            if node.op_type != "Reshape" or not is_default_domain(node.domain) or use.idx != 0:
                return None
            shape = _const(node.inputs[1]) if len(node.inputs) > 1 else None
            if shape is None or np.any(shape.numpy() == 0):
                return None
            readers.append(node)
        if not readers:
            return None
        return x, w, add, bias, readers, k


