"""Remove nodes that provably change nothing: a Reshape to the shape its input already has,
and an inference-mode Dropout.

- Reshape with a constant shape: the result's dims are worked out from the shape vector the
  ONNX way (0 copies the input dim unless ``allowzero=1``, -1 takes what is left) against the
  input's known rank and dims; when every result dim is the input dim at the same place, the
  Reshape is the identity (``Reshape(x: [1, 8], [1, 8])``, ``Reshape(x: [N, 8], [0, 8])``,
  ``Reshape(x: [N, 8], [0, -1])``). A -1 next to dims that all match takes the one dim left.
- Dropout whose mask output nobody reads: from opset 7 to 11 Dropout has no training mode (a
  runtime runs it as the identity); from 12 it is the identity when ``training_mode`` is absent
  or a constant false (``ratio`` does not matter then). Before 7, only with ``is_test=1``.

The removed node's result is read from its input instead. A result that is a graph output
stays (its name is the interface), and so does anything outside the default domain.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import const_ints, constant_array

__all__ = ["RemoveStaticNoOpsPass"]


def _attr_int(node: ir.Node, name: str, default: int) -> int | None:
    attr = node.attributes.get(name)
    if attr is None:
        return default
    return None if attr.is_ref() else attr.as_int()


def _reshape_is_identity(node: ir.Node) -> bool:
    if len(node.inputs) != 2 or node.inputs[0] is None:
        return False
    data, target = node.inputs[0], const_ints(node.inputs[1])
    allowzero = _attr_int(node, "allowzero", 0)
    if target is None or allowzero is None or data.shape is None or len(target) != len(data.shape):
        return False
    dims = list(data.shape.dims)
    free = None
    for i, (t, d) in enumerate(zip(target, dims)):
        if t == 0 and not allowzero:
            continue  # copies input dim i
        if t == -1 and free is None:
            free = i
            continue
        if not (isinstance(d, int) and t == d):
            return False
    # with every other dim equal to the input's, -1 is the one dim left, the input's own
    return True


def _bool_false(value: ir.Value | None) -> bool:
    if value is None:
        return True
    array = constant_array(value, max_size=1)
    return array is not None and array.size == 1 and not bool(array.reshape(-1)[0])


def _dropout_is_identity(node: ir.Node, opset: int) -> bool:
    if not node.inputs or node.inputs[0] is None:
        return False
    if len(node.outputs) > 1 and node.outputs[1].uses():
        return False
    if opset >= 12:
        return _bool_false(node.inputs[2] if len(node.inputs) > 2 else None)
    if opset >= 7:
        return True
    return _attr_int(node, "is_test", 0) == 1


class RemoveStaticNoOpsPass(NodeRewritePass):
    """Drop identity Reshapes and inference Dropouts (see the module doc); ``self.count`` counts them."""

    OPS = frozenset({"Reshape", "Dropout"})
    DONE = "removed %d identity Reshape/Dropout node(s)"

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        outputs = scope.outputs
        if any(o in outputs for o in node.outputs):
            return
        same = _reshape_is_identity(node) if node.op_type == "Reshape" else _dropout_is_identity(node, scope.opset)
        out, data = node.outputs[0], node.inputs[0]
        if not same or out.dtype is not None and data.dtype is not None and out.dtype != data.dtype:
            return
        out.replace_all_uses_with(data)
        scope.graph.remove(node, safe=True)
        self.count += 1
