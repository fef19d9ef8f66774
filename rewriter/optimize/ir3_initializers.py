"""IR version 3 and older: every initializer must also be a graph input.

Folds and fusions add initializers that are not inputs; in a model of IR < 4 that is invalid,
and making them inputs would change the model's interface (an input can be overridden).
``InitializersToConstantsPass`` turns every initializer that is not a graph input into a
Constant node at the start of its graph (main graph and subgraphs), under the same name.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.optimize.scopes import graphs_and_functions

__all__ = ["InitializersToConstantsPass"]


class InitializersToConstantsPass(ir.passes.InPlacePass):
    """Make non-input initializers Constant nodes (for models whose IR version predates them)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        moved = 0
        for graph in graphs_and_functions(model):
            if not isinstance(graph, ir.Graph):
                continue
            inputs = frozenset(graph.inputs)
            first = next(iter(graph), None)
            for name, value in list(graph.initializers.items()):
                if value in inputs or value.const_value is None:
                    continue
                del graph.initializers[name]
                node = ir.node("Constant", [], attributes={"value": value.const_value})
                if first is None:
                    graph.append(node)
                else:
                    graph.insert_before(first, node)
                out = node.outputs[0]
                out.dtype, out.shape = value.dtype, value.shape
                is_output = [i for i, o in enumerate(graph.outputs) if o is value]
                value.replace_all_uses_with(out)
                for i in is_output:
                    graph.outputs[i] = out
                out.name = name
                moved += 1
        return ir.passes.PassResult(model, modified=bool(moved))
