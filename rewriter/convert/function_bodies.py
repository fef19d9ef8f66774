"""ONNX function bodies for the engine: an op newer than the target is replaced by its body.

- :func:`function_body`: the body ``onnx.defs`` defines for a node's op, built for its types and
  attributes when the body is context-dependent;
- :func:`inline`: the body's nodes with the call's inputs, outputs and attributes bound and fresh
  names for everything else (subgraphs included), and the types of the new values;
- :func:`fold_shape_arithmetic`: the body's integer shape computations whose inputs are known,
  replaced by their values, so that steps needing a constant can take them.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx

from rewriter.convert.model_state import ConversionState
from rewriter.errors import ConversionError
from rewriter.graph import traversal
from rewriter.graph.constants import constant_node_value, constant_value
from rewriter.graph.evaluate import evaluate_node
from rewriter.graph.schemas import is_default_domain

__all__ = ["function_body", "inline", "fold_shape_arithmetic"]

logger = logging.getLogger(__name__)


def function_body(schema, node: onnx.NodeProto, version: int, types) -> onnx.FunctionProto:
    """The function body of ``node``'s op written for opset ``version``, for its types/attributes."""
    if version in schema.function_opset_versions:
        body = schema.get_function_with_opset_version(version)
    else:
        inputs = []
        for name in node.input:
            t = types(name) if name else None
            if name and t is None:
                raise ConversionError(f"the type of input '{name}' is unknown, and {node.op_type}'s function "
                                      f"body depends on it")
            inputs.append(t.SerializeToString() if t is not None else onnx.TypeProto().SerializeToString())
        body = schema.get_context_dependent_function_with_opset_version(
            version, node.SerializeToString(), inputs)
    if isinstance(body, bytes):
        fn = onnx.FunctionProto()
        fn.ParseFromString(body)
        return fn
    return body


def inline(fn: onnx.FunctionProto, node: onnx.NodeProto, state: ConversionState, scope, schema
            ) -> tuple[list[onnx.NodeProto], dict[str, onnx.TypeProto]]:
    """The body's nodes with the call's inputs, outputs and attributes bound and fresh names
    for everything else; and the types of the new values (from shape inference of the body)."""
    given = {a.name: a for a in node.attribute}
    names: dict[str, str] = {}
    for formal, actual in zip(fn.input, node.input):
        names[formal] = actual
    for formal in list(fn.input)[len(node.input):]:
        names[formal] = ""
    for formal, actual in zip(fn.output, node.output):
        names[formal] = actual
    for formal in list(fn.output)[len(node.output):]:
        names[formal] = ""
    hint = node.name or node.op_type
    nodes = []
    for inner in fn.node:
        new = onnx.NodeProto()
        new.CopyFrom(inner)
        for a in new.attribute:  # subgraphs: their own values get fresh names, outer ones follow
            for g in traversal.attribute_graphs(a):
                _rename_graph(g, dict(names), state, hint)
        for out_i, out in enumerate(new.output):
            if out and out not in names:
                names[out] = state.fresh_name(f"{hint}_{out}")
            new.output[out_i] = names.get(out, out) if out else ""
        for in_i, name in enumerate(new.input):
            if name:
                new.input[in_i] = names.get(name, name)
        kept = []
        for a in new.attribute:
            if a.ref_attr_name:
                value = given.get(a.ref_attr_name)
                if value is None:
                    default = schema.attributes.get(a.ref_attr_name)
                    value = default.default_value if default is not None and default.default_value.type else None
                if value is None:
                    continue  # an optional attribute the call leaves out
                bound = onnx.AttributeProto()
                bound.CopyFrom(value)
                bound.name = a.name
                kept.append(bound)
            else:
                kept.append(a)
        del new.attribute[:]
        new.attribute.extend(kept)
        new.name = state.fresh_node_name(f"{hint}_{inner.op_type}")
        if is_default_domain(new.domain):
            new.domain = ""
        nodes.append(new)
    return nodes, _body_types(nodes, node, state, scope, fn)


# Integer ops an inlined body may compute from shapes and constants alone (e.g. the axes of
# RMSNormalization's ReduceMean from Range(axis, Size(Shape(X)))): folded when inlining, exactly,
# by onnx.reference, so that steps needing a constant (axes input -> attribute) can take them.
_SHAPE_OPS = frozenset({"Shape", "Size", "Range", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Add",
                        "Sub", "Mul", "Div", "Neg", "Abs", "Equal", "Less", "Greater", "Where", "Cast",
                        "Reshape", "ConstantOfShape", "Identity", "Max", "Min", "Expand", "Constant"})
_INTEGER_OUT = (np.int64, np.int32, np.bool_)


def fold_shape_arithmetic(nodes: list[onnx.NodeProto], scope, state: ConversionState, opset: int
                           ) -> list[onnx.NodeProto]:
    """``nodes`` with each integer shape computation whose inputs are known replaced by a
    Constant of its value (same output name and node name)."""
    from onnx import numpy_helper

    types = state.types_for(scope)
    known: dict[str, np.ndarray] = {}
    # An If condition stays computed: a constant one lets ONNX Runtime inline the branch, and
    # ONNX's own function bodies (AffineGrid) are not typed strictly enough for that.
    producer = {o: n for n in nodes for o in n.output}
    keep, todo = set(), [n.input[0] for n in nodes if n.op_type == "If" and n.input]
    while todo:
        name = todo.pop()
        if name in producer and name not in keep:
            keep.add(name)
            todo.extend(producer[name].input)
    result = []
    for n in nodes:
        folded = None
        if n.op_type in _SHAPE_OPS and len(n.output) == 1 and is_default_domain(n.domain) and \
                n.output[0] not in keep and not any(a.ref_attr_name for a in n.attribute):
            try:
                folded = _fold_one(n, known, types, scope, state, opset)
            except Exception:  # noqa: BLE001 - a node the reference cannot evaluate stays as it is
                folded = None
        if folded is not None and folded.dtype.type in _INTEGER_OUT:
            known[n.output[0]] = folded
            const = onnx.helper.make_node("Constant", [], [n.output[0]], name=n.name,
                                          value=numpy_helper.from_array(folded))
            result.append(const)
            state.maybe_unused.append((n.output[0], scope))
        else:
            result.append(n)
    return result


EVALUATED_LIMIT = 4096  # elements: a node of constant inputs becomes a Constant up to this size


def evaluate_constant_node(node: onnx.NodeProto, scope, state: ConversionState, opset: int) -> np.ndarray | None:
    """The value of a one-output default-domain node whose every input is a constant in scope
    (and that holds no subgraph), evaluated with onnx.reference at ``opset``, when it has at most
    :data:`EVALUATED_LIMIT` elements; else None. For an op the target lacks (a Mod of two
    constants going below 10): its value stands in for it exactly."""
    if len(node.output) != 1 or not node.output[0] or not is_default_domain(node.domain) or \
            any(a.ref_attr_name or a.type in traversal.GRAPH_KINDS
                for a in node.attribute):
        return None
    values = []
    for name in node.input:
        if not name:
            values.append(None)
            continue
        pending = state.pending.get(name)
        value = constant_node_value(pending, state.read_tensor) if pending is not None and \
            pending.op_type == "Constant" else constant_value(name, scope, state.read_tensor)
        if value is None:
            return None
        values.append(np.asarray(value))
    try:
        out = evaluate_node(node, values, opset)
    except Exception:  # noqa: BLE001 - a node the reference cannot evaluate stays a blocker
        return None
    if not isinstance(out, np.ndarray) or out.dtype.kind not in "biuf":  # optionals, sequences, strings
        return None
    return out if out.size <= EVALUATED_LIMIT else None


def shape_value(name: str, scope, state: ConversionState, opset: int, *, _depth: int = 0,
                _memo: dict | None = None) -> tuple[np.ndarray | None, list[str]]:
    """The value of ``name`` when it is an integer shape computation that static shapes and
    constants decide (Shape/Size of a value whose dims are all known, Range, Gather, Concat, ...
    over them), evaluated with onnx.reference as the nodes stand (valid at ``opset``); and the
    names computed on the way. (None, []) when it is not one."""
    memo: dict = {} if _memo is None else _memo
    if name in memo:
        return memo[name], []
    value = constant_value(name, scope, state.read_tensor)
    chain: list[str] = []
    if value is None and _depth < 32:
        kind, node, where = traversal.definition(name, scope)
        if kind == "node" and node.op_type in _SHAPE_OPS and is_default_domain(node.domain) and \
                len(node.output) == 1 and not any(a.ref_attr_name for a in node.attribute):
            known = {}
            if node.op_type in ("Shape", "Size"):  # those read the type only; what computed
                if node.input and node.input[0]:  # their input goes with them when it is computed too
                    found, more = shape_value(node.input[0], where, state, opset, _depth=_depth + 1, _memo=memo)
                    chain += more if found is not None else []
            else:
                for i in node.input:
                    if not i:
                        continue
                    found, more = shape_value(i, where, state, opset, _depth=_depth + 1, _memo=memo)
                    if found is None:
                        memo[name] = None
                        return None, []
                    known[i] = found
                    chain += more
            try:
                value = _fold_one(node, known, state.types_for(where), where, state, opset)
            except Exception:  # noqa: BLE001 - a node the reference cannot evaluate decides nothing
                value = None
            if value is not None and np.asarray(value).dtype.type not in _INTEGER_OUT:
                value = None
            if value is not None:
                chain.append(name)
    memo[name] = value
    return value, (chain if value is not None else [])


def _fold_one(n, known, types, scope, state, opset):
    if n.op_type == "Constant":
        return constant_node_value(n, state.read_tensor)
    if n.op_type in ("Shape", "Size"):
        t = types.get(n.input[0])
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return None
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]
        if None in dims:
            return None
        if n.op_type == "Size":
            return np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
        attrs = {a.name: a.i for a in n.attribute}
        rank = len(dims)
        start, end = attrs.get("start", 0), attrs.get("end", rank)
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        return np.array(dims[start:end], dtype=np.int64)
    inputs = []
    for name in n.input:
        if not name:
            inputs.append(None)
            continue
        value = known.get(name)
        if value is None:
            value = constant_value(name, scope, state.read_tensor)
        if value is None:
            return None
        inputs.append(np.asarray(value))
    return np.asarray(evaluate_node(n, inputs, opset))


def _rename_graph(graph: onnx.GraphProto, names: dict[str, str], state: ConversionState, hint: str) -> None:
    """Rename a subgraph of an inlined function body: its inputs and node outputs get fresh
    names; references to the body's values follow ``names``."""
    for vi in graph.input:
        names[vi.name] = vi.name = state.fresh_name(f"{hint}_{vi.name}")
    for t in graph.initializer:
        names[t.name] = t.name = state.fresh_name(f"{hint}_{t.name}")
    for n in graph.node:
        for i, name in enumerate(n.input):
            if name in names:
                n.input[i] = names[name]
        for a in n.attribute:
            for g in traversal.attribute_graphs(a):
                _rename_graph(g, dict(names), state, hint)
        for i, name in enumerate(n.output):
            if name:
                names[name] = n.output[i] = state.fresh_name(f"{hint}_{name}")
        n.name = state.fresh_node_name(f"{hint}_{n.op_type}")
    for vi in graph.output:
        vi.name = names.get(vi.name, vi.name)
    for vi in graph.value_info:
        vi.name = names.get(vi.name, vi.name)


def _body_types(nodes, node, state: ConversionState, scope, fn) -> dict[str, onnx.TypeProto]:
    """Types of the inlined values, from ONNX shape inference of the body at the function's opset."""
    known = state.types_for(scope)
    inputs = []
    for name in node.input:
        if name and name not in {i.name for i in inputs}:
            t = known.get(name)
            if t is None:
                return {}
            inputs.append(onnx.helper.make_value_info(name, t))
    outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = onnx.helper.make_graph(nodes, "body", inputs, outputs)
    opsets = [o for o in fn.opset_import] or [onnx.helper.make_opsetid("", scope.opset)]
    model = onnx.helper.make_model(graph, opset_imports=opsets)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception as e:  # inference only adds information
        logger.info("shape inference of %s's function body failed: %s", node.op_type, e)
        return {}
    found = {}
    for g in [inferred.graph, *(g for n in traversal.all_nodes(inferred.graph) for g in traversal.subgraphs(n))]:
        for vi in [*g.value_info, *g.output, *(g.input if g is not inferred.graph else [])]:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                found.setdefault(vi.name, vi.type)
    return found
