"""ONNX's shape inference for one node of an ``onnx_ir`` graph, through onnx's public
``onnx.shape_inference.infer_node_outputs``: the types and shapes of a node's outputs from
those of its inputs (and the values of its small constant inputs).

The optimize passes change a graph between the folder's inference runs: once a pass gives a
Reshape a constant shape, the dims after it become known, and the shape chains further down
can fold in the same walk instead of one round later. An output's known dims are never
replaced: an inferred dim only fills a dim that is unknown (no value, no name).
"""

from __future__ import annotations

import logging

import onnx
import onnx_ir as ir

from rewriter.graph.schemas import is_default_domain

__all__ = ["infer_node", "fill_shape"]

logger = logging.getLogger(__name__)

_SMALL = 64  # constant inputs passed to inference (shapes, axes): small ones only


def _type_proto(value: ir.Value) -> onnx.TypeProto | None:
    if value.type is None:
        return None
    proto = ir.serde.serialize_type(value.type)
    if value.shape is not None:
        ir.serde.serialize_shape_into(proto, value.shape)
    return proto


def _unknown(dim) -> bool:
    return not isinstance(dim, int) and not (isinstance(dim, ir.SymbolicDim) and dim.value)


def _merged(known: ir.Shape | None, inferred: ir.Shape) -> ir.Shape | None:
    """``known`` with its unknown dims filled from ``inferred``; None when nothing is gained."""
    if known is None:
        return inferred
    if len(known) != len(inferred):
        return None
    dims = list(known.dims)
    gained = False
    for i, (a, b) in enumerate(zip(known.dims, inferred.dims)):
        if _unknown(a) and not _unknown(b):
            dims[i], gained = b, True
    return ir.Shape(dims) if gained else None


def fill_shape(value: ir.Value, shape: ir.Shape) -> bool:
    """Fill ``value``'s unknown dims (all of them when its rank is unknown) from ``shape``;
    returns whether anything was filled."""
    merged = _merged(value.shape, shape)
    if merged is None:
        return False
    value.shape = merged
    return True


def infer_node(node: ir.Node, opset: int) -> bool:
    """Fill the unknown types and dims of ``node``'s outputs by ONNX's inference at ``opset``
    (default-domain nodes only); returns whether anything was filled. A node ONNX cannot
    infer (unknown input types, an inference error) is left as it is."""
    if not is_default_domain(node.domain) or not any(
            o.type is None or o.shape is None or any(_unknown(d) for d in o.shape.dims) for o in node.outputs):
        return False
    types, data = {}, {}
    for x in node.inputs:
        if x is None:
            continue
        proto = _type_proto(x)
        if proto is None:
            return False
        types[x.name] = proto
        if x.const_value is not None and x.const_value.size <= _SMALL and not x.is_graph_input():
            data[x.name] = ir.serde.serialize_tensor(x.const_value)
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
        inferred = onnx.shape_inference.infer_node_outputs(schema, ir.serde.serialize_node(node), types, data)
    except Exception as e:  # noqa: BLE001 - ONNX's inference refuses what it cannot type; keep the node as it is
        logger.debug("no inference for %s (%s): %s", node.name, node.op_type, e)
        return False
    filled = False
    for out in node.outputs:
        proto = inferred.get(out.name)
        if proto is None or not proto.HasField("tensor_type"):
            continue
        if out.type is None:
            out.type = ir.serde.deserialize_type_proto_for_type(proto)
            filled = True
        shape = ir.serde.deserialize_type_proto_for_shape(proto)
        if shape is not None and fill_shape(out, shape):
            filled = True
    return filled
