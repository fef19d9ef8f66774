"""``Reshape`` / ``empty_shape_squeezed``: a Reshape to the empty shape [] (a one-element value made
a scalar) written as an Identity when its input is a scalar already, else as a Squeeze of every
axis (each is 1: the value holds one element).

Measured (tests/targets/test_empty_reshapes.py): OpenVINO 2024.6.0 refuses every Reshape to [] at
load ("The value of scalar shape pattern should be equal to 1!"), of a dim read from a Shape
(Paddle's exports write Shape -> Slice -> Squeeze -> Reshape to []: PP-OCRv6_rec_small) and of any
scalar alike; 2026.4.1 runs them. The Identity and the Squeeze run in 2024.6 and give the same
values.
"""

from __future__ import annotations

import onnx
from onnx import helper

from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.graph.names import first_few
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.restriction_lookups import constant_array

__all__ = ["empty_shape_squeezed"]


def _to_empty(node: onnx.NodeProto, scope: traversal.Scope) -> bool:
    if node.op_type != "Reshape" or not is_default_domain(node.domain) or len(node.input) < 2:
        return False
    shape = constant_array(node.input[1], scope)
    return shape is not None and shape.size == 0 and shape.ndim == 1


def empty_shape_squeezed(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place every Reshape (any scope) to a constant empty shape; one note."""
    found = [(scope, node) for scope in traversal.iter_scopes(model) for node in scope.body.node if _to_empty(node, scope)]
    if not found:
        return []
    types = value_types(model, inferred)
    for scope, node in found:
        kind = types.get(node.input[0])
        rank = len(kind.tensor_type.shape.dim) if kind is not None and kind.tensor_type.HasField("shape") else None
        op = "Identity" if rank == 0 else "Squeeze"
        node.CopyFrom(helper.make_node(op, [node.input[0]], list(node.output), name=node.name))
    return [f"{len(found)} Reshape node(s) to the empty shape written as an Identity of a scalar or a Squeeze "
            f"({release} refuses a Reshape to []): {first_few(repr(n.name or n.output[0]) for _, n in found)}"]
