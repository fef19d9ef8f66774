"""onnx_ir's side of :mod:`rewriter.graph.input_defaults`: the main graph's inputs that have an
initializer (a default a caller may override) made constants, for :class:`OptimizePass`."""

from __future__ import annotations

import onnx_ir as ir

from rewriter.graph.input_defaults import FROZEN_IR, chosen

__all__ = ["freeze_ir_input_defaults"]


def freeze_ir_input_defaults(model: ir.Model, freeze) -> list[str]:
    """Make the defaults ``freeze`` names (True: all; a name or names; None or False: none)
    constants in ``model`` itself: each leaves the graph's inputs and keeps its initializer, and
    the IR version becomes at least 4. Returns their names (RewriterError for a name that is not
    a graph input with an initializer)."""
    graph = model.graph
    names = chosen([v.name for v in graph.inputs if graph.initializers.get(v.name) is v], freeze)
    for name in names:
        graph.inputs.remove(graph.initializers[name])
    if names and model.ir_version < FROZEN_IR:
        model.ir_version = FROZEN_IR
    return names
