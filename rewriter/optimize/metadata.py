"""Metadata passes: drop the bookkeeping keys the optimizing tools add, or strip all metadata.

onnxscript tags folded values (``pkg.onnxscript.optimizer.folded_from``) and rewritten nodes
(``pkg.onnxscript.rewriter.rule_name``); they describe the tool's run, not the model, and
would make a second run differ from the first. ``StripMetadataPass`` (``--strip-metadata``)
drops every doc string and metadata entry, as onnxslim and onnxsim do by default.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import ClearMetadataAndDocStringPass

from rewriter.optimize.scopes import graphs_and_functions

__all__ = ["DropToolMetadataPass", "StripMetadataPass", "TOOL_KEYS"]

TOOL_KEYS = ("pkg.onnxscript.optimizer.folded_from", "pkg.onnxscript.rewriter.rule_name")


def _values(graph):
    yield from graph.inputs
    if isinstance(graph, ir.Graph):
        yield from graph.initializers.values()
    for node in graph:
        yield from node.outputs


class DropToolMetadataPass(ir.passes.InPlacePass):
    """Remove onnxscript's bookkeeping keys (:data:`TOOL_KEYS`) from nodes and values."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for graph in graphs_and_functions(model):
            holders = [*graph, *_values(graph)]
            for holder in holders:
                props = holder.metadata_props
                for key in TOOL_KEYS:
                    if key in props:
                        del props[key]
                        modified = True
        return ir.passes.PassResult(model, modified=modified)


class StripMetadataPass(ClearMetadataAndDocStringPass):
    """Drop every doc string and metadata entry of graphs, nodes, values and functions (onnx_ir's
    ClearMetadataAndDocStringPass) and the model's doc string. The model's own metadata_props
    (author, license ...) stay: they say whose model it is, not how it was built."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        result = super().call(model)
        modified = result.modified or bool(model.doc_string or model.graph.doc_string
                                           or model.graph.metadata_props)
        model.doc_string = None
        model.graph.doc_string = None
        model.graph.metadata_props.clear()
        return ir.passes.PassResult(model, modified=modified)
