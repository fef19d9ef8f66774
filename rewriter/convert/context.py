"""The view of a conversion that an adapter gets for one node.

An adapter ``fn(node, ctx)`` handles one schema step ``ctx.step = (from_version, to_version)``
of ``node``'s op. It may change the node in place, add constants, insert new nodes before
or after it, or remove it (when inserted nodes now produce its outputs). Inserted nodes are
built valid at opset ``to_version``; the engine then converts them onward to the target.
An impossible step raises ``ConversionError(reason)`` (``ctx.block(reason)``): the engine
adds the node, the op and the step, and collects every blocker before failing.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.convert.model_state import ConversionState
from rewriter.errors import ConversionError
from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain
from rewriter.graph.constants import constant_node_value, constant_value

__all__ = ["NodeContext"]


# ops whose first output has their first input's rank, whatever the shapes
_RANK_KEEPING = frozenset({"QuantizeLinear", "DequantizeLinear", "Identity", "Cast", "Relu", "Sigmoid", "Tanh",
                           "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Erf",
                           "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus", "Dropout"})
_RANK_DEPTH = 16

class NodeContext:
    """The view of the conversion that an adapter gets for one node."""

    def __init__(self, state: ConversionState, node: onnx.NodeProto, scope: traversal.Scope,
                 step: tuple[int, int] = (0, 0), final_opset: int | None = None):
        self._state, self._node, self.scope = state, node, scope
        self._label: str | None = None
        self.step = step
        self.final_opset = final_opset  # the opset the whole conversion goes to
        self.at_target: set[int] = set()  # id() of inserted nodes written for the target opset
        self.before: list[onnx.NodeProto] = []  # inserted before the node, in order
        self.after: list[onnx.NodeProto] = []  # inserted after the node, in order
        self.removed = False

    @property
    def label(self) -> str:
        """How messages name the node (made when a message needs it: unnamed nodes are found
        by their position, which takes a walk of the body)."""
        if self._label is None:
            self._label = traversal.node_label(self._node, self.scope)
        return self._label

    @property
    def going_down(self) -> bool:
        return self.step[1] < self.step[0]

    @property
    def node(self) -> onnx.NodeProto:
        return self._node

    @property
    def model(self) -> onnx.ModelProto:
        """The model being converted (its graph inputs, for a refusal that names them)."""
        return self._state.model

    def block(self, reason: str):
        """Refuse this step: ``reason`` says why (the engine adds node, op and step)."""
        raise ConversionError(reason)

    # ------------------------------------------------------------ what is known of values

    def shape(self, name: str) -> list[int | None] | None:
        """The dims of ``name`` (None for a symbolic dim), or None when the rank is unknown."""
        t = self._type(name)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]

    def value_type(self, name: str) -> onnx.TypeProto | None:
        """The full TypeProto of ``name`` when known (tensor, sequence, optional)."""
        return self._type(name)

    def _type(self, name: str) -> onnx.TypeProto | None:
        """The type of ``name``: from ONNX's inference, else (values behind com.microsoft ops)
        from ONNX Runtime's (``ConversionState.learn_types``)."""
        t = self._state.types_for(self.scope).get(name)
        if t is None and name and self._state.learn_types(self.scope):
            t = self._state.types_for(self.scope).get(name)
        return t

    def set_type(self, name: str, type_proto: onnx.TypeProto) -> None:
        """Record the type of a value an adapter made (so later steps can read its rank)."""
        self._state.add_types(self.scope, {name: type_proto})

    # ------------------------------------------------------------ new names and nodes

    def fresh_name(self, hint: str) -> str:
        """A value name not used anywhere in the model."""
        return self._state.fresh_name(hint)

    def make_node(self, op_type: str, inputs, outputs, **attrs) -> onnx.NodeProto:
        """A default-domain node with a fresh unique name; ``outputs`` may be an int (that many
        fresh value names)."""
        if isinstance(outputs, int):
            outputs = [self.fresh_name(f"{self._node.name or op_type}_{op_type}_out") for _ in range(outputs)]
        node = onnx.helper.make_node(op_type, list(inputs), list(outputs),
                                     name=self._state.fresh_node_name(f"{self._node.name or op_type}_{op_type}"),
                                     **attrs)
        return node

    def insert_before(self, op_type: str, inputs, outputs=1, **attrs) -> onnx.NodeProto:
        """Insert a node before this one (valid at opset ``step[1]``); returns it."""
        node = self.make_node(op_type, inputs, outputs, **attrs)
        self.before.append(node)
        return node

    def insert_before_at_target(self, op_type: str, inputs, outputs=1, **attrs) -> onnx.NodeProto:
        """Insert a node before this one that is written for the target opset (``self.final_opset``),
        not for ``step[1]``: for rewrites that need an op the step's destination lacks but the
        target has (the adapter checks the target); the engine takes it no further."""
        node = self.insert_before(op_type, inputs, outputs, **attrs)
        self.at_target.add(id(node))
        return node

    def insert_after(self, op_type: str, inputs, outputs=1, **attrs) -> onnx.NodeProto:
        """Insert a node after this one (valid at opset ``step[1]``); returns it.

        To wrap an output, first :meth:`redirect_output` it, then insert a node that reads
        the redirected name and produces the original one: the node that ends up producing
        the original first output takes the original node's name.
        """
        node = self.make_node(op_type, inputs, outputs, **attrs)
        self.after.append(node)
        return node

    def redirect_output(self, index: int = 0) -> str:
        """Give the node's output ``index`` a fresh name and return it; the original name is
        then to be produced by a node inserted after."""
        fresh = self.fresh_name(self._node.output[index] + "_pre")
        self._node.output[index] = fresh
        return fresh

    def redirect_input(self, index: int, new_name: str) -> None:
        self._node.input[index] = new_name

    def remove(self) -> None:
        """Drop this node: nodes inserted before it produce its outputs instead."""
        self.removed = True

    def constant(self, name: str) -> np.ndarray | None:
        """The value of ``name`` when it is a constant in scope (an initializer that is not a
        graph input, or a Constant node, also one the conversion made), else None."""
        pending = self._state.pending.get(name)
        if pending is not None:
            return constant_node_value(pending, self._state.read_tensor) if pending.op_type == "Constant" else None
        added = self._state.added_values.get(name)
        if added is not None:
            return added
        key = (id(self.scope.body), name)  # small constants (axes, pads, shapes) are read once
        cached = self._state.small_constants.get(key)
        if cached is not None:
            return cached.copy()
        value = constant_value(name, self.scope, self._state.read_tensor)
        if value is not None and value.size <= 64:
            self._state.small_constants[key] = value.copy()
        return value

    def shape_value(self, name: str) -> np.ndarray | None:
        """The value of ``name`` when static shapes and constants decide it (``Range(0, Size(Shape(x)))``
        with the dims of x known, say), else None. The nodes that computed it are left to the
        removal of unused values."""
        from rewriter.convert.function_bodies import shape_value

        opset = self.final_opset if self.final_opset is not None else self.scope.opset
        value, chain = shape_value(name, self.scope, self._state, opset)
        for computed in chain:
            self.maybe_unused(computed)
        return value

    def rank(self, name: str) -> int | None:
        """The rank of ``name``: from its type, else from what makes it when that fixes the rank
        whatever the shapes (a Flatten makes rank 2; quantization, casts and elementwise unary
        ops keep their input's), as after ``DequantizeLinear(QuantizeLinear(Flatten(x)))``."""
        for _ in range(_RANK_DEPTH):
            t = self._type(name)
            if t is not None and t.tensor_type.HasField("shape"):
                return len(t.tensor_type.shape.dim)
            producer = self._state.pending.get(name)
            if producer is None:
                kind, producer, _ = traversal.definition(name, self.scope)
                if kind != "node":
                    return None
            if not is_default_domain(producer.domain) or not producer.input or not producer.input[0]:
                return None
            if producer.op_type == "Flatten":
                return 2
            if producer.op_type not in _RANK_KEEPING or name != producer.output[0]:
                return None
            name = producer.input[0]
        return None

    def elem_type(self, name: str) -> int | None:
        t = self._type(name)
        return t.tensor_type.elem_type if t is not None else None

    def add_constant(self, hint: str, value: np.ndarray) -> str:
        """A constant visible to the node: an initializer in a graph, a Constant node in a function.

        Nodes of one graph or function that need the same value share one constant.
        """
        key = (id(self.scope.body), value.dtype.str, value.shape, value.tobytes())
        if key in self._state.constants:
            return self._state.constants[key]
        name = self._state.constants[key] = self._state.fresh_name(hint)
        self._state.added_values[name] = value
        tensor = numpy_helper.from_array(value, name)
        self._state.add_types(self.scope, {name: onnx.helper.make_tensor_type_proto(tensor.data_type,
                                                                                    list(tensor.dims))})
        if self.scope.is_function:
            fn = self.scope.body
            fn.node.insert(self._state.function_constants[id(fn)], onnx.helper.make_node(
                "Constant", [], [name], value=tensor))
            self._state.held.append(fn.node[self._state.function_constants[id(fn)]])
            self._state.function_constants[id(fn)] += 1
        else:
            self.scope.body.initializer.append(tensor)
        return name

    def ints_constant(self, prefix: str, values: tuple[int, ...]) -> str:
        """:meth:`add_constant` of a 1-D int64 tensor (axes, sizes), named ``prefix_<values>``;
        equal values in one body share it (looked up before anything is built)."""
        key = (id(self.scope.body), "ints", values)
        name = self._state.constants.get(key)
        if name is None:
            hint = prefix + "_" + "_".join(str(v).replace("-", "m") for v in values)
            name = self._state.constants[key] = self.add_constant(hint, np.array(values, dtype=np.int64))
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
        producer = self._state.pending.get(name)
        kind = "node" if producer is not None else None
        if producer is None:
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
