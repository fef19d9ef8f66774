"""Regions of a model the half-precision plan treats as a whole: shape arithmetic (float values
of sizes and indices that go back to integers: kept float32) and Loop states that are weights
carried through the body unchanged (carried in half)."""

from __future__ import annotations

import onnx

from rewriter.graph.schemas import is_default_domain
from rewriter.precision.graphs import FLOAT, Graphs
from rewriter.precision.slots import node_slots

__all__ = ["INTEGER_TYPES", "shape_arithmetic", "carried_in_half"]

INTEGER_TYPES = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
                           onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                           onnx.TensorProto.UINT32, onnx.TensorProto.UINT64})
# float arithmetic that shapes go through on their way back to integers (sizes, indices)
_SHAPE_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div", "Floor", "Ceil", "Round", "Max", "Min", "Neg", "Abs",
                               "Sqrt", "Reciprocal", "Cast", "Concat", "Gather", "Slice", "Unsqueeze", "Squeeze",
                               "Reshape", "Identity", "Clip", "Range", "Pow"})

def shape_arithmetic(graphs: Graphs, plans: dict) -> set[int]:
    """Nodes computing float values from integers (shapes, sizes, indices cast to float)
    that go back to integers: kept float32, where half precision would lose integers."""
    g = graphs
    start = [n for n in g.producer.values() if n.op_type == "Cast" and is_default_domain(n.domain)
             and g.elem(n.input[0]) in INTEGER_TYPES and g.elem(n.output[0]) == FLOAT]
    region: dict[int, onnx.NodeProto] = {id(n): n for n in start}
    frontier = list(start)
    while frontier:
        nxt = []
        for node in frontier:
            for out in node.output:
                for reader, _ in g.readers.get(out, ()):
                    if id(reader) in region or reader.op_type not in _SHAPE_ARITHMETIC:
                        continue
                    others = [x for x in reader.input if x and x != out]
                    if all(g.is_constant(x) or (x in g.producer and id(g.producer[x]) in region)
                           or g.elem(x) in INTEGER_TYPES for x in others):
                        region[id(reader)] = reader
                        nxt.append(reader)
        frontier = nxt
    # keep only what leads back to integers (a Cast to an integer type) or a float-only slot
    sinks: set[int] = set()
    for key, node in region.items():
        if node.op_type == "Cast" and g.elem(node.output[0]) in INTEGER_TYPES:
            sinks.add(key)
        for out in node.output:
            for reader, i in g.readers.get(out, ()):
                p = plans.get(id(reader))
                slots = p.slots if p is not None else node_slots(reader, g.opset)
                if slots is not None and i < len(slots.inputs) and slots.inputs[i].param is None:
                    sinks.add(key)
    keep = set(sinks)
    changed = True
    while changed:
        changed = False
        for key, node in region.items():
            if key in keep:
                continue
            if any(id(r) in keep for out in node.output for r, _ in g.readers.get(out, ())):
                keep.add(key)
                changed = True
    return keep


def carried_in_half(graphs: Graphs, plan) -> None:
    """Loop state variables that are float32 constants passed through the body unchanged (the
    body output is the body input) and that every reader in the body reads in half: carried in
    half, so the weights are stored once, in half, and not cast on every iteration."""
    g = graphs
    for site in g.sites:
        for loop in site.graph.node:
            if loop.op_type != "Loop" or not is_default_domain(loop.domain):
                continue
            body = next((a.g for a in loop.attribute if a.name == "body"), None)
            if body is None:
                continue
            for k in range(len(loop.input) - 2):
                init = loop.input[2 + k]
                if not init or g.elem(init) != FLOAT or not g.is_constant(init) or 2 + k >= len(body.input) \
                        or 1 + k >= len(body.output):
                    continue
                carried = body.input[2 + k].name
                if body.output[1 + k].name != carried:
                    continue
                readers = g.readers.get(carried, [])
                if not readers or not all(plan.is_half(r) and i in plan.plan_of(r).half_inputs for r, i in readers):
                    continue
                plan.half_values.add(carried)
                if k < len(loop.output) and loop.output[k]:
                    plan.half_values.add(loop.output[k])
                plan.half_reads.add((id(loop), 2 + k))
