"""One index of a model, built once and read by every feature: its scopes (every graph, the
main one first, parents before children), each node's stable key, each value's producer, defining
scope and readers, the initializers, the types from one lenient ONNX shape inference, and fresh
names. Model-local function bodies are not entered (a call is a node like another).

ONNX's single static assignment forbids a subgraph to redefine a name of an enclosing scope, but
sibling subgraphs may each define the same name: a feature that needs one table per model renames
those first (:func:`rewriter.precision.graphs.unique_subgraph_names`).
"""

from __future__ import annotations

import dataclasses

import onnx
import onnx.shape_inference

from rewriter.graph.names import fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.graph.traversal import opset_version, subgraphs

__all__ = ["ModelIndex", "Site", "NodeKey", "elem_of", "is_constant_node", "value_types", "FLOAT"]

FLOAT = onnx.TensorProto.FLOAT
# a node's stable key: (its graph's place in ModelIndex.sites, its place in that graph); the same
# for the same model however often it is loaded or converted (--max-error's trials)
NodeKey = tuple[int, int]


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


class ModelIndex:
    """Every graph of ``model`` (main graph first, parents before children), the types ONNX
    shape inference gives each value (``types``: given, as computed for an identical model, or
    inferred once here), where each value is defined and who reads it."""

    def __init__(self, model: onnx.ModelProto, types: dict | None = None):
        self.model = model
        self.opset = opset_version(model.opset_import)
        self.sites: list[Site] = []
        self.site_of_node: dict[int, Site] = {}
        self._keys: dict[int, NodeKey] = {}  # id(node) -> its key, while the model is as indexed
        self.producer: dict[str, onnx.NodeProto] = {}
        self.defined_in: dict[str, Site] = {}
        self.initializer: dict[str, onnx.TensorProto] = {}
        self.graph_inputs: set[str] = set()  # inputs of any graph (a subgraph's too)
        self.graph_outputs: set[str] = set()  # outputs of any graph
        self.readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        self._walk(model.graph, None, 0)
        self.types = dict(types) if types is not None else value_types(model)

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
        index = len(self.sites) - 1
        for position, node in enumerate(graph.node):
            self.site_of_node[id(node)] = site
            self._keys[id(node)] = (index, position)
            for i, name in enumerate(node.input):
                if name:
                    self.readers.setdefault(name, []).append((node, i))
            for name in node.output:
                if name:
                    self.producer[name] = node
                    self.defined_in[name] = site
            for g in subgraphs(node):
                self._walk(g, node, depth + 1)

    def key(self, node: onnx.NodeProto) -> NodeKey | None:
        """``node``'s stable key (:data:`NodeKey`); None for a node made after the indexing."""
        return self._keys.get(id(node))

    def nodes(self):
        """(key, node) for every node, the main graph's first, then each subgraph's in order."""
        for site in self.sites:
            for node in site.graph.node:
                yield self._keys[id(node)], node

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

    def fresh_names(self):
        """A name maker for values and nodes added to the model: each name unused by any value,
        initializer or node of any graph (as the model is now), nor by one it made before."""
        used = set(self.producer) | set(self.defined_in) | set(self.initializer)
        used |= {n.name for s in self.sites for n in s.graph.node if n.name}
        return lambda base, first=1: fresh_name(used, base, first)


def is_constant_node(node: onnx.NodeProto) -> bool:
    return (node.op_type == "Constant" and is_default_domain(node.domain)
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


def value_types(model: onnx.ModelProto, inferred: onnx.ModelProto | None = None) -> dict[str, onnx.TypeProto]:
    """Each value's type: from ``inferred`` (the model after an inference already run), else from
    ONNX's lenient shape inference run here (big tensors left out), else as declared (inputs,
    outputs, value_info, initializers, Constant values)."""
    from rewriter.io.load import without_big_data

    if inferred is None:
        try:
            inferred = onnx.shape_inference.infer_shapes(without_big_data(model), check_type=False,
                                                         strict_mode=False)
        except Exception:  # noqa: BLE001 - the declared types are all there is then
            inferred = model
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
            if node.op_type == "Constant" and is_default_domain(node.domain) and node.output:
                elem = _constant_elem(node)
                if elem and node.output[0] not in types:
                    types[node.output[0]] = onnx.helper.make_tensor_type_proto(elem, None)
            for g in subgraphs(node):
                collect(g)

    collect(inferred.graph)
    collect(model.graph)  # what inference dropped, as declared
    return types
