"""The view of a conversion that an adapter gets for one node."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.convert.state import ConversionState
from rewriter.graph import traversal
from rewriter.graph.constants import constant_value

__all__ = ["NodeContext"]


class NodeContext:
    """The view of the conversion that an adapter gets for one node."""

    def __init__(self, state: ConversionState, node: onnx.NodeProto, scope: traversal.Scope):
        self._state, self._node, self.scope = state, node, scope
        self.label = traversal.node_label(node, scope)

    def constant(self, name: str) -> np.ndarray | None:
        return constant_value(name, self.scope, self._state.read_tensor)

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

    def add_constant_reference(self, hint: str, attribute: str) -> str:
        """A Constant node in this function whose ``value_ints`` is the function's attribute."""
        root = self.scope.root
        if not root.is_function:
            raise ValueError("attribute references exist only inside functions")
        fn = root.body
        name = self._state.fresh_name(hint)
        const = onnx.helper.make_node("Constant", [], [name])
        const.attribute.append(onnx.AttributeProto(name="value_ints", ref_attr_name=attribute,
                                                   type=onnx.AttributeProto.INTS))
        position = self._state.function_constants[id(fn)]
        fn.node.insert(position, const)
        self._state.held.append(fn.node[position])
        self._state.function_constants[id(fn)] += 1
        return name

    def constant_reference(self, name: str) -> str | None:
        """The function attribute that ``name`` holds when it is Constant<value_ints = @attr>."""
        kind, producer, _ = traversal.definition(name, self.scope)
        if kind == "node" and producer.op_type == "Constant":
            for a in producer.attribute:
                if a.name == "value_ints" and a.ref_attr_name:
                    return a.ref_attr_name
        return None

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
