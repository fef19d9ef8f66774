"""``Flatten`` / ``as_reshape`` (``rewrite_forms``; tract 0.23's data): tract refuses a Flatten
whose input has two or more dims that are not static ("Can not compute a shape with square of
symbols": gpt2's and bert's legacy exports flatten the attention mask [batch, 1, 1, seq]), and runs
a Reshape whose shape it computes from the input's Shape by Slice, Mul and Concat.  Such a Flatten
of axis ``a`` over an input of rank ``r`` is written here as that Reshape, to
[d0 * ... * d(a-1), da * ... * d(r-1)], each product a chain of Muls of one-element Slices of the
Shape (an empty product is the constant [1]), with ``allowzero`` 1 so that a dim of 0 stays a
length: the same values, element for element, for every input.  A Flatten whose input rank shape
inference does not tell, or in a scope below opset 14 (no ``allowzero``), is left as it is; so
``convert --target`` takes such a model to opset 14 at least for a release with this form
(:func:`symbolic_flattens`).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.graph.static_shapes import is_dynamic
from rewriter.targets.node_splice import splice, taken_names

__all__ = ["MIN_OPSET", "flatten_as_reshape", "symbolic_flattens"]

MIN_OPSET = 14  # Reshape's allowzero


def _symbolic_rank(node: onnx.NodeProto, types: dict) -> int | None:
    """The rank of the Flatten's input when two or more of its dims are not static, else None."""
    t = types.get(node.input[0])
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = list(t.tensor_type.shape.dim)
    return len(dims) if sum(is_dynamic(d) for d in dims) >= 2 else None


def symbolic_flattens(model: onnx.ModelProto, inferred=None) -> list[str]:
    """Labels of the Flatten nodes (any scope) over two or more dims that are not static."""
    types = value_types(model, inferred)
    return [traversal.node_label(node, scope) for scope in traversal.iter_scopes(model) for node in scope.body.node
            if node.op_type == "Flatten" and is_default_domain(node.domain) and _symbolic_rank(node, types) is not None]


def _as_reshape(node: onnx.NodeProto, rank: int, taken: set) -> list[onnx.NodeProto]:
    """``node`` (a Flatten of an input of rank ``rank``) as Shape, Slices, Muls, Concat, Reshape;
    the Reshape keeps the Flatten's name and output."""
    base = node.name or node.output[0]
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    axis = axis + rank if axis < 0 else axis

    def name(tag: str) -> str:
        return fresh_name(taken, f"{base}_flat_{tag}")

    def const(tag: str, values: list) -> tuple[str, onnx.NodeProto]:
        out = name(tag)
        return out, helper.make_node("Constant", [], [out], name=name(f"{tag}_node"),
                                     value=numpy_helper.from_array(np.array(values, np.int64), out))

    shape = name("shape")
    nodes = [helper.make_node("Shape", [node.input[0]], [shape], name=name("shape_node"))]

    def product(lo: int, hi: int, tag: str) -> str:
        if lo == hi:
            out, made = const(f"{tag}_one", [1])
            nodes.append(made)
            return out
        total = None
        for i in range(lo, hi):
            (start, a), (end, b) = const(f"{tag}{i}_start", [i]), const(f"{tag}{i}_end", [i + 1])
            dim = name(f"{tag}{i}")
            nodes.extend([a, b, helper.make_node("Slice", [shape, start, end], [dim], name=name(f"{tag}{i}_slice"))])
            if total is not None:
                prod = name(f"{tag}{i}_prod")
                nodes.append(helper.make_node("Mul", [total, dim], [prod], name=name(f"{tag}{i}_mul")))
                dim = prod
            total = dim
        return total

    head, tail = product(0, axis, "head"), product(axis, rank, "tail")
    target = name("target")
    nodes.append(helper.make_node("Concat", [head, tail], [target], name=name("concat"), axis=0))
    nodes.append(helper.make_node("Reshape", [node.input[0], target], [node.output[0]], name=node.name, allowzero=1))
    return nodes


def flatten_as_reshape(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each Flatten over two or more dims that are not static (opset 14 or later,
    input rank known) as the Reshape of the module's docstring; one note naming them."""
    types = value_types(model, inferred)
    taken = taken_names(model)
    plans, done = [], []
    for scope in traversal.iter_scopes(model):
        if scope.opset is None or scope.opset < MIN_OPSET:
            continue
        found = {i: rank for i, node in enumerate(scope.body.node)
                 if node.op_type == "Flatten" and is_default_domain(node.domain)
                 and (rank := _symbolic_rank(node, types)) is not None}
        if found:
            plans.append((scope, found))
    for scope, found in reversed(plans):  # a subgraph before the graph whose node holds it
        done += splice(scope, found, lambda node, rank: _as_reshape(node, rank, taken))
    if not done:
        return []
    return [f"{len(done)} Flatten node(s) over two or more dims that are not static written as a Reshape to "
            f"the products of the input's Shape (which {release} computes; it refuses the Flatten): "
            f"{first_few(repr(n) for n in done)}"]
