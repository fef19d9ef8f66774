"""Regions of a model the half-precision plan treats as a whole: shape arithmetic (float values
of sizes and indices that go back to integers: kept float32), signal paths (an STFT or DFT and
the weightless nodes bringing it its signal: kept float32) and Loop states that are weights
carried through the body unchanged (carried in half)."""

from __future__ import annotations

import math

import onnx

from rewriter.graph.schemas import is_default_domain
from rewriter.precision.graphs import FLOAT, Graphs, NodeKey
from rewriter.precision.slots import node_slots
from rewriter.graph.attributes import attribute_int

__all__ = ["INTEGER_TYPES", "shape_arithmetic", "signal_paths", "carried_in_half", "SIGNAL_PATH", "SIGNAL_FILTER",
           "SPECTRUM"]

INTEGER_TYPES = frozenset({onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
                           onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                           onnx.TensorProto.UINT32, onnx.TensorProto.UINT64})
# float arithmetic that shapes go through on their way back to integers (sizes, indices)
_SHAPE_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div", "Floor", "Ceil", "Round", "Max", "Min", "Neg", "Abs",
                               "Sqrt", "Reciprocal", "Cast", "Concat", "Gather", "Slice", "Unsqueeze", "Squeeze",
                               "Reshape", "Identity", "Clip", "Range", "Pow"})
_SPECTRAL = frozenset({"STFT", "DFT"})
SIGNAL_PATH = ("signal path: an STFT/DFT, and the weightless nodes bringing a signal to it or to a Conv filtering "
               "it, stay float32 (a signal rounded to half precision carries noise into every frequency bin)")
# what a spectrum goes through from its transform to its log
_SPECTRUM_OPS = frozenset({"Pow", "Mul", "Add", "Sub", "Div", "Sqrt", "Abs", "MatMul", "Clip", "Max", "Min",
                           "Transpose", "Unsqueeze", "Squeeze", "Reshape", "Slice", "Gather", "Split", "Concat",
                           "ReduceSum", "ReduceSumSquare", "ReduceL2", "Identity", "Neg", "Log"})
SPECTRUM = ("signal path: a spectrum (power, magnitude, mel projection) stays float32 up to its log, computing from "
            "weights stored in half (its values span more than float16 has: a full-scale tone's power over a "
            "512-sample window is 6.5e4, the floor clipped before the log 1e-10)")
SIGNAL_FILTER = ("signal path: a Conv filtering a waveform computes in float32, from its weights stored in half "
                 "(a signal rounded to half precision carries noise into every frequency band)")

def shape_arithmetic(graphs: Graphs, plans: dict) -> set[NodeKey]:
    """Nodes computing float values from integers (shapes, sizes, indices cast to float)
    that go back to integers: kept float32, where half precision would lose integers."""
    g = graphs
    start = [n for n in g.producer.values() if n.op_type == "Cast" and is_default_domain(n.domain)
             and g.elem(n.input[0]) in INTEGER_TYPES and g.elem(n.output[0]) == FLOAT]
    region: dict[NodeKey, onnx.NodeProto] = {g.key(n): n for n in start}
    frontier = list(start)
    while frontier:
        nxt = []
        for node in frontier:
            for out in node.output:
                for reader, _ in g.readers.get(out, ()):
                    if g.key(reader) in region or reader.op_type not in _SHAPE_ARITHMETIC:
                        continue
                    others = [x for x in reader.input if x and x != out]
                    if all(g.is_constant(x) or (x in g.producer and g.key(g.producer[x]) in region)
                           or g.elem(x) in INTEGER_TYPES for x in others):
                        region[g.key(reader)] = reader
                        nxt.append(reader)
        frontier = nxt
    # keep only what leads back to integers (a Cast to an integer type) or a float-only slot
    sinks: set[NodeKey] = set()
    for key, node in region.items():
        if node.op_type == "Cast" and g.elem(node.output[0]) in INTEGER_TYPES:
            sinks.add(key)
        for out in node.output:
            for reader, i in g.readers.get(out, ()):
                p = plans.get(g.key(reader))
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
            if any(g.key(r) in keep for out in node.output for r, _ in g.readers.get(out, ())):
                keep.add(key)
                changed = True
    return keep


def signal_paths(graphs: Graphs, plans: dict, spectra: bool = True) -> dict[NodeKey, tuple[bool, str]]:
    """The nodes a signal's rounding to half precision would spoil, kept float32: g.key(node) ->
    (whether it computes from its weights stored in half, the reason).

    - An STFT or DFT, and the nodes before it that bring it its signal (input 0) holding no
      weights (no float constant input of more than one element; the walk stops at a node that
      has one, at graph inputs, constants and nodes computing no float, and goes on through
      nodes kept float32 for another reason).
    - A filter bank on a waveform: a 1-D Conv of one input channel (weight [C, 1, K], one group)
      whose input such a weightless walk traces back to a graph input (an STFT written as a
      Conv, a learned front end), with that path; the Conv computes in float32 from its weights
      stored in half, so the file is no larger for it.

    - With ``spectra`` (float16: bfloat16 has float32's range), the spectrum such a transform
      makes, up to its log (:func:`_spectrum`), computing from its weights (a mel matrix) stored
      in half.

    Rounding the signal puts noise 2**-11 (float16) or 2**-8 (bfloat16) below its peak into
    every frequency band, above the quiet bands of a spectrum, where the log that usually follows
    turns it into large errors; rounding the transform's output costs each band the same relative
    error only, but its power overflows float16 for loud signals."""
    g = graphs
    keep: dict[NodeKey, tuple[bool, str]] = {}
    for site in g.sites:
        for node in site.graph.node:
            p = plans.get(g.key(node))
            if p is None or not is_default_domain(node.domain) or not node.input or not node.input[0]:
                continue
            if node.op_type in _SPECTRAL:
                path, _ = _weightless_path(g, plans, node.input[0])
            elif node.op_type == "Conv" and _filter_bank(g, node):
                path, reached = _weightless_path(g, plans, node.input[0])
                if not reached:
                    continue
            else:
                continue
            if p.half:
                keep[g.key(node)] = (True, SIGNAL_FILTER) if node.op_type == "Conv" else (False, SIGNAL_PATH)
            elif p.weights_half and node.op_type in _SPECTRAL:  # (kept for the runtime): its window float32 too
                keep[g.key(node)] = (False, SIGNAL_PATH)
            for q in path:
                keep.setdefault(g.key(q), (False, SIGNAL_PATH))
            for q in (_spectrum(g, plans, node) if spectra else ()):
                keep.setdefault(g.key(q), (not _weightless(g, q), SPECTRUM))  # a mel matrix stored in half
    return keep


def _spectrum(g: Graphs, plans: dict, transform: onnx.NodeProto, depth: int = 32) -> list:
    """The nodes planned in half on the walk forward from a transform's output through what makes
    a spectrum of it (power, magnitude, a mel projection, clipping, layout) up to and including
    a Log: its values span more than float16 has (a full-scale tone's power over a 512-sample
    window is 6.5e4; the floor clipped before the log, 1e-10, is below float16's normal range)."""
    nodes, seen, frontier = [], {g.key(transform)}, [transform]
    for _ in range(depth):
        nxt = []
        for node in frontier:
            for out in node.output:
                for r, _ in g.readers.get(out, ()):
                    if g.key(r) in seen or r.op_type not in _SPECTRUM_OPS or not is_default_domain(r.domain):
                        continue
                    seen.add(g.key(r))
                    q = plans.get(g.key(r))
                    if q is not None and q.half:
                        nodes.append(r)
                    if r.op_type != "Log":
                        nxt.append(r)
        if not nxt:
            break
        frontier = nxt
    return nodes


def _weightless_path(g: Graphs, plans: dict, name: str) -> tuple[list, bool]:
    """The nodes planned in half on the weightless walk back from ``name``, and whether it
    reached a graph input (through float values, or a Cast from integers: PCM samples)."""
    nodes, reached, seen, frontier = [], False, set(), [name]
    while frontier:
        x = frontier.pop()
        producer = g.producer.get(x)
        if producer is None:
            reached = reached or x in g.graph_inputs
            continue
        if g.key(producer) in seen:
            continue
        seen.add(g.key(producer))
        q = plans.get(g.key(producer))
        if q is not None and _resampler(g, producer):  # a filter making one waveform of one: walk on
            frontier.append(producer.input[0])
            continue
        if q is None or not _weightless(g, producer):
            continue  # not float arithmetic (a constant, or where the signal starts), or a weight
        if q.half:
            nodes.append(producer)
        frontier.extend(i for i in producer.input if i and (g.elem(i) == FLOAT or producer.op_type == "Cast"))
    return nodes, reached


def _filter_bank(g: Graphs, node: onnx.NodeProto) -> bool:
    """A 1-D Conv of one input channel and one group, its weight a constant: weight [C, 1, K], or
    [C, 1, 1, K] / [C, 1, K, 1] (a 1-D filter written as a 2-D Conv, as tf2onnx exports conv1d)."""
    if len(node.input) < 2 or not g.is_constant(node.input[1]):
        return False
    groups = attribute_int(node, "group", 1)
    t = g.types.get(node.input[1])
    dims = [d.dim_value for d in t.tensor_type.shape.dim] if t is not None and t.tensor_type.HasField("shape") else []
    one_d = len(dims) == 3 or (len(dims) == 4 and 1 in dims[2:])
    return groups == 1 and one_d and dims[1] == 1


def _resampler(g: Graphs, node: onnx.NodeProto) -> bool:
    """A filter bank of one output channel (a low-pass filter before decimation, as a constant-Q
    transform's octaves have): its output is a waveform again."""
    if node.op_type != "Conv" or not is_default_domain(node.domain) or not _filter_bank(g, node):
        return False
    t = g.types.get(node.input[1])
    return t.tensor_type.shape.dim[0].dim_value == 1


def _weightless(g: Graphs, node: onnx.NodeProto) -> bool:
    """No float constant input of more than one element (a weight); scalars and integer
    constants (pads, axes, indices) do not count."""
    for x in node.input:
        if x and g.is_constant(x) and g.elem(x) == FLOAT and constant_size(g, x) > 1:
            return False
    return True


def constant_size(g: Graphs, name: str) -> int:
    """The element count of an initializer or of a Constant node's value."""
    if name in g.initializer:
        return math.prod(g.initializer[name].dims)
    for a in g.producer[name].attribute:
        if a.name == "value":
            return math.prod(a.t.dims)
        if a.name == "value_floats":
            return len(a.floats)
    return 1  # value_float


def carried_in_half(graphs: Graphs, plan) -> None:
    """Loop state variables that are float32 constants passed through the body unchanged (the
    body output is the body input) and that every reader in the body reads in half: carried in
    half, so the weights are stored once, in half, and not cast on every iteration."""
    g = graphs
    half_str = f"tensor({plan.dtype})"
    for site in g.sites:
        for loop in site.graph.node:
            if loop.op_type != "Loop" or not is_default_domain(loop.domain):
                continue
            body = next((a.g for a in loop.attribute if a.name == "body"), None)
            slots = node_slots(loop, g.opset)
            if body is None or slots is None or half_str not in slots.inputs[-1].allowed:
                continue  # (Loop-13's states take no bfloat16: Loop-16's do)
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
                plan.half_reads.add((g.key(loop), 2 + k))
