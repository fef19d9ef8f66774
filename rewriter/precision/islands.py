"""Half-precision islands that buy nothing: kept float32.

The nodes planned in half form connected groups (a value one makes in half and another reads in
half joins them). A group that holds no weight (no float constant of more than one value read in
half) and has float32 nodes on every side is only rounding: its values come from float32 nodes
through Casts and go back to float32 nodes through Casts, and the file is no smaller for it (a
group reading the model's inputs or making its outputs is what the user asked to compute in
half: it stays half, weights or not). Such groups arise where the nodes around them stay float32
for a reason — the runtime targeted has no half kernel for Conv or MatMul (ONNX Runtime's CPU
provider), a quantized region, a signal path — and leave Clip, Transpose, Gather and the like in
half between them: an activation rounded for nothing (0.015 on a random-weight MobileNetV2 for
ONNX Runtime 1.20), detection boxes and scores rounded where the count of boxes or their order
then changes, and a pattern ONNX Runtime's LayerNormFusion turns into a float16
LayerNormalization that releases before 1.20 have no CPU kernel for.
"""

from __future__ import annotations

from rewriter.precision.graphs import FLOAT, Graphs, NodeKey
from rewriter.precision.regions import constant_size

__all__ = ["ISLAND", "half_islands"]

ISLAND = ("nothing in half around it: no weight in half and float32 nodes on every side, so half precision here "
          "would only round values and add Casts")


def half_islands(graphs: Graphs, plans: dict) -> set[NodeKey]:
    """The keys of the nodes planned in half whose group (see the module's doc) holds no weight
    and reads no graph input and makes no graph output (of any graph): float32 nodes on every
    side. A model or a group that computes on its inputs without weights keeps its half
    arithmetic: that is what was asked of it (on a GPU, the speed)."""
    g = graphs
    half = {key: p for key, p in plans.items() if p.half}
    parent = {key: key for key in half}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    anchored: set[NodeKey] = set()  # nodes of groups that must stay: a weight, or half at a boundary
    for key, p in half.items():
        node = p.node
        if p.slots is None:  # a call of a local function: its body may hold weights
            anchored.add(key)
        for i in p.half_inputs:
            x = node.input[i] if i < len(node.input) else ""
            if not x:
                continue
            producer = g.producer.get(x)
            if g.is_constant(x):
                if g.elem(x) == FLOAT and constant_size(g, x) > 1:
                    anchored.add(key)
            elif producer is None:  # a graph input: half is what the user asked of what it reads
                anchored.add(key)
            else:
                q = plans.get(g.key(producer))
                if q is not None and q.half and list(producer.output).index(x) in q.half_outputs:
                    parent[find(key)] = find(g.key(producer))
        for j in p.half_outputs:
            y = node.output[j] if j < len(node.output) else ""
            if y and y in g.graph_outputs:
                anchored.add(key)
    roots = {find(k) for k in anchored}
    return {key for key in half if find(key) not in roots}
