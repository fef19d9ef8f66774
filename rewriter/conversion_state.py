"""What the ReduceProd adapters of one conversion share, and the view each adapter gets.

``ConversionState`` holds the model copy, the scopes (walked once), the types from shape
inference (computed only when an adapter asks, and for function bodies at their call
sites), fresh names and the constants added so far. ``NodeContext`` is what an adapter in
``rewriter.adapters`` sees for one node.
"""

from __future__ import annotations

import collections
import logging

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter import traversal

__all__ = ["ConversionState", "NodeContext"]

logger = logging.getLogger(__name__)


class ConversionState:
    """What the adapters of one conversion share: the model copy, shape info, new names."""

    def __init__(self, model: onnx.ModelProto, original: onnx.ModelProto, base_dir, report):
        self.model = model
        self.original = original
        self.base_dir = base_dir
        self.report = report
        self._types: dict[str, onnx.TypeProto] | None = None
        self._inferred: onnx.ModelProto | None = None
        self._function_types: dict[tuple[str, str], dict[str, onnx.TypeProto]] = {}
        self._names: set[str] | None = None
        self.scopes = list(traversal.iter_scopes(model))  # walked once: the walk costs on big graphs
        self.function_constants: dict[int, int] = collections.defaultdict(int)  # inserted so far
        self.constants: dict[tuple, str] = {}
        # Nodes already in target form, kept out of onnx.version_converter's reach.
        self.held: list[onnx.NodeProto] = []
        self.maybe_unused: list[tuple[str, traversal.Scope]] = []

    def types(self) -> dict[str, onnx.TypeProto]:
        """Value types in the original model's graphs after (lenient) shape inference, by name."""
        if self._types is None:
            self._inferred = _infer(self.original)
            types: dict[str, onnx.TypeProto] = {}
            for scope in traversal.iter_scopes(self._inferred):
                if not scope.is_function:
                    _collect_types(scope.body, types)
            self._types = types
        return self._types

    def types_for(self, scope: traversal.Scope) -> dict[str, onnx.TypeProto]:
        """Types as seen from ``scope``: the graphs' own, or a function body's at its call sites."""
        root = scope
        while root.parent is not None:
            root = root.parent
        if not root.is_function:
            return self.types()
        key = (root.body.domain, root.body.name)
        if key not in self._function_types:
            self._function_types[key] = self._infer_function(root.body)
        return self._function_types[key]

    def _infer_function(self, fn: onnx.FunctionProto) -> dict[str, onnx.TypeProto]:
        """Infer a function body at each call site in the graphs; keep what every call agrees on."""
        graph_types = self.types()
        agreed: dict[str, onnx.TypeProto] | None = None
        for scope in traversal.iter_scopes(self._inferred):
            if scope.is_function:
                continue
            for call in scope.body.node:
                if call.op_type != fn.name or call.domain != fn.domain:
                    continue
                inputs = [onnx.helper.make_value_info(formal, graph_types[actual])
                          for formal, actual in zip(fn.input, call.input) if actual in graph_types]
                if len(inputs) != len(fn.input):
                    return {}
                body = onnx.helper.make_graph(list(fn.node), fn.name, inputs,
                                              [onnx.helper.make_empty_tensor_value_info(o) for o in fn.output])
                shell = onnx.helper.make_model(body, opset_imports=list(self.original.opset_import),
                                               functions=list(self.original.functions))
                shell.ir_version = self.original.ir_version
                found: dict[str, onnx.TypeProto] = {}
                _collect_types(_infer(shell).graph, found)
                if agreed is None:
                    agreed = found
                else:
                    merged = {k: _common_type(v, found.get(k)) for k, v in agreed.items()}
                    agreed = {k: v for k, v in merged.items() if v is not None}
        return agreed or {}

    def fresh_name(self, hint: str) -> str:
        if self._names is None:
            names = set()  # every defined name: node outputs, graph inputs, initializers
            for scope in self.scopes:
                for n in scope.body.node:
                    names.update(n.output)
                if scope.is_function:
                    names.update(scope.body.input)
                else:
                    names.update(t.name for t in scope.body.initializer)
                    names.update(v.name for v in scope.body.input)
            self._names = names
        name, i = hint, 0
        while name in self._names:
            i += 1
            name = f"{hint}_{i}"
        self._names.add(name)
        return name


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception as e:  # inference failures only cost us information here
        logger.info("shape inference failed: %s", e)
        return model


def _common_type(a: onnx.TypeProto, b: onnx.TypeProto | None) -> onnx.TypeProto | None:
    """What two call sites agree on: the element type and, when it matches, the rank."""
    if b is None or a.tensor_type.elem_type != b.tensor_type.elem_type:
        return None
    if a == b:
        return a
    ta, tb = a.tensor_type, b.tensor_type
    if ta.HasField("shape") and tb.HasField("shape") and len(ta.shape.dim) == len(tb.shape.dim):
        return onnx.helper.make_tensor_type_proto(ta.elem_type, [None] * len(ta.shape.dim))
    return onnx.helper.make_tensor_type_proto(ta.elem_type, None)


def _collect_types(graph: onnx.GraphProto, types: dict[str, onnx.TypeProto]) -> None:
    for t in graph.initializer:
        types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.type.HasField("tensor_type"):
            types.setdefault(vi.name, vi.type)


class NodeContext:
    """The view of the conversion that an adapter gets for one node."""

    def __init__(self, state: ConversionState, node: onnx.NodeProto, scope: traversal.Scope):
        self._state, self._node, self.scope = state, node, scope
        self.label = traversal.node_label(node, scope)

    def constant(self, name: str) -> np.ndarray | None:
        return traversal.constant_value(name, self.scope, self._state.base_dir)

    def rank(self, name: str) -> int | None:
        t = self._state.types_for(self.scope).get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            return None
        return len(t.tensor_type.shape.dim)

    def elem_type(self, name: str) -> int | None:
        t = self._state.types_for(self.scope).get(name)
        return t.tensor_type.elem_type if t is not None else None

    def add_constant(self, hint: str, value: np.ndarray) -> str:
        """A constant visible to the node: an initializer in a graph, a Constant node in a function.

        Nodes of one graph or function that need the same value share one constant.
        """
        key = (id(self.scope.body), value.dtype.str, value.shape, value.tobytes())
        if key in self._state.constants:
            return self._state.constants[key]
        name = self._state.constants[key] = self._state.fresh_name(hint)
        tensor = numpy_helper.from_array(value, name)
        if self.scope.is_function:
            fn = self.scope.body
            fn.node.insert(self._state.function_constants[id(fn)], onnx.helper.make_node(
                "Constant", [], [name], value=tensor))
            self._state.held.append(fn.node[self._state.function_constants[id(fn)]])
            self._state.function_constants[id(fn)] += 1
        else:
            self.scope.body.initializer.append(tensor)
        return name

    def to_identity(self, node: onnx.NodeProto) -> None:
        data = node.input[0]
        del node.input[:]
        node.input.append(data)
        del node.attribute[:]
        node.op_type = "Identity"

    def maybe_unused(self, name: str) -> None:
        self._state.maybe_unused.append((name, self.scope))

    def record(self, kind: str) -> None:
        self._state.report.changes[kind] += 1
