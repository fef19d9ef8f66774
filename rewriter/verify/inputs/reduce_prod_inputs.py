"""Up-front checks of every ReduceProd of an input model (part of ``validate_model``): axes in
range for the data's rank, no duplicates, an axes input that is a 1-D int64 tensor, keepdims and
noop_with_empty_axes 0 or 1. Ranks come from declarations and constants, else from ONNX shape
inference.

One pass over each body finds its ReduceProd and Constant nodes; constants are looked up in
those and in the initializers, so no index of every node output is built (on big graphs that
costs more than the checks themselves)."""

from __future__ import annotations

import logging

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.errors import RewriterError
from rewriter.graph import traversal
from rewriter.graph.inferred import LazyInference, inferred_model
from rewriter.graph.traversal import Scope, node_label
from rewriter.io import read_external_tensor

__all__ = ["check_reduce_prods", "PendingRankChecks"]

logger = logging.getLogger(__name__)

from rewriter.graph.schemas import DEFAULT_DOMAINS as _DEFAULT  # noqa: E402
_INT, _INTS = onnx.AttributeProto.INT, onnx.AttributeProto.INTS


class PendingRankChecks:
    """Checks of main-graph ReduceProds waiting for the rank of their data (declared nowhere, not
    a constant's): :meth:`finish` runs them with ranks from a later inference that has them (the
    converted model's strict inference, whose data values are the input's), and infers the input
    only for what that leaves unknown, or when its inference has run anyway."""

    def __init__(self, model: onnx.ModelProto, walk: "_Walk", inferred):
        self._model, self._walk, self._inferred = model, walk, inferred
        self.items: list[tuple[onnx.NodeProto, Scope, list[int]]] = []  # (node, scope, its axes)

    def __bool__(self) -> bool:
        return bool(self.items)

    def finish(self, rank_of=None) -> None:
        """Run the waiting checks (RewriterError naming the node on the first bad one).
        ``rank_of``: name -> rank of a main-graph value, or None when unknown."""
        items, self.items = self.items, []
        if not items:
            return
        done = isinstance(self._inferred, LazyInference) and self._inferred.done
        ranks = {}
        if rank_of is not None and not done:
            for node, _, _ in items:
                rank = rank_of(node.input[0])
                if rank is not None:
                    ranks[node.input[0]] = rank
        wanted = {node.input[0] for node, _, _ in items} - set(ranks)
        if wanted:
            found = _inferred_ranks(self._model, wanted, self._inferred, main_only=True)
            ranks.update(found[0] if found else {})
        for node, scope, axes in items:
            self._walk.check_rank(node, scope, axes, ranks.get(node.input[0]))


def check_reduce_prods(model: onnx.ModelProto, scopes: list[Scope], path: str, base_dir: str,
                       inferred=None, defer: bool = False) -> PendingRankChecks | None:
    """Raise RewriterError naming ``path`` and the node for the first malformed ReduceProd.

    ``scopes``: the model's scopes in ``iter_scopes`` order; ``inferred``: the model after ONNX
    shape inference, or a :class:`rewriter.graph.inferred.LazyInference` of it (asked only when a
    rank is neither declared nor a constant's; without one, the model is inferred here then).
    With ``defer`` and a LazyInference not run yet, the rank checks of main-graph ReduceProds
    that need it wait: they are returned (everything else about them is checked now).
    """
    found: list[list[onnx.NodeProto]] = []
    walk = _Walk(path, base_dir)
    for scope in scopes:
        reduce_prods, constants = [], {}
        for node in scope.body.node:
            op = node.op_type
            if op == "ReduceProd":
                if node.domain in _DEFAULT:
                    reduce_prods.append(node)
            elif op == "Constant" and node.output and node.domain in _DEFAULT:
                constants[node.output[0]] = node
        found.append(reduce_prods)
        walk.constants[id(scope)] = constants
    if not any(found):
        return None
    pending = None
    if defer and isinstance(inferred, LazyInference) and not inferred.done:
        pending = PendingRankChecks(model, walk, inferred)
    ranks: list[dict[str, int]] | None = None
    for i, (scope, nodes) in enumerate(zip(scopes, found)):
        for node in nodes:
            if ranks is None and node.input and walk.rank(node.input[0], scope, {}) is None:
                if pending is not None and i == 0 and not scope.is_function:
                    axes = walk.check(node, scope, {})  # all but the rank now; the rank when known
                    if axes:
                        pending.items.append((node, scope, axes))
                    continue
                ranks = _inferred_ranks(model, {n.input[0] for ns in found for n in ns if n.input}, inferred)
            walk.check(node, scope, ranks[i] if ranks and i < len(ranks) else {})
    return pending


def _bad_flag(node: onnx.NodeProto, attr: onnx.AttributeProto, scope: Scope, path: str) -> RewriterError:
    value = attr.i if attr.type == _INT else "a non-integer"
    return RewriterError(f"{path}: {node_label(node, scope)}: {attr.name} must be 0 or 1, got {value}")


def _constant_tensor(node: onnx.NodeProto):
    """The value of a Constant node as a TensorProto (value_ints and the like made one), else None."""
    for attr in node.attribute:
        if attr.name == "value":
            return attr.t
        if attr.name == "value_ints":
            return numpy_helper.from_array(np.array(attr.ints, np.int64))
        if attr.name in ("value_int", "value_float", "value_floats"):
            return numpy_helper.from_array(np.array(attr.i if attr.name == "value_int" else attr.f,
                                                    np.int64 if attr.name == "value_int" else np.float32))
    return None


class _Walk:
    """What the checks of one model share: its Constant nodes and declared types per scope."""

    def __init__(self, path: str, base_dir: str):
        self.path, self.base_dir = path, base_dir
        self.constants: dict[int, dict[str, onnx.NodeProto]] = {}  # id(scope) -> output -> Constant
        self._declared: dict[int, dict[str, onnx.TypeProto.Tensor]] = {}

    def constant(self, name: str, scope: Scope):
        """The TensorProto of a constant ``name`` as seen from ``scope`` (the nearest scope that
        defines it by an input, an initializer or a Constant node), else None."""
        s: Scope | None = scope
        while s is not None:
            if name in s.inputs():
                return None
            tensor = s.initializers().get(name)
            if tensor is not None:
                return tensor
            node = self.constants.get(id(s), {}).get(name)
            if node is not None:
                return _constant_tensor(node)
            s = s.parent
        return None

    def declared(self, name: str, scope: Scope):
        """The declared tensor type of ``name`` (inputs, value_info, outputs of the graphs
        from ``scope`` outwards; function bodies declare nothing), else None."""
        s: Scope | None = scope
        while s is not None:
            if not s.is_function:
                table = self._declared.get(id(s))
                if table is None:
                    table = self._declared[id(s)] = {}
                    for v in (*s.body.input, *s.body.value_info, *s.body.output):
                        if v.type.HasField("tensor_type"):
                            table.setdefault(v.name, v.type.tensor_type)
                found = table.get(name)
                if found is not None:
                    return found
            s = s.parent
        return None

    def rank(self, name: str, scope: Scope, inferred: dict[str, int]) -> int | None:
        tensor = self.constant(name, scope)
        if tensor is not None:
            return len(tensor.dims)
        declared = self.declared(name, scope)
        if declared is not None and declared.HasField("shape"):
            return len(declared.shape.dim)
        return inferred.get(name)

    def check(self, node: onnx.NodeProto, scope: Scope, ranks: dict[str, int]) -> list[int] | None:
        """Check ``node``; returns its axes (None when it has none: it reduces every dim)."""
        path = self.path
        axes_attr = None
        for attr in node.attribute:  # one pass over the attributes
            name = attr.name
            if name == "keepdims" or name == "noop_with_empty_axes":
                if attr.type != _INT or attr.i not in (0, 1):
                    raise _bad_flag(node, attr, scope, path)
            elif name == "axes":
                axes_attr = attr
        axes = None
        if axes_attr is not None:
            if axes_attr.type != _INTS:
                raise RewriterError(f"{path}: {node_label(node, scope)}: the axes attribute must be a list of integers")
            axes = list(axes_attr.ints)
        elif len(node.input) > 1 and node.input[1] and (scope.opset or 0) >= 18:
            label = f"{path}: {node_label(node, scope)}"
            tensor = self.constant(node.input[1], scope)
            if tensor is None:
                declared = self.declared(node.input[1], scope)
                if declared is not None and declared.elem_type not in (0, onnx.TensorProto.INT64):
                    raise RewriterError(f"{label}: axes input must be int64, got "
                                        f"{onnx.TensorProto.DataType.Name(declared.elem_type).lower()}")
                if declared is not None and declared.HasField("shape") and len(declared.shape.dim) != 1:
                    raise RewriterError(f"{label}: axes input must be 1-D, got rank {len(declared.shape.dim)}")
                return None
            if tensor.data_type != onnx.TensorProto.INT64:
                name = onnx.TensorProto.DataType.Name(tensor.data_type).lower() if tensor.data_type else "undefined"
                raise RewriterError(f"{label}: axes input must be int64, got {name}")
            if len(tensor.dims) != 1:
                raise RewriterError(f"{label}: axes input must be 1-D, got rank {len(tensor.dims)}")
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                axes = [int(a) for a in read_external_tensor(tensor, self.base_dir)]
            else:
                axes = [int(a) for a in numpy_helper.to_array(tensor)]
        if not axes:
            return None
        self.check_rank(node, scope, axes, self.rank(node.input[0], scope, ranks) if node.input else None)
        return axes

    def check_rank(self, node: onnx.NodeProto, scope: Scope, axes: list[int], rank: int | None) -> None:
        """Axes in range for the data's rank (when known) and not naming a dim twice."""
        if rank is not None:
            bad = [a for a in axes if not -rank <= a < rank]
            if bad:
                raise RewriterError(f"{self.path}: {node_label(node, scope)}: axes {axes} out of range for data "
                                    f"of rank {rank}")
        normalized = [a % rank for a in axes] if rank else axes
        if len(set(normalized)) != len(normalized):
            raise RewriterError(f"{self.path}: {node_label(node, scope)}: duplicate axes {axes}")


def _inferred_ranks(model: onnx.ModelProto, wanted: set[str], inferred=None, main_only: bool = False
                    ) -> list[dict[str, int]]:
    """Ranks of the ``wanted`` values from ONNX shape inference (``inferred``, when the caller
    has it already), one dict per scope in iter_scopes order (the main graph's alone with
    ``main_only``)."""
    inferred = inferred_model(inferred, model)
    if inferred is None:  # inference trouble is for `check` to report, not a load error
        return []
    ranks = []
    scopes = [traversal.Scope(inferred.graph, "main graph", None, None)] if main_only else \
        traversal.iter_scopes(inferred)
    for scope in scopes:
        found = {}
        if not scope.is_function:
            body = scope.body
            for values in (body.input, body.value_info, body.output):
                for v in values:
                    if v.name in wanted and v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
                        found[v.name] = len(v.type.tensor_type.shape.dim)
        ranks.append(found)
    return ranks
