"""The model as the half-precision rewrite sees it: the model's index
(:class:`rewriter.graph.model_index.ModelIndex`, here ``Graphs``) after sibling subgraphs' names
are made apart (:func:`unique_subgraph_names`), so one table per model serves every scope.
"""

from __future__ import annotations

import onnx

from rewriter.graph.model_index import FLOAT, ModelIndex, NodeKey, Site, elem_of, is_constant_node
from rewriter.graph.traversal import subgraphs
from rewriter.graph.names import fresh_name

__all__ = ["Graphs", "Site", "NodeKey", "elem_of", "is_constant_node", "unique_subgraph_names", "FLOAT"]

Graphs = ModelIndex


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
                        mapping[name] = fresh_name(taken, name, sep="__")
                    else:
                        taken.add(name)
                if mapping:
                    _rename_in(g, mapping)
                    renamed += len(mapping)
                visit(g)

    visit(model.graph)
    return renamed
