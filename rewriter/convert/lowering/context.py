"""What a lowering sees of its node: attributes (refusing function-attribute references), the
inferred element types and shapes of its inputs and outputs, which outputs anything reads, and the
:class:`~rewriter.convert.lowering.emit.Emitter` its nodes go to."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.convert.lowering.emit import Emitter
from rewriter.convert.lowering.registry import Blocked
from rewriter.graph.attributes import attribute_values

__all__ = ["ValueInfo", "NodeContext", "type_name"]


def type_name(elem: int | None) -> str:
    if elem is None:
        return "an unknown type"
    try:
        return onnx.TensorProto.DataType.Name(elem).lower()
    except ValueError:
        return f"element type {elem}"


@dataclasses.dataclass(frozen=True)
class ValueInfo:
    """A tensor's element type and shape as far as inference knows (dims: int, str or None)."""

    elem: int | None
    shape: tuple | None  # None: rank unknown

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def dim(self, i: int):
        """Dimension ``i`` (negative from the end) when static, else None."""
        if self.shape is None or not -len(self.shape) <= i < len(self.shape):
            return None
        d = self.shape[i]
        return d if isinstance(d, int) else None


UNKNOWN = ValueInfo(None, None)


def value_info(tp: onnx.TypeProto | None) -> ValueInfo:
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return UNKNOWN
    t = tp.tensor_type
    elem = t.elem_type or None
    if not t.HasField("shape"):
        return ValueInfo(elem, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim)
    return ValueInfo(elem, dims)


class NodeContext:
    """One node being lowered."""

    def __init__(self, node: onnx.NodeProto, label: str, types: dict, read: set, emit: Emitter,
                 domain_version: int = 1, scope=None):
        self.node = node
        self.scope = scope  # the graph or function it lies in (constant inputs), None when not given
        self.domain_version = domain_version  # the node's domain's opset in its scope
        self.label = label
        self.emit = emit
        self._types = types
        self._read = read  # names some node or graph output reads
        self.attrs = self._attributes(node)
        self.exactness: str | None = None  # a lowering may say more than its registered exactness

    def _attributes(self, node: onnx.NodeProto) -> dict:
        for a in node.attribute:
            if a.ref_attr_name:
                raise Blocked(f"attribute {a.name!r} refers to the function attribute {a.ref_attr_name!r}, "
                              "whose value is known only at the call site")
        return attribute_values(node)

    def derived(self, node: onnx.NodeProto) -> "NodeContext":
        """A context for ``node``, an equivalent rewrite of this context's node (same values, same emitter)."""
        return NodeContext(node, self.label, self._types, self._read, self.emit, self.domain_version)

    def declare(self, name: str, elem: int, shape) -> None:
        """Record the type of a value this lowering made, for a derived context to read."""
        self._types[name] = helper.make_tensor_type_proto(elem, shape)

    # -- refusing -----------------------------------------------------------------------------------

    @staticmethod
    def block(reason: str):
        raise Blocked(reason)

    def known(self, *names: str) -> None:
        """Refuse attributes outside ``names`` (their meaning here would be a guess)."""
        unknown = sorted(set(self.attrs) - set(names))
        if unknown:
            self.block(f"attribute(s) {', '.join(unknown)} not understood by this lowering")

    # -- attributes ---------------------------------------------------------------------------------

    def attr(self, name: str, default=None):
        v = self.attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    def floats(self, name: str) -> np.ndarray:
        return np.asarray(list(self.attrs.get(name, [])), dtype=np.float32)

    def ints(self, name: str) -> np.ndarray:
        return np.asarray(list(self.attrs.get(name, [])), dtype=np.int64)

    def strings(self, name: str) -> list[str]:
        return [s.decode() if isinstance(s, bytes) else s for s in self.attrs.get(name, [])]

    def tensor(self, name: str) -> np.ndarray | None:
        t = self.attrs.get(name)
        return None if t is None else numpy_helper.to_array(t)

    # -- values -------------------------------------------------------------------------------------

    def name(self, i: int) -> str | None:
        """Input ``i``'s name, or None when the node does not give that (optional) input."""
        return self.node.input[i] if i < len(self.node.input) and self.node.input[i] else None

    def input(self, i: int = 0) -> ValueInfo:
        if i >= len(self.node.input) or not self.node.input[i]:
            return UNKNOWN
        return value_info(self._types.get(self.node.input[i]))

    def constant(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value when it is a constant in scope (an initializer that is no graph input,
        a Constant node; nearest scope first), else None."""
        if self.scope is None or i >= len(self.node.input) or not self.node.input[i]:
            return None
        from rewriter.graph.constants import constant_value

        from rewriter.io.load import tensor_reader

        try:  # external data through the directory a loaded model's tensors carry
            return constant_value(self.node.input[i], self.scope, tensor_reader(None))
        except (ValueError, OSError):  # external data not loaded
            return None

    def output(self, i: int = 0) -> ValueInfo:
        if i >= len(self.node.output) or not self.node.output[i]:
            return UNKNOWN
        return value_info(self._types.get(self.node.output[i]))

    def input_elem(self, allowed: dict[int, str] | None = None, i: int = 0) -> int:
        """Input ``i``'s element type; refused when unknown or outside ``allowed``."""
        elem = self.input(i).elem
        if elem is None:
            self.block(f"the element type of input {self.node.input[i]!r} is unknown (shape inference "
                       "does not reach it)")
        if allowed is not None and elem not in allowed:
            self.block(f"input type {type_name(elem)} is not one ONNX Runtime's kernel takes "
                       f"({', '.join(allowed.values())})")
        return elem

    def used(self, i: int) -> bool:
        """Whether output ``i`` exists and something reads it (a node, a subgraph or a graph output)."""
        return i < len(self.node.output) and bool(self.node.output[i]) and self.node.output[i] in self._read

    def out(self, i: int) -> str | None:
        """Output ``i``'s name when it is read, else None (nothing need compute it)."""
        return self.node.output[i] if self.used(i) else None
