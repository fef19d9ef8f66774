"""The model as the half-precision rewrite sees it: every node of every graph, with where it
lives, what each value's type is, and who reads it.

ONNX's single static assignment forbids a subgraph to redefine a name of an enclosing scope,
but sibling subgraphs (the bodies of two Loops) may each define the same name:
:func:`unique_subgraph_names` renames those first, so one table per model serves every scope. Model-local function bodies are not
entered: a call is an op of another domain, kept in float32 at its boundary.
"""

from __future__ import annotations

import dataclasses

import onnx
import onnx.shape_inference

from rewriter.graph.traversal import opset_version, subgraphs
from rewriter.io.load import without_big_data
from rewriter.graph.schemas import is_default_domain

__all__ = ["Graphs", "Site", "NodeKey", "elem_of", "unique_subgraph_names"]

FLOAT = onnx.TensorProto.FLOAT
# a node's stable key: (its graph's place in Graphs.sites, its place in that graph); the same
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


class Graphs:
    """Every graph of ``model`` (main graph first, parents before children), the types ONNX
    shape inference gives each value, where each value is defined and who reads it."""

    def __init__(self, model: onnx.ModelProto):
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
                if node.op_type == "Constant" and is_default_domain(node.domain) and node.output:
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


def _defined(graph: onnx.GraphProto) -> list[str]:
    names = [v.name for v in graph.input] + [t.name for t in graph.initializer]
    names += [o for n in graph.node for o in n.output if o]
    return names


def _rename_in(graph: onnx.GraphProto, mapping: dict) -> None:
    """Rename values of ``graph`` and of the graphs nested in it (which may read them)."""
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        v.name = mapping.get(v.name, v.name)
    for t in graph.initializer:
        t.name = mapping.get(t.name, t.name)
    for n in graph.node:
        for i, name in enumerate(n.input):
            if name in mapping:
                n.input[i] = mapping[name]
        for i, name in enumerate(n.output):
            if name in mapping:
                n.output[i] = mapping[name]
        for g in subgraphs(n):
            _rename_in(g, mapping)


def unique_subgraph_names(model: onnx.ModelProto) -> int:
    """Rename, in place, the values a subgraph defines under a name another graph of the model
    defines too (sibling bodies exported from the same code); returns how many were renamed.
    Only names inside subgraphs change: the main graph's inputs, outputs and values keep theirs."""
    taken = set(_defined(model.graph)) | {v.name for v in model.graph.output}
    renamed = 0

    def visit(graph: onnx.GraphProto) -> None:
        nonlocal renamed
        for node in graph.node:
            for g in subgraphs(node):
                mapping = {}
                for name in _defined(g):
                    if name in taken and name not in mapping:
                        base, i = name, 1
                        while f"{base}__{i}" in taken:
                            i += 1
                        mapping[name] = f"{base}__{i}"
                        taken.add(mapping[name])
                    else:
                        taken.add(name)
                if mapping:
                    _rename_in(g, mapping)
                    renamed += len(mapping)
                visit(g)

    visit(model.graph)
    return renamed
