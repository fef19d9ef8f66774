"""Remove nodes and initializers nobody uses, in every graph, subgraph and function; count constant bytes.

Proto-level and scope-aware: a name read anywhere inside a node's subgraphs counts as
used by that node, so an outer-scope value used only by an If branch stays.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

import numpy as np
import onnx

from rewriter.graph import traversal
from rewriter.graph.schemas import DEFAULT_DOMAINS, is_default_domain

__all__ = ["remove_unused", "constant_bytes", "training_reads"]

logger = logging.getLogger(__name__)


def _graph_reads(graph: onnx.GraphProto) -> Iterable[str]:
    """Every name a subgraph reads, its own definitions included (an over-approximation)."""
    for node in graph.node:
        yield from _node_reads(node)
    for out in graph.output:
        yield out.name


def _node_reads(node: onnx.NodeProto) -> Iterable[str]:
    yield from (name for name in node.input if name)
    for g in traversal.subgraphs(node):
        yield from _graph_reads(g)


def _use_counts(scope: traversal.Scope) -> Counter:
    body = scope.body
    holders = traversal.ops_with(traversal.GRAPH_KINDS)
    names: list[str] = []
    for node in body.node:  # one flat list, counted once: big graphs have many nodes
        names.extend(node.input)
        domain = node.domain
        if domain not in DEFAULT_DOMAINS or node.op_type in holders:
            for g in traversal.subgraphs(node):
                names.extend(_graph_reads(g))
    names.extend(body.output if scope.is_function else (v.name for v in body.output))
    counts = Counter(names)
    counts.pop("", None)
    return counts


def _unread(names: set[str], scopes: list[traversal.Scope], model: onnx.ModelProto) -> set[str]:
    """Those of ``names`` that no node, graph output, function output or the training info
    reads; stops as soon as every one was seen read."""
    left = set(names)
    for scope in scopes:
        for node in scope.body.node:
            if not left.isdisjoint(node.input):
                left.difference_update(node.input)
                if not left:
                    return left
        left.difference_update(scope.body.output if scope.is_function else (v.name for v in scope.body.output))
        if not left:
            return left
    left.difference_update(training_reads(model.training_info))
    return left


def _remove_unread_initializers(unread: set[str], scopes: list[traversal.Scope]) -> list[str] | None:
    """Remove the graph initializers named in ``unread`` (none of which anybody reads); None,
    removing nothing, when some name is not such an initializer (a node output: the caller
    sweeps, since removing a node can free what it read)."""
    where = []
    found = set()
    for scope in scopes:
        if scope.is_function:
            continue
        inputs = {v.name for v in scope.body.input}
        doomed = [i for i, t in enumerate(scope.body.initializer) if t.name in unread and t.name not in inputs]
        if doomed:
            where.append((scope, doomed))
            found.update(scope.body.initializer[i].name for i in doomed)
    if found != unread:
        return None
    removed = []
    for scope, doomed in where:
        body = scope.body
        names = {body.initializer[i].name for i in doomed}
        for index in reversed(doomed):
            removed.append(f"initializer '{body.initializer[index].name}' in {scope.location}")
            del body.initializer[index]
        stale = [i for i, v in enumerate(body.value_info) if v.name in names]
        for index in reversed(stale):
            del body.value_info[index]
        scope.invalidate()
    return removed


def training_reads(training_info: Iterable[onnx.TrainingInfoProto]) -> Counter:
    """Main-graph names the training info reads (its graphs' inputs, at any depth, and its
    bindings), with how often: the one reading of it, for this module and the optimizer (which
    keeps them, as the bridge carries the training info around onnx_ir)."""
    counts: Counter = Counter()
    for info in training_info:
        counts.update(_graph_reads(info.initialization))
        counts.update(_graph_reads(info.algorithm))
        for binding in (*info.initialization_binding, *info.update_binding):
            counts.update((binding.key, binding.value))
    return counts


def _sweep_scope(scope: traversal.Scope, only: set[str] | None, extra: Counter | None = None) -> list[str]:
    """One backwards pass over a topologically sorted body; returns what it removed.

    ``extra`` counts uses from outside the body's nodes (the training info's, for the main graph).
    """
    body = scope.body
    counts = _use_counts(scope)
    if extra:
        counts.update(extra)
    removed: list[str] = []
    doomed: list[int] = []
    for index in range(len(body.node) - 1, -1, -1):
        node = body.node[index]
        outputs = [o for o in node.output if o]
        if not outputs or (only is not None and not all(o in only for o in outputs)):
            continue
        if any(counts[o] for o in outputs):
            continue
        doomed.append(index)
        removed.append(traversal.node_label(node, scope))
        for name in _node_reads(node):
            counts[name] -= 1
    for index in doomed:  # descending, so earlier indices stay valid
        del body.node[index]
    if not scope.is_function:
        inputs = {v.name for v in body.input}
        doomed = [
            i for i, t in enumerate(body.initializer)
            if not counts[t.name] and t.name not in inputs and (only is None or t.name in only)
        ]
        for index in reversed(doomed):
            removed.append(f"initializer '{body.initializer[index].name}' in {scope.location}")
            del body.initializer[index]
        if doomed or removed:
            _drop_stale_value_info(body)
    if removed:
        scope.invalidate()
    return removed


def _drop_stale_value_info(graph: onnx.GraphProto) -> None:
    defined = {o for n in graph.node for o in n.output}
    defined.update(t.name for t in graph.initializer)
    defined.update(v.name for v in graph.input)
    stale = [i for i, v in enumerate(graph.value_info) if v.name not in defined]
    for index in reversed(stale):
        del graph.value_info[index]


def remove_unused(model: onnx.ModelProto, *, only: Iterable[str] | None = None,
                  scopes: list[traversal.Scope] | None = None) -> list[str]:
    """Remove, in place, nodes whose outputs nobody reads and initializers nobody reads.

    Graph inputs, graph outputs and function outputs are never removed; an initializer
    that is also a graph input stays (it is part of the model's interface). With
    ``only``, just the nodes all of whose outputs, and the initializers whose names, are
    in ``only`` are candidates. ``scopes``: ``list(traversal.iter_scopes(model))`` when the
    caller has it. Returns a description of each removed item.
    """
    only_set = None if only is None else set(only)
    # Children before parents: a dead use inside a subgraph is gone before its
    # enclosing scope counts uses.
    scopes = list(traversal.iter_scopes(model)) if scopes is None else scopes
    if only_set is not None:
        unread = _unread(only_set, scopes, model)
        if not unread:
            return []  # every candidate is read somewhere: nothing to remove (the common case)
        removed = _remove_unread_initializers(unread, scopes)  # no sweep needed for those alone
        if removed is not None:
            for item in removed:
                logger.info("removed unused %s", item)
            return removed
    removed: list[str] = []
    training = training_reads(model.training_info)
    for scope in reversed(scopes):
        removed.extend(_sweep_scope(scope, only_set, training if scope is scopes[0] else None))
    for item in removed:
        logger.info("removed unused %s", item)
    return removed


_SUB_BYTE_BITS = {getattr(onnx.TensorProto, n): b for n, b in
                  (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))
                  if hasattr(onnx.TensorProto, n)}


def _tensor_nbytes(t: onnx.TensorProto) -> int:
    if t.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return 0
    bits = _SUB_BYTE_BITS.get(t.data_type)
    if bits is None:
        bits = 8 * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    return (int(np.prod(t.dims, dtype=np.int64)) * bits + 7) // 8


def constant_bytes(model: onnx.ModelProto) -> int:
    """Bytes of constant tensor data (initializers, Constant nodes) without reading any of it."""
    total = 0
    for scope in traversal.iter_scopes(model):
        if not scope.is_function:
            total += sum(_tensor_nbytes(t) for t in scope.body.initializer)
        for node in scope.body.node:
            if node.op_type == "Constant" and is_default_domain(node.domain):
                for attr in node.attribute:
                    if attr.type == onnx.AttributeProto.TENSOR:
                        total += _tensor_nbytes(attr.t)
                    elif attr.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
                        total += 8 * len(attr.ints) + 4 * len(attr.floats)
    return total
