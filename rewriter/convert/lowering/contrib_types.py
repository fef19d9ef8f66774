"""Types after ``com.microsoft`` nodes, which ONNX's shape inference does not know: each op's rule
gives its outputs' element types and shapes from its inputs' (as ONNX Runtime's schema does), and
the standard nodes after them are inferred one at a time, in graph order, so that a chain of
contrib and standard nodes (QLinearConv -> QLinearAdd -> QLinearConv -> ...) is typed throughout;
values of unknown rank are inferred again the same way (a Reshape to a computed shape of static
length has that rank).
Rules register with :func:`output_types` beside their lowerings."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain

__all__ = ["COM", "output_types", "fill_contrib_types", "dims_of", "tensor_type", "broadcast_dims"]

logger = logging.getLogger(__name__)
COM = "com.microsoft"
RULES: dict[str, Callable] = {}
_SMALL = 4096  # constant inputs handed to inference as data (shapes, axes) up to this many elements


def output_types(*op_types: str):
    """Register ``fn(node, types) -> [TypeProto | None per output]`` for ``com.microsoft::op_type``."""

    def register(fn):
        for op in op_types:
            RULES[op] = fn
        return fn

    return register


def tensor_type(elem: int, dims) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(elem, None if dims is None else list(dims))


def dims_of(tp: onnx.TypeProto | None):
    """(elem, dims) of a tensor type (dims None when the rank is unknown); (None, None) otherwise."""
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return None, None
    t = tp.tensor_type
    if not t.HasField("shape"):
        return t.elem_type or None, None
    return t.elem_type or None, [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def broadcast_dims(*shapes):
    """Numpy broadcasting of dims lists (None: unknown rank; a dim None or a name: unknown)."""
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        ds = [s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0]
        known = [d for d in ds if isinstance(d, int)]
        if any(d != 1 for d in known):
            out.append(max(d for d in known if d != 1))
        elif len(known) == len(ds):
            out.append(1)
        else:
            names = {d for d in ds if not isinstance(d, int)}
            out.append(names.pop() if len(names) == 1 and None not in names else None)
    return out


def _constant_data(name: str, scope: traversal.Scope) -> onnx.TensorProto | None:
    kind, thing, _ = traversal.definition(name, scope)
    if kind == "initializer" and thing.data_location != onnx.TensorProto.EXTERNAL:
        size = 1
        for d in thing.dims:
            size *= d
        return thing if size <= _SMALL else None
    if kind == "node" and thing.op_type == "Constant" and is_default_domain(thing.domain):
        for a in thing.attribute:
            if a.name == "value" and not a.ref_attr_name:
                return a.t
            if a.name in ("value_ints", "value_int") and not a.ref_attr_name:
                values = list(a.ints) if a.name == "value_ints" else a.i
                return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)
    return None


def _infer_standard(node, scope, types, imports) -> list:
    if any(traversal.attribute_graphs(a) for a in node.attribute):
        return []
    if any(i and i not in types for i in node.input):
        return []
    try:
        schema = onnx.defs.get_schema(node.op_type, scope.opset or 1, "")
        data = {}
        for i in node.input:
            if i and i not in data:
                t = _constant_data(i, scope)
                if t is not None:
                    data[i] = t
        got = onnx.shape_inference.infer_node_outputs(
            schema, node, {i: types[i] for i in node.input if i}, data, opset_imports=list(imports))
    except Exception as e:  # inference of one node failed: its outputs stay untyped
        logger.debug("no types after %s: %s", node.op_type, e)
        return []
    out = [got.get(o) for o in node.output]
    if node.op_type == "Reshape" and out and _rank_unknown(out[0]):
        _, shape = dims_of(types[node.input[1]])
        if shape is not None and len(shape) == 1 and isinstance(shape[0], int):  # the rank, not the dims
            out[0] = tensor_type(dims_of(types[node.input[0]])[0] or onnx.TensorProto.UNDEFINED, [None] * shape[0])
    return out


def _rank_unknown(tp) -> bool:
    return tp is None or (tp.WhichOneof("value") == "tensor_type" and not tp.tensor_type.HasField("shape"))


def fill_contrib_types(model: onnx.ModelProto, types: dict) -> dict:
    """Add to ``types`` (name -> TypeProto) what the main graph's ``com.microsoft`` nodes give and the
    standard nodes after them; returns ``types``."""
    if not any(n.domain == COM for n in model.graph.node):
        return types
    scope = next(iter(traversal.iter_scopes(model)))
    for node in model.graph.node:
        if all(not o or not _rank_unknown(types.get(o)) for o in node.output):
            continue
        if node.domain == COM:
            rule = RULES.get(node.op_type)
            try:
                got = rule(node, types) if rule is not None else []
            except (KeyError, IndexError, TypeError, ValueError) as e:
                logger.debug("no rule types after %s: %s", node.op_type, e)
                got = []
        elif is_default_domain(node.domain):
            got = _infer_standard(node, scope, types, model.opset_import)
        else:
            continue
        for name, tp in zip(node.output, got):
            if name and tp is not None and (name not in types or _rank_unknown(types[name]) and not _rank_unknown(tp)):
                types[name] = tp
    return types
