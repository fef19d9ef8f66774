"""The loop every node-rewriting pass of the optimizer shares: every graph (main graph,
subgraphs, functions), every default-domain node of the op types the pass rewrites (nodes
removed earlier in the walk skipped), a count of what changed, one log line, and an honest
``modified``.

A pass sets ``OPS`` (the op types it looks at; None for all), ``DONE`` (the log line, with
``%d`` for the count) and optionally ``MIN_OPSET`` (graphs importing an older default opset
are skipped), then implements :meth:`NodeRewritePass.visit` (one node) or
:meth:`NodeRewritePass.visit_graph` (a whole graph), adding what it changed to ``self.count``.
"""

from __future__ import annotations

import dataclasses
import logging

import onnx_ir as ir

from rewriter.optimize.scopes import graphs_and_functions
from rewriter.graph.schemas import is_default_domain

__all__ = ["GraphScope", "NodeRewritePass"]



@dataclasses.dataclass(frozen=True)
class GraphScope:
    """A graph or function being rewritten, its default opset and its outputs (names a rewrite
    must keep)."""

    graph: ir.Graph | ir.Function
    opset: int
    outputs: frozenset


class NodeRewritePass(ir.passes.InPlacePass):
    """Visit the nodes of ``OPS`` in every graph and function; ``self.count`` says how much changed."""

    OPS: frozenset[str] | None = None
    DONE = "rewrote %d node(s)"
    MIN_OPSET = 1

    def __init__(self):
        super().__init__()
        self.count = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.count = 0
        for graph in graphs_and_functions(model):
            imports = graph.opset_imports if isinstance(graph, ir.Function) else model.opset_imports
            opset = imports.get("", imports.get("ai.onnx", 1))
            if opset < self.MIN_OPSET:
                continue
            self.visit_graph(GraphScope(graph, opset, frozenset(graph.outputs)))
        if self.count:
            logging.getLogger(type(self).__module__).info(self.DONE, self.count)
        return ir.passes.PassResult(model, modified=bool(self.count))

    def visit_graph(self, scope: GraphScope) -> None:
        ops = self.OPS
        for node in list(scope.graph):
            if node.graph is None or not is_default_domain(node.domain) or (ops is not None and node.op_type not in ops):
                continue  # removed earlier in this walk, another domain, or not an op of the pass
            self.visit(scope, node)

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        """Rewrite ``node`` if the pass applies to it, adding to ``self.count``."""
        raise NotImplementedError
