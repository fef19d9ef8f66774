"""Shapes a model computes at run time from dims that are not static, for the releases whose data
measured what that costs on real models (``computed_shapes`` in the release's entry, written by
``tools/runtime_computed_shapes.py`` from a ``bench/bench_runtime_targets.py`` run).

LiteRT is reached through onnx2tf, which converts a model at static input shapes and derives every
other shape itself. A shape the model computes from its dims (a Reshape's shape, a Range's limit,
a Slice's bounds read through Shape) is carried into the LiteRT model as a computation, and onnx2tf
derives some of them wrongly: with XNNPACK the interpreter then fails to prepare ("failed to reshape
runtime"), without it the same models fail on a broadcast or a Reshape's element count. The same
op forms run in other models, so no form can be named as refused; what is measured is how many of
the real models with such shapes the release refused, and that with ``--input-shape`` (the
shapes folded to constants by convert) it ran them. The result is a note naming the nodes and the
inputs to fix, not a refusal.
"""

from __future__ import annotations

import onnx

from rewriter.graph import traversal
from rewriter.targets.static_dims import dynamic_inputs

__all__ = ["SHAPE_INPUTS", "computed_shape_nodes", "computed_shapes_note"]

# op -> the input slots that decide its output's shape
SHAPE_INPUTS = {"Reshape": (1,), "Expand": (1,), "Range": (0, 1, 2), "ConstantOfShape": (0,), "Slice": (1, 2, 3, 4),
                "Tile": (1,), "Pad": (1,), "Resize": (3,), "Upsample": (1,)}
_READS_DIMS = ("Shape", "Size")


def computed_shape_nodes(model: onnx.ModelProto) -> list[str]:
    """The label of each node whose shape input (``SHAPE_INPUTS``) is computed from a Shape or Size
    of a value in its own graph."""
    found = []
    for scope in traversal.iter_scopes(model):
        producers = {o: n for n in scope.body.node for o in n.output if o}
        memo: dict[str, bool] = {}
        for node in scope.body.node:
            slots = SHAPE_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ()
            if any(s < len(node.input) and node.input[s] and _reads_dims(node.input[s], producers, memo)
                   for s in slots):
                found.append(traversal.node_label(node, scope))
    return found


def _reads_dims(name: str, producers: dict, memo: dict) -> bool:
    """Whether ``name`` is computed from a Shape or Size (a post-order walk without recursion:
    graphs are deep)."""
    stack = [(name, False)]
    while stack:
        value, inputs_done = stack.pop()
        node = producers.get(value)
        if inputs_done:
            memo[value] = any(memo[i] for i in node.input if i)
            continue
        if value in memo:
            continue
        if node is None or node.op_type in _READS_DIMS:
            memo[value] = node is not None
            continue
        memo[value] = False  # (until its inputs are known; a graph has no cycle)
        stack.append((value, True))
        stack.extend((i, False) for i in node.input if i and i not in memo)
    return memo[name]


def computed_shapes_note(model: onnx.ModelProto, measured: dict, release: str) -> list[str]:
    """A note when ``model`` has an input with a dim that is not static and computes shapes from
    dims, for a release whose data ``measured`` (``computed_shapes``) refused real models so."""
    if not measured or not measured.get("refused"):
        return []
    inputs = dynamic_inputs(model)
    nodes = computed_shape_nodes(model) if inputs else []
    if not nodes:
        return []
    refused, ran = measured["refused"], measured.get("ran", [])
    shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
    static = measured.get("ran_static")
    then = f"; with --input-shape it ran {static} of them" if static is not None else ""
    return [f"{release} refused {len(refused)} of the {len(refused) + len(ran)} real models measured whose shapes "
            f"are computed from dims that are not static (\"{measured.get('reason', 'refused')}\"){then}; here "
            f"{len(nodes)} node(s) compute a shape from dims ({shown}): give --input-shape NAME:DIMS for "
            f"{', '.join(inputs)} (or --fix-dim SYMBOL=N) to convert at static dims"]
