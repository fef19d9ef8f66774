"""``Where`` / ``branches_swapped``: onnx2tf 2.6.9 (LiteRT's converter) writes a Where whose output
is not float as TFLite's SELECT (not SELECT_V2) when the condition has the first branch's shape, or
is of rank 1 as long as the branch's first dim, and SELECT takes no broadcasting between its
branches: LiteRT refuses such a model when it prepares it ("select.cc HaveSameShapes(input_x,
input_y)", or "has_low_rank_input_condition" for a condition of rank 2; an int64 or bool
Where(c, v, k) with ``v`` of the condition's shape and a scalar ``k`` is enough).  A float Where is
not concerned (onnx2tf writes it as arithmetic then).  Here such a Where becomes
``Where(Not(c), k, v)``: the same values, element for element, and SELECT_V2 (which broadcasts),
since the first branch no longer has the condition's shape.  Expanding ``k`` to ``v``'s shape
(``Expand(k, Shape(v))``) is no way out: onnx2tf's shape inference (no data propagation) loses
the dims after it, writes them as 1, and a later Reshape fails.  A Where whose branches are
known to have one shape, or whose second branch would also be written as SELECT, is left."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.restriction_lookups import trt_constant

__all__ = ["FLOATS", "branches_swapped", "strings_gathered"]

FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE})


def _shape(name: str, types: dict):
    """The dims of ``name`` (int, symbolic name, or None when unknown), or None when the rank is not known."""
    t = types.get(name)
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim)


def _dim(a, b) -> bool | None:
    """Whether two dims are equal: True (one value or one name), False (two values), None (not known)."""
    if a is not None and a == b:
        return True
    return False if isinstance(a, int) and isinstance(b, int) else None


def _select(cond, first) -> bool | None:
    """Whether onnx2tf writes SELECT for this condition and first branch (the condition has the
    branch's shape, or is of rank 1 as long as its first dim): True, False, or None when the dims
    known do not tell."""
    if cond is None or first is None:
        return None
    if len(cond) == len(first):
        dims = [_dim(a, b) for a, b in zip(cond, first)]
        return False if False in dims else (True if all(dims) else None)
    return _dim(cond[0], first[0]) if len(cond) == 1 and first else False


def _elem(name: str, types: dict):
    t = types.get(name)
    return t.tensor_type.elem_type if t is not None and t.HasField("tensor_type") else None


def _refused(node: onnx.NodeProto, types: dict) -> bool:
    """Whether the Where is not float, may be written as SELECT with branches of two shapes, and
    is not so once its branches are swapped."""
    if node.op_type != "Where" or not is_default_domain(node.domain) or len(node.input) != 3:
        return False
    elem = _elem(node.input[1], types)
    if elem is None or elem in FLOATS:
        return False
    cond, x, y = (_shape(n, types) for n in node.input)
    return _select(cond, x) is not False and _select(cond, y) is False


def branches_swapped(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Write, in place, every main-graph Where :func:`_refused` says LiteRT refuses as
    ``Where(Not(c), y, x)``; one note naming them."""
    types = value_types(model, inferred)
    graph = model.graph
    taken = {n for node in graph.node for n in [*node.input, *node.output, node.name]}
    taken |= {v.name for v in [*graph.input, *graph.output, *graph.initializer]}
    nodes, done = [], []
    for node in graph.node:
        if _refused(node, types):
            base = node.name or node.output[0]
            negated = fresh_name(taken, f"{base}_not")
            nodes.append(helper.make_node("Not", [node.input[0]], [negated], name=negated))
            node.input[:] = [negated, node.input[2], node.input[1]]
            done.append(base)
        nodes.append(node)
    if not done:
        return []
    del graph.node[:]
    graph.node.extend(nodes)
    return [f"{len(done)} Where node(s) that are not float, with a first branch of the condition's shape and a "
            f"second that broadcasts, written as Where(Not(condition), second, first) (onnx2tf writes them as "
            f"TFLite SELECT, whose branches must have one shape, and {release} refuses them): "
            f"{first_few(repr(n) for n in done)}"]


def _scalar_string(name: str, scope):
    value = trt_constant(name, scope, numpy_helper.to_array)
    return value if value is not None and value.shape == () and value.dtype == object else None


def strings_gathered(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Write, in place, every main-graph Where choosing between two constant string scalars (the
    binary classifiers' labels) as ``Gather([second, first], Cast(c, int64))``: LiteRT has no
    SELECT on strings ("Does not support type other than bool|float|int, got 5"), and gathers
    strings; the same strings, in the condition's shape.  Other string Where nodes are left."""
    scope = next(traversal.iter_scopes(model))
    graph = model.graph
    taken = {n for node in graph.node for n in [*node.input, *node.output, node.name]}
    taken |= {v.name for v in [*graph.input, *graph.output, *graph.initializer]}
    nodes, done = [], []
    for node in graph.node:
        pair = [_scalar_string(n, scope) for n in node.input[1:3]] \
            if node.op_type == "Where" and is_default_domain(node.domain) and len(node.input) == 3 else [None]
        if any(v is None for v in pair):
            nodes.append(node)
            continue
        base = node.name or node.output[0]
        table, index = fresh_name(taken, f"{base}_strings"), fresh_name(taken, f"{base}_index")
        strings = np.array([pair[1].item(), pair[0].item()], dtype=object)  # index 1 where c holds
        graph.initializer.append(numpy_helper.from_array(strings, table))
        nodes += [helper.make_node("Cast", [node.input[0]], [index], name=index, to=onnx.TensorProto.INT64),
                  helper.make_node("Gather", [table, index], [node.output[0]], name=node.name, axis=0)]
        done.append(base)
    if not done:
        return []
    del graph.node[:]
    graph.node.extend(nodes)
    return [f"{len(done)} Where node(s) choosing between two string constants written as a Gather of the two by "
            f"the condition ({release} has no SELECT on strings): {first_few(repr(n) for n in done)}"]
