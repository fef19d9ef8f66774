"""The graphs an optimize pass visits: main graph, every subgraph, every model-local function."""

from __future__ import annotations

from collections.abc import Iterator

import onnx_ir as ir

__all__ = ["graphs_and_functions", "subgraphs"]


def subgraphs(node: ir.Node) -> Iterator[ir.Graph]:
    """The graphs held by ``node``'s attributes, nested ones included (depth first)."""
    for attr in node.attributes.values():
        if attr.is_ref():
            continue
        if attr.type == ir.AttributeType.GRAPH:
            graphs = [attr.value]
        elif attr.type == ir.AttributeType.GRAPHS:
            graphs = list(attr.value)
        else:
            continue
        for g in graphs:
            yield g
            for inner in g:
                yield from subgraphs(inner)


def graphs_and_functions(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    """Main graph, its subgraphs, then each function and its subgraphs (parents first): onnx_ir's
    ``Model.graphs()`` with the model-local functions, which it leaves out."""
    yield from model.graphs()
    for function in model.functions.values():
        yield function
        yield from function.subgraphs()
