"""The model as the half-precision rewrite sees it: every node of every graph, with where it
lives, what each value's type is, and who reads it.

Names are unique across a model's nested graphs (ONNX's single static assignment covers
subgraphs), so one table per model serves every scope. Model-local function bodies are not
entered: a call is an op of another domain, kept in float32 at its boundary.
"""

from __future__ import annotations

import dataclasses

import onnx
import onnx.shape_inference

from rewriter.graph.traversal import opset_version, subgraphs
from rewriter.io.load import without_big_data

__all__ = ["Graphs", "Site", "elem_of"]

FLOAT = onnx.TensorProto.FLOAT


@dataclasses.dataclass(eq=False)
class Site:
    """One graph of the model: the main graph or a subgraph (``owner`` is the node holding it)."""

    graph: onnx.GraphProto
    owner: onnx.NodeProto | None
    depth: int


def elem_of(type_proto: onnx.TypeProto | None) -> int | None:
    """A tensor type's element type; 0 for a non-tensor type (sequence, map, optional); None unknown."""
    if type_proto is None:
        return None
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        return type_proto.tensor_type.elem_type or None
    if which is None:
        return None
    return 0


class Graphs:
    """Every graph of ``model`` (main graph first, parents before children), the types ONNX
    shape inference gives each value, where each value is defined and who reads it."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.opset = opset_version(model.opset_import)
        self.sites: list[Site] = []
        self.site_of_node: dict[int, Site] = {}
        self.producer: dict[str, onnx.NodeProto] = {}
        self.defined_in: dict[str, Site] = {}
        self.initializer: dict[str, onnx.TensorProto] = {}
        self.graph_inputs: set[str] = set()  # inputs of any graph (a subgraph's too)
        self.graph_outputs: set[str] = set()  # outputs of any graph
        self.readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        self._walk(model.graph, None, 0)
        self.types = self._infer()

    def _walk(self, graph: onnx.GraphProto, owner, depth: int) -> None:
        site = Site(graph, owner, depth)
        self.sites.append(site)
        for v in graph.input:
            self.defined_in[v.name] = site
            self.graph_inputs.add(v.name)
        self.graph_outputs.update(v.name for v in graph.output)
        for t in graph.initializer:
            self.defined_in.setdefault(t.name, site)
            self.initializer[t.name] = t
        for node in graph.node:
            self.site_of_node[id(node)] = site
            for i, name in enumerate(node.input):
                if name:
                    self.readers.setdefault(name, []).append((node, i))
            for name in node.output:
                if name:
                    self.producer[name] = node
                    self.defined_in[name] = site
            for g in subgraphs(node):
                self._walk(g, node, depth + 1)

    def _infer(self) -> dict[str, onnx.TypeProto]:
        try:
            inferred = onnx.shape_inference.infer_shapes(without_big_data(self.model), check_type=False,
                                                         strict_mode=False)
        except Exception:  # noqa: BLE001 - the declared types are all there is then
            inferred = self.model
        types: dict[str, onnx.TypeProto] = {}

        def collect(graph: onnx.GraphProto) -> None:
            for v in list(graph.input) + list(graph.output) + list(graph.value_info):
                if v.type.WhichOneof("value") is not None:
                    types.setdefault(v.name, v.type)
            for t in graph.initializer:
                if t.name not in types:
                    tp = onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims))
                    types[t.name] = tp
            for node in graph.node:
                if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                    elem = _constant_elem(node)
                    if elem and node.output[0] not in types:
                        types[node.output[0]] = onnx.helper.make_tensor_type_proto(elem, None)
                for g in subgraphs(node):
                    collect(g)

        collect(inferred.graph)
        collect(self.model.graph)  # what inference dropped, as declared
        return types

    def elem(self, name: str) -> int | None:
        """The value's element type in the source model (None when unknown)."""
        return elem_of(self.types.get(name))

    def is_constant(self, name: str) -> bool:
        """An initializer that is not a graph input, or a Constant node's output (not from a
        function attribute)."""
        if name in self.initializer:
            return name not in self.graph_inputs
        node = self.producer.get(name)
        return node is not None and is_constant_node(node)


def is_constant_node(node: onnx.NodeProto) -> bool:
    return (node.op_type == "Constant" and node.domain in ("", "ai.onnx")
            and not any(a.ref_attr_name for a in node.attribute))


def _constant_elem(node: onnx.NodeProto) -> int | None:
    for a in node.attribute:
        if a.name == "value":
            return a.t.data_type
        if a.name in ("value_float", "value_floats"):
            return FLOAT
        if a.name in ("value_int", "value_ints"):
            return onnx.TensorProto.INT64
        if a.name in ("value_string", "value_strings"):
            return onnx.TensorProto.STRING
    return None
