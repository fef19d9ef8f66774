"""Remove nodes and initializers nothing reads, in every graph, subgraph and function.

Kept: graph and function outputs, graph inputs (an initializer that is also an input is part
of the interface), names listed in ``keep`` (the training info's reads), and custom-domain
nodes unless ``allow_removing_custom_ops`` (a custom op may have side effects the tool
cannot see). A value read inside a subgraph counts as read by the node holding it.
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from rewriter.optimize.scopes import graphs_and_functions, subgraphs
from rewriter.graph.schemas import is_default_domain

__all__ = ["RemoveUnusedPass"]

logger = logging.getLogger(__name__)


class RemoveUnusedPass(ir.passes.InPlacePass):
    """Dead-code elimination that keeps the model's interface and custom ops (see the module doc)."""

    def __init__(self, *, allow_removing_custom_ops: bool = False, keep: frozenset[str] = frozenset()):
        super().__init__()
        self.allow_removing_custom_ops = allow_removing_custom_ops
        self.keep = frozenset(keep)
        self.removed_nodes = 0
        self.removed_initializers = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.removed_nodes = self.removed_initializers = 0
        scopes = list(graphs_and_functions(model))
        _forget_dead_reads(scopes)
        # children first: a dead use inside a subgraph goes before its parent counts uses
        for _ in range(2):
            before = self.removed_nodes
            for graph in reversed(scopes):
                self.removed_nodes += self._nodes(graph, model.graph)
            if self.removed_nodes == before:
                break
        for graph in scopes:
            if isinstance(graph, ir.Graph):
                self.removed_initializers += self._initializers(graph, graph is model.graph)
        modified = bool(self.removed_nodes or self.removed_initializers)
        if modified:
            logger.info("removed %d unused node(s), %d unused initializer(s)",
                        self.removed_nodes, self.removed_initializers)
        return ir.passes.PassResult(model, modified=modified)

    def _removable(self, node: ir.Node, outputs: frozenset, main: bool) -> bool:
        if not is_default_domain(node.domain) and not self.allow_removing_custom_ops:
            return False
        for out in node.outputs:
            if out in outputs or out.uses() or (main and out.name in self.keep):
                return False
        return True

    def _nodes(self, graph, main_graph) -> int:
        outputs = frozenset(graph.outputs)
        count = 0
        for node in reversed(list(graph)):
            if not self._removable(node, outputs, graph is main_graph):
                continue
            for sub in list(subgraphs(node)):  # their reads of outer values go with the node
                for inner in sub:
                    for i in range(len(inner.inputs)):
                        inner.replace_input_with(i, None)
            graph.remove(node, safe=True)
            count += 1
        return count

    def _initializers(self, graph: ir.Graph, main: bool) -> int:
        inputs, outputs = frozenset(graph.inputs), frozenset(graph.outputs)
        count = 0
        for name, value in list(graph.initializers.items()):
            if value.uses() or value in inputs or value in outputs or (main and name in self.keep):
                continue
            del graph.initializers[name]
            count += 1
        return count


def _forget_dead_reads(scopes) -> None:
    """Detach the reads of nodes no longer in the model (the untaken branch of an If that was
    folded away keeps its nodes and their reads of outer values) from every value that is: no
    such read keeps a value, and the next round's rules see only the real readers."""
    live = {g.graph if isinstance(g, ir.Function) else g for g in scopes}
    for graph in scopes:
        values = [*graph.inputs, *(graph.initializers.values() if isinstance(graph, ir.Graph) else ())]
        values += [out for node in graph for out in node.outputs]
        for value in values:
            for use in list(value.uses()):
                if use.node.graph not in live:
                    use.node.replace_input_with(use.idx, None)
