"""Walk a ModelProto: every node in the main graph, in subgraphs and in model-local functions.

Each node comes with its :class:`Scope`: the graph or function that holds it, where that
is (for messages), the enclosing scope (for outer-scope constants) and the opset that
applies to it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

import onnx

from rewriter.graph.schemas import DEFAULT_DOMAINS, is_default_domain

__all__ = [
    "GRAPH_KINDS",
    "TENSOR_KINDS",
    "Scope",
    "iter_scopes",
    "opset_version",
    "node_label",
    "definition",
    "subgraphs",
    "all_nodes",
    "subgraph_scopes",
]


@dataclasses.dataclass(eq=False)
class Scope:
    """A graph or a function body, with where it lives and what encloses it."""

    body: onnx.GraphProto | onnx.FunctionProto
    location: str
    parent: Scope | None
    opset: int | None  # default-domain opset in force, None when the domain is not imported
    _producers: dict[str, onnx.NodeProto] | None = dataclasses.field(default=None, repr=False)
    _initializers: dict[str, onnx.TensorProto] | None = dataclasses.field(default=None, repr=False)
    _inputs: frozenset[str] | None = dataclasses.field(default=None, repr=False)

    @property
    def is_function(self) -> bool:
        return isinstance(self.body, onnx.FunctionProto)

    @property
    def root(self) -> Scope:
        """The main graph or function body this scope lies in."""
        s = self
        while s.parent is not None:
            s = s.parent
        return s

    def producers(self) -> dict[str, onnx.NodeProto]:
        if self._producers is None:
            self._producers = {o: n for n in self.body.node for o in n.output if o}
        return self._producers

    def initializers(self) -> dict[str, onnx.TensorProto]:
        if self._initializers is None:
            inits = {} if self.is_function else {t.name: t for t in self.body.initializer}
            self._initializers = inits
        return self._initializers

    def inputs(self) -> frozenset[str]:
        if self._inputs is None:
            if self.is_function:
                self._inputs = frozenset(self.body.input)
            else:
                self._inputs = frozenset(v.name for v in self.body.input)
        return self._inputs

    def invalidate(self) -> None:
        """Forget cached lookups after the body was changed."""
        self._producers = self._initializers = self._inputs = None


def opset_version(opset_import, domain: str = "") -> int | None:
    """The version imported for ``domain`` ('' and 'ai.onnx' are the same), or None."""
    for entry in opset_import:
        if entry.domain in (DEFAULT_DOMAINS if is_default_domain(domain) else (domain,)):
            return entry.version
    return None


_A = onnx.AttributeProto
GRAPH_KINDS = frozenset({_A.GRAPH, _A.GRAPHS})
TENSOR_KINDS = frozenset({_A.TENSOR, _A.TENSORS, _A.SPARSE_TENSOR, _A.SPARSE_TENSORS})


@functools.lru_cache(maxsize=None)
def _default_ops_with(kinds: frozenset) -> frozenset:
    return frozenset(s.name for s in onnx.defs.get_all_schemas_with_history()
                     if is_default_domain(s.domain) and any(a.type in kinds for a in s.attributes.values()))


def ops_with(kinds: frozenset) -> frozenset:
    """The default-domain ops whose schemas declare an attribute of one of ``kinds``: for loops
    that test many nodes (``not is_default_domain(node.domain) or node.op_type in ops_with(k)``)."""
    return _default_ops_with(kinds)


def attribute_graphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    """The graphs one attribute holds: its ``g`` (GRAPH), its ``graphs`` (GRAPHS), else none."""
    if attr.type == _A.GRAPH:
        return [attr.g]
    return list(attr.graphs) if attr.type == _A.GRAPHS else []


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held by ``node``'s attributes (If branches, Loop and Scan bodies, ...)."""
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def all_nodes(graph_like) -> Iterator[onnx.NodeProto]:
    """Every node of a graph or function body and, depth first, of its subgraphs."""
    for node in graph_like.node:
        yield node
        for g in subgraphs(node):
            yield from all_nodes(g)


def _subgraph_scopes(graph_like, scope: Scope) -> Iterator[Scope]:
    holders = _default_ops_with(GRAPH_KINDS)
    for node in graph_like.node:
        domain = node.domain
        if domain in DEFAULT_DOMAINS and node.op_type not in holders:
            continue
        for attr in node.attribute:
            graphs = attribute_graphs(attr)
            for i, g in enumerate(graphs):
                which = attr.name if len(graphs) == 1 else f"{attr.name}[{i}]"
                label = node_label(node, scope)
                child = Scope(g, f"{which} of {label}", scope, scope.opset)
                yield child
                yield from _subgraph_scopes(g, child)


def subgraph_scopes(graph_like, scope: Scope) -> Iterator[Scope]:
    """The scopes of every subgraph below ``graph_like`` (whose scope is ``scope``), depth first."""
    return _subgraph_scopes(graph_like, scope)


def iter_scopes(model: onnx.ModelProto) -> Iterator[Scope]:
    """The main graph, every nested subgraph, then every model-local function and its subgraphs.

    Parents come before children, so a child's enclosing scope has been seen already.
    """
    main = Scope(model.graph, "main graph", None, opset_version(model.opset_import))
    yield main
    yield from _subgraph_scopes(model.graph, main)
    for fn in model.functions:
        fopset = opset_version(fn.opset_import)
        if fopset is None:
            fopset = opset_version(model.opset_import)
        fscope = Scope(fn, f"function '{fn.domain}:{fn.name}'", None, fopset)
        yield fscope
        yield from _subgraph_scopes(fn, fscope)


def node_label(node: onnx.NodeProto, scope: Scope | None = None) -> str:
    """How messages name a node: its name, or its op type and position when unnamed."""
    where = f" in {scope.location}" if scope is not None else ""
    if node.name:
        return f"node '{node.name}' ({node.op_type}){where}"
    index = ""
    if scope is not None:
        for i, n in enumerate(scope.body.node):
            if n is node:
                index = f" #{i}"
                break
    return f"unnamed {node.op_type} node{index}{where}"


def definition(name: str, scope: Scope) -> tuple[str, object, Scope | None]:
    """What defines ``name`` as seen from ``scope``: the nearest definition, walking out
    through the enclosing scopes. Returns (kind, thing, where): ("node", the producing
    node, its scope), ("input", None, scope) for a graph or function input (an initializer
    that is also an input counts as an input: it can be overridden at run time),
    ("initializer", the TensorProto, scope), or ("undefined", None, None)."""
    s: Scope | None = scope
    while s is not None:
        # inputs and initializers first: their indexes are small, the producers' one is as big
        # as the body (a name has one definition in a scope: the checker refuses two)
        if name in s.inputs():
            return "input", None, s
        tensor = s.initializers().get(name)
        if tensor is not None:
            return "initializer", tensor, s
        producer = s.producers().get(name)
        if producer is not None:
            return "node", producer, s
        s = s.parent
    return "undefined", None, None
