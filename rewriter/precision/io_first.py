"""``--keep-io-precision``: the first consumers of each float graph input compute in float32.

With the inputs kept float32 (``--keep-io-types``), a Cast at the edge rounds each float input
to the half type before its first consumer: when the model is sensitive to that rounding (an
input near 1000 of which ``x - 1000`` is taken), no half arithmetic downstream can undo it.
Keeping the nodes that read the input first in float32 (their weights stored in half, cast to
float32 where read: the "weights_half" decision of :mod:`.plan`) takes the input's rounding out:
the rounding moves to their outputs. Nodes that only move data (Reshape, Transpose, Slice, ...)
are passed through: their readers are first consumers too.
"""

from __future__ import annotations

from rewriter.graph.schemas import is_default_domain
from rewriter.precision.graphs import FLOAT, Graphs, NodeKey

__all__ = ["first_consumers", "KEEP_IO_PRECISION", "MOVES_DATA"]

KEEP_IO_PRECISION = "--keep-io-precision: reads graph input {!r} (computed in float32, its weights stored in half)"
# ops whose float outputs are some of their float inputs' values, unchanged: exact in any type
MOVES_DATA = frozenset({"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Gather",
                        "GatherElements", "GatherND", "Concat", "Split", "Expand", "Tile", "Pad", "DepthToSpace",
                        "SpaceToDepth"})
_DEPTH = 16  # data-moving nodes followed from an input, at most


def first_consumers(graphs: Graphs) -> dict[NodeKey, str]:
    """graphs.key(node) -> reason, for every node that reads a float input of the main graph, directly
    or through nodes that only move data (those too)."""
    found: dict[NodeKey, str] = {}
    for v in graphs.model.graph.input:
        if v.type.tensor_type.elem_type != FLOAT:
            continue
        frontier, depth = [v.name], 0
        while frontier and depth < _DEPTH:
            nxt = []
            for name in frontier:
                for node, _ in graphs.readers.get(name, ()):
                    if graphs.key(node) in found:
                        continue
                    found[graphs.key(node)] = KEEP_IO_PRECISION.format(v.name)
                    if node.op_type in MOVES_DATA and is_default_domain(node.domain):
                        nxt += [o for o in node.output if o and graphs.elem(o) == FLOAT]
            frontier, depth = nxt, depth + 1
    return found
