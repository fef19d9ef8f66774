"""``Expand`` / ``codes_widened`` (``rewrite_forms``; LiteRT's data): onnx2tf 2.6.9 writes an
ONNX Expand as a MUL by ones (LiteRT's refusal of a uint16 one names MUL), and LiteRT gives every
element 0 for int8 and uint8 (the node tests' Mul on int8 / uint8 are wrong there too) and refuses
uint16.  An Expand of int8, uint8 or uint16 is written as Cast to int32, the Expand, and Cast
back: the same values, each of which int32 holds exactly (int32 Expand runs right, measured).
An Expand whose input type shape inference does not tell is left as it is."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from rewriter.graph.model_index import elem_of, value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import splice_found

__all__ = ["NARROW", "expand_codes_widened"]

NARROW = frozenset({TensorProto.INT8, TensorProto.UINT8, TensorProto.UINT16})  # Expand-ed through int32


def _widened(node: onnx.NodeProto, elem: int, taken: set) -> list[onnx.NodeProto]:
    base = node.name or node.output[0]
    wide, out = fresh_name(taken, f"{node.input[0]}_int32"), fresh_name(taken, f"{node.output[0]}_int32")
    expand = onnx.NodeProto()
    expand.CopyFrom(node)
    expand.input[0], expand.output[0] = wide, out
    return [helper.make_node("Cast", [node.input[0]], [wide], to=TensorProto.INT32, name=fresh_name(taken, f"{base}_widen")),
            expand,
            helper.make_node("Cast", [out], [node.output[0]], to=elem, name=fresh_name(taken, f"{base}_narrow"))]


def expand_codes_widened(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each Expand of an int8, uint8 or uint16 tensor as the module's docstring
    says; one note naming them."""
    types = value_types(model, inferred)

    def narrow(node: onnx.NodeProto, scope) -> int | None:
        elem = elem_of(types.get(node.input[0])) if node.op_type == "Expand" and is_default_domain(node.domain) else None
        return elem if elem in NARROW else None

    done = splice_found(model, narrow, _widened)
    if not done:
        return []
    return [f"{len(done)} Expand node(s) of 8- or 16-bit integers computed in int32 and cast back "
            f"({release} gives zeros for them, measured): {first_few(repr(n) for n in done)}"]
