"""What the per-op restrictions read in a model: attribute values (with schema defaults),
constants as onnx-tensorrt takes them (weights), inferred types and shapes, the values a node's
outputs feed, and upper bounds on integer values computed from constants and static dims."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.graph import traversal
from rewriter.graph.constants import constant_node_value
from rewriter.graph.model_index import value_types
from rewriter.graph.attributes import CALLER_SET, attribute, value_of
from rewriter.graph.schemas import is_default_domain, schema_at

__all__ = ["Lookups", "trt_constant", "constant_array", "schema_of", "attr", "node_attr", "value_bound", "UNKNOWN"]

UNKNOWN = CALLER_SET  # an attribute a function's caller sets (ref_attr_name)


class Lookups:
    """What the rules look up in a model, computed once each: uses, inferred types (lazily)."""

    def __init__(self, model: onnx.ModelProto, read_tensor, inferred):
        self.model = model
        self.read = read_tensor or numpy_helper.to_array
        self._inferred = inferred
        self._types: dict | None = None
        self._used: set | None = None

    def types(self) -> dict[str, onnx.TypeProto]:
        if self._types is None:
            from rewriter.graph.inferred import inferred_model

            inferred = inferred_model(self._inferred, self.model)
            self._types = value_types(self.model, inferred if inferred is not None else self.model)
        return self._types

    def used(self) -> set[str]:
        """Every name some node reads or some graph or function gives out."""
        if self._used is None:
            self._used = set()
            for scope in traversal.iter_scopes(self.model):
                body = scope.body
                self._used.update(i for n in body.node for i in n.input if i)
                self._used.update(body.output if scope.is_function else (o.name for o in body.output))
        return self._used

    def shape(self, name: str) -> list | None:
        """The dims of ``name`` (an int, a dim_param string or None each), None when the rank is unknown."""
        t = self.types().get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]

    def elem_type(self, name: str) -> int | None:
        t = self.types().get(name)
        return t.tensor_type.elem_type if t is not None and t.tensor_type.elem_type else None


def trt_constant(name: str, scope: traversal.Scope, read) -> np.ndarray | None:
    """The value of ``name`` when onnx-tensorrt takes it as weights (an initializer, also one that is
    a graph input, or a Constant node's output, here or in an enclosing scope), else None."""
    s = scope
    while s is not None:
        tensor = s.initializers().get(name)
        if tensor is not None:
            return read(tensor)
        if name in s.inputs():
            return None
        producer = s.producers().get(name)
        if producer is not None:
            if producer.op_type == "Constant" and is_default_domain(producer.domain):
                return constant_node_value(producer, read)
            return None
        s = s.parent
    return None


def constant_array(name: str, scope: traversal.Scope) -> np.ndarray | None:
    """:func:`trt_constant`'s value of ``name`` as a numpy array, or None when it is not a constant
    or cannot be read here (external data not at hand)."""
    if not name:
        return None
    try:
        value = trt_constant(name, scope, numpy_helper.to_array)
    except Exception:  # noqa: BLE001 - external data not at hand: not a constant this reads
        return None
    return None if value is None else np.asarray(value)


def schema_of(op: str, opset: int | None):
    return schema_at(op, opset or onnx.defs.onnx_opset_version())


def attr(node, schema, name, default=True):
    """The attribute's value (strings decoded), its schema default when absent (``default``), or None."""
    a = attribute(node, name)
    if a is None and default and schema is not None and name in schema.attributes:
        a = schema.attributes[name].default_value if schema.attributes[name].default_value.type else None
    return None if a is None else value_of(a, decode=True)


_PASS_THROUGH = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Identity", "Flatten", "Cast", "Expand", "Tile"})
_SELECT = frozenset({"Gather", "Slice"})  # some of the first input's elements: only its largest bounds them
_BOUND_DEPTH = 24


def value_bound(name: str, scope, ctx, lowest: bool, depth: int = 0):
    """An upper bound on every element of integer value ``name`` (``lowest``: on its smallest
    element), from constants, static dims and the integer ops exporters compute a K with
    (``Min(150, Shape(x)[1])``, a ReduceMin of a Concat); None when none is known."""
    value = trt_constant(name, scope, ctx.read)
    if value is not None:
        return None if value.size == 0 else float(np.min(value) if lowest else np.max(value))
    s, node = scope, None
    while s is not None and node is None:
        if name in s.inputs():
            return None
        node = s.producers().get(name)
        s = s.parent if node is None else s
    if node is None or depth > _BOUND_DEPTH or not is_default_domain(node.domain):
        return None
    op, ins = node.op_type, [i for i in node.input if i]
    if op == "Shape":
        shape = ctx.shape(ins[0])
        dims = shape[node_attr(node, "start") or 0:node_attr(node, "end")] if shape is not None else None
        return float(min(dims) if lowest else max(dims)) if dims and all(isinstance(d, int) for d in dims) else None
    if op == "Cast" and node_attr(node, "to") not in _INTEGER_TYPES:
        return None
    if op in _PASS_THROUGH:
        return value_bound(ins[0], s, ctx, lowest, depth + 1)
    if op in _SELECT:
        return value_bound(ins[0], s, ctx, False, depth + 1)
    if op == "Concat":
        bounds = [value_bound(i, s, ctx, lowest, depth + 1) for i in ins]
        known = [b for b in bounds if b is not None]
        if lowest:  # the smallest element is at most the smallest element of any one input
            return min(known) if known else None
        return max(bounds) if bounds and None not in bounds else None
    if op == "Min":  # elementwise: at most any one input
        known = [b for b in (value_bound(i, s, ctx, False, depth + 1) for i in ins) if b is not None]
        return min(known) if known else None
    if op == "ReduceMin" and len(ins) == 1 and node_attr(node, "axes") is None:  # over every element
        return value_bound(ins[0], s, ctx, True, depth + 1)
    return None


_INTEGER_TYPES = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
                            onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                            onnx.TensorProto.UINT32, onnx.TensorProto.UINT64})


def node_attr(node, name):
    """A node's attribute value (None when absent or set by a function's caller)."""
    v = attr(node, None, name, default=False)
    return None if v is UNKNOWN else v
