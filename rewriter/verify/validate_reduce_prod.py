"""Up-front checks of every ReduceProd of an input model (part of ``validate_model``): axes in
range for the data's rank, no duplicates, an axes input that is a 1-D int64 tensor, keepdims and
noop_with_empty_axes 0 or 1. Ranks come from declarations, else from ONNX shape inference."""

from __future__ import annotations

import logging

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.errors import RewriterError
from rewriter.graph import traversal
from rewriter.graph.traversal import Scope, node_label
from rewriter.io import read_external_tensor

__all__ = ["check_reduce_prods"]

logger = logging.getLogger(__name__)


def check_reduce_prods(model: onnx.ModelProto, scopes: list[Scope], path: str, base_dir: str,
                       inferred: onnx.ModelProto | None = None) -> None:
    """Raise RewriterError naming ``path`` and the node for the first malformed ReduceProd.

    ``scopes``: the model's scopes in ``iter_scopes`` order; ``inferred``: the model after ONNX
    shape inference, when the caller has it (inferred here only when a rank is not declared).
    """
    ranks: list[dict[str, int]] | None = None
    declared: dict = {}  # scope -> declared types, built on first use
    for i, scope in enumerate(scopes):
        for node in scope.body.node:
            if node.op_type != "ReduceProd" or node.domain not in ("", "ai.onnx"):
                continue
            if ranks is None and node.input and _rank(node.input[0], scope, {}, declared) is None:
                ranks = _inferred_ranks(model, {n.input[0] for s in scopes for n in s.body.node
                                                if n.op_type == "ReduceProd" and n.input}, inferred)
            scope_ranks = ranks[i] if ranks and i < len(ranks) else {}
            _check_reduce_prod(node, scope, scope_ranks, path, base_dir, declared)


def _int_attr(node: onnx.NodeProto, name: str, scope: Scope, path: str) -> None:
    for attr in node.attribute:
        if attr.name == name:
            if attr.type != onnx.AttributeProto.INT or attr.i not in (0, 1):
                value = attr.i if attr.type == onnx.AttributeProto.INT else "a non-integer"
                raise RewriterError(f"{path}: {node_label(node, scope)}: {name} must be 0 or 1, got {value}")


def _axes_tensor(name: str, scope: Scope):
    """The TensorProto defining a constant ``name`` in scope (value_ints made one), else None."""
    kind, thing, _ = traversal.definition(name, scope)
    if kind == "initializer":
        return thing
    if kind != "node" or thing.op_type != "Constant" or thing.domain not in ("", "ai.onnx"):
        return None
    for attr in thing.attribute:
        if attr.name == "value":
            return attr.t
        if attr.name == "value_ints":
            return numpy_helper.from_array(np.array(attr.ints, np.int64))
        if attr.name in ("value_int", "value_float", "value_floats"):
            return numpy_helper.from_array(np.array(attr.i if attr.name == "value_int" else attr.f,
                                                    np.int64 if attr.name == "value_int" else np.float32))
    return None


def _declarations(scope: Scope, cache: dict) -> dict[str, onnx.TypeProto.Tensor]:
    """The declared tensor types of a graph by name, built once per scope and validation."""
    table = cache.get(id(scope))
    if table is None:
        table = {}
        for v in (*scope.body.input, *scope.body.value_info, *scope.body.output):
            if v.type.HasField("tensor_type"):
                table.setdefault(v.name, v.type.tensor_type)
        cache[id(scope)] = table
    return table


def _declared_type(name: str, scope: Scope, cache: dict):
    s = scope
    while s is not None:
        if not s.is_function:
            found = _declarations(s, cache).get(name)
            if found is not None:
                return found
        s = s.parent
    return None


def _rank(name: str, scope: Scope, inferred: dict[str, int], cache: dict) -> int | None:
    tensor = _axes_tensor(name, scope)
    if tensor is not None:
        return len(tensor.dims)
    declared = _declared_type(name, scope, cache)
    if declared is not None and declared.HasField("shape"):
        return len(declared.shape.dim)
    return inferred.get(name)


def _inferred_ranks(model: onnx.ModelProto, wanted: set[str], inferred: onnx.ModelProto | None = None
                    ) -> list[dict[str, int]]:
    """Ranks of the ``wanted`` values from ONNX shape inference (``inferred``, when the caller
    has it already), one dict per scope in iter_scopes order."""
    if inferred is None:
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception as e:  # inference trouble is for `check` to report, not a load error
            logger.debug("shape inference failed during validation: %s", e)
            return []
    ranks = []
    for scope in traversal.iter_scopes(inferred):
        found = {}
        if not scope.is_function:
            for v in (*scope.body.input, *scope.body.value_info, *scope.body.output):
                if v.name in wanted and v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
                    found[v.name] = len(v.type.tensor_type.shape.dim)
        ranks.append(found)
    return ranks


def _check_reduce_prod(node, scope: Scope, ranks: dict[str, int], path: str, base_dir: str,
                       cache: dict) -> None:
    label = f"{path}: {node_label(node, scope)}"
    _int_attr(node, "keepdims", scope, path)
    _int_attr(node, "noop_with_empty_axes", scope, path)
    axes = None
    attr = next((a for a in node.attribute if a.name == "axes"), None)
    if attr is not None:
        if attr.type != onnx.AttributeProto.INTS:
            raise RewriterError(f"{label}: the axes attribute must be a list of integers")
        axes = list(attr.ints)
    elif len(node.input) > 1 and node.input[1] and (scope.opset or 0) >= 18:
        tensor = _axes_tensor(node.input[1], scope)
        if tensor is None:
            declared = _declared_type(node.input[1], scope, cache)
            if declared is not None and declared.elem_type not in (0, onnx.TensorProto.INT64):
                raise RewriterError(f"{label}: axes input must be int64, got "
                                    f"{onnx.TensorProto.DataType.Name(declared.elem_type).lower()}")
            if declared is not None and declared.HasField("shape") and len(declared.shape.dim) != 1:
                raise RewriterError(f"{label}: axes input must be 1-D, got rank {len(declared.shape.dim)}")
            return
        if tensor.data_type != onnx.TensorProto.INT64:
            name = onnx.TensorProto.DataType.Name(tensor.data_type).lower() if tensor.data_type else "undefined"
            raise RewriterError(f"{label}: axes input must be int64, got {name}")
        if len(tensor.dims) != 1:
            raise RewriterError(f"{label}: axes input must be 1-D, got rank {len(tensor.dims)}")
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
                    axes = [int(a) for a in read_external_tensor(tensor, base_dir)]
        else:
            axes = [int(a) for a in numpy_helper.to_array(tensor)]
    if not axes:
        return
    rank = _rank(node.input[0], scope, ranks, cache) if node.input else None
    if rank is not None:
        bad = [a for a in axes if not -rank <= a < rank]
        if bad:
            raise RewriterError(f"{label}: axes {axes} out of range for data of rank {rank}")
    normalized = [a % rank for a in axes] if rank else axes
    if len(set(normalized)) != len(normalized):
        raise RewriterError(f"{label}: duplicate axes {axes}")
