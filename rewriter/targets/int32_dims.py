"""Shape chains computed in int32 read in int64 (``rewrite_forms`` form ``int32_dims_widened``;
tract 0.23's data).

tf2onnx and paddle2onnx compute shapes in int32: ``Shape`` -> ``Cast`` to int32 -> ``Slice`` /
``Gather`` / ``Concat`` with int32 constants -> ``Cast`` to int64 -> the shape of a ``Reshape`` or
``Expand`` (magika's one-hot broadcast, PP-OCR's classifier head).  tract evaluates a shape read
straight from a ``Shape`` symbolically, and refuses one that passed through a Cast ("shape input
is variable") while a dim is not static.  Here each ``Cast`` to int64 whose input such a chain
computes (data movement only: ``Slice``, ``Gather``, ``Concat``, ``Unsqueeze``, ``Squeeze``,
``Reshape``, ``Identity``, from ``Cast`` to int32 of a ``Shape`` and int32 constants) reads a copy
of the chain computed in int64 from the ``Shape`` itself, the constants widened: the same values
for every dim below 2^31 (the int32 copy holds the dims themselves, moved, never combined).  The
original chain stays for its other readers.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import splice, taken_names
from rewriter.targets.restriction_lookups import constant_array

__all__ = ["MOVES", "int32_dims_widened"]

# ops that move the values of their first input (the others, where present, say how)
MOVES = frozenset({"Slice", "Gather", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Identity"})


def _cast_to(node: onnx.NodeProto) -> int | None:
    return next((a.i for a in node.attribute if a.name == "to"), None) if node.op_type == "Cast" else None


def _int32_constant(name: str, scope: traversal.Scope):
    value = constant_array(name, scope)
    return value if value is not None and value.dtype == np.int32 else None


def _chain(name: str, scope: traversal.Scope, nodes: list, depth: int = 0) -> bool:
    """Whether ``name`` (int32) is computed by moves from Casts to int32 of Shapes and int32
    constants; ``nodes`` collects the move and Cast nodes, producers first."""
    node = scope.producers().get(name)
    if node is None or depth > 16 or not is_default_domain(node.domain):
        return False
    if node.op_type == "Cast":
        source = scope.producers().get(node.input[0])
        ok = _cast_to(node) == TensorProto.INT32 and source is not None and source.op_type == "Shape"
        if ok and node not in nodes:
            nodes.append(node)
        return ok
    if node.op_type not in MOVES:
        return False
    data = node.input[:]
    moved = data if node.op_type == "Concat" else data[:1]
    for i in moved:
        if _int32_constant(i, scope) is None and not _chain(i, scope, nodes, depth + 1):
            return False
    if node not in nodes:
        nodes.append(node)
    return True


def _widened(cast: onnx.NodeProto, chain: list, scope: traversal.Scope, taken: set) -> list[onnx.NodeProto]:
    """The chain again in int64 (its Casts to int32 read as their Shapes, its int32 constants as
    int64 Constants), then ``cast`` as an Identity of the copy's last value."""
    renamed, made = {}, []
    for node in chain:
        if node.op_type == "Cast":
            renamed[node.output[0]] = node.input[0]
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = fresh_name(taken, f"{node.name or node.output[0]}_int64")
        moved = range(len(node.input)) if node.op_type == "Concat" else [0]
        for i in moved:
            source = node.input[i]
            if source in renamed:
                copy.input[i] = renamed[source]
                continue
            value = np.asarray(_int32_constant(source, scope)).astype(np.int64)
            wide = fresh_name(taken, f"{source}_int64")
            made.append(helper.make_node("Constant", [], [wide], name=fresh_name(taken, wide),
                                         value=numpy_helper.from_array(value, wide)))
            copy.input[i] = renamed[source] = wide
        for j, out in enumerate(node.output):
            copy.output[j] = renamed[out] = fresh_name(taken, f"{out}_int64")
        made.append(copy)
    return made + [helper.make_node("Identity", [renamed[cast.input[0]]], [cast.output[0]], name=cast.name)]


def int32_dims_widened(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each Cast to int64 of an int32 shape chain (module docstring); one note."""
    taken = taken_names(model)
    done = []
    for scope in traversal.iter_scopes(model):
        plans = {}
        for i, node in enumerate(scope.body.node):
            chain: list = []
            if _cast_to(node) == TensorProto.INT64 and is_default_domain(node.domain) and _chain(
                    node.input[0], scope, chain) and any(n.op_type == "Cast" for n in chain):
                plans[i] = chain
        if plans:
            done += splice(scope, plans, lambda node, chain, scope=scope: _widened(node, chain, scope, taken))
    if not done:
        return []
    return [f"{len(done)} shape chain(s) computed in int32 from a Shape read in int64 from the Shape itself "
            f"({release} refuses a shape read through a Cast while a dim is not static): "
            f"{first_few(repr(n) for n in done)}"]
