"""Scan (opset 9 on; no function body in ONNX) unrolled over its static iteration count, for targets
that lack it (TVM 0.27, LiteRT 2.6): the body's nodes are written once per iteration, each copy's
values renamed, its inputs the state values of the iteration before and the iteration's slice of
each scan input (a Gather of one index along ``scan_input_axes``, from the end when
``scan_input_directions`` says reverse); each scan output is the iterations' values, each
Unsqueezed at ``scan_output_axes`` and Concatenated in order (in reverse order where
``scan_output_directions`` says so); the final states are the last iteration's. A body
initializer becomes one constant of the graph. The copies compute exactly what the body computes.

Needs (else refused with the reason): the iteration count static (a scan input's dim along its
axis: from the model's shapes, or ``--input-shape``, the refusal names the inputs to give), from
1 to :data:`MAX_ITERATIONS`, and at most :data:`MAX_NODES` body nodes written in all; a body
without subgraphs of its own; Scan from opset 9 (Scan-8's batch axis and ``sequence_lens`` are
not unrolled). The body's nodes are valid at the model's opset and the nodes around them are
written for it, so the decomposition is registered for the node's own opset.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.decompositions import decomposition
from rewriter.graph import traversal
from rewriter.graph.attributes import attribute_value

__all__ = ["MAX_ITERATIONS", "MAX_NODES", "UnrolledBody", "unsqueezed", "without_subgraphs", "written_for"]

MAX_ITERATIONS = 4096
MAX_NODES = 200_000


def _axes(ctx, name: str, count: int, ranks: list[int | None], what: str) -> list[int]:
    """The attribute ``name`` (default all 0) with negative axes normalized by ``ranks``."""
    axes = list(attribute_value(ctx.node, name, [0] * count))
    if len(axes) != count:
        ctx.block(f"{name} has {len(axes)} entries for {count} {what}")
    for k, (axis, rank) in enumerate(zip(axes, ranks)):
        if axis < 0:
            if rank is None:
                ctx.block(f"{name}[{k}] is negative and the rank of the {what} is unknown")
            axes[k] = axis + rank
    return axes


def _iterations(ctx, scans: list[str], axes: list[int]) -> int:
    counts = set()
    for name, axis in zip(scans, axes):
        dims = ctx.shape(name)
        if dims is not None and axis < len(dims) and dims[axis] is not None:
            counts.add(dims[axis])
    if len(counts) > 1:
        ctx.block(f"the scan inputs' lengths {sorted(counts)} differ")
    if not counts:
        from rewriter.targets.static_dims import dynamic_inputs

        inputs = ", ".join(dynamic_inputs(ctx.model)) or "the inputs"
        ctx.block(f"the iteration count (axis {axes[0]} of input '{scans[0]}') is not static, and the unrolled "
                  f"form needs it: give --input-shape NAME:DIMS for {inputs} (or --fix-dim SYMBOL=N)")
    return counts.pop()


def unsqueezed(ctx, value: str, axis: int, opset: int) -> str:
    if opset >= 13:
        return ctx.insert_before("Unsqueeze", [value, ctx.ints_constant("scan_axes", (axis,))]).output[0]
    return ctx.insert_before("Unsqueeze", [value], axes=[axis]).output[0]


class UnrolledBody:
    """A Scan or Loop body written once per iteration (its initializers become constants of the graph
    once); see the module doc."""

    def __init__(self, ctx, body: onnx.GraphProto):
        self.ctx, self.body = ctx, body
        self.types = {v.name: v.type for v in [*body.input, *body.output, *body.value_info]}
        self.constants = {t.name: ctx.add_constant(f"{ctx.node.name or ctx.node.op_type}_{t.name}",
                                                   onnx.numpy_helper.to_array(t)) for t in body.initializer}

    def iteration(self, inputs: list[str], i: int) -> list[str]:
        """The body's outputs for ``inputs`` (its inputs' values), as written for iteration ``i``."""
        ctx = self.ctx
        names = dict(self.constants)
        names.update({v.name: value for v, value in zip(self.body.input, inputs)})
        for node in self.body.node:
            outs = []
            for out in node.output:
                if out:
                    names[out] = ctx.fresh_name(f"{out}_it{i}")
                    if out in self.types:
                        ctx.set_type(names[out], self.types[out])
                outs.append(names[out] if out else "")
            copy = ctx.make_node(node.op_type, [names.get(x, x) for x in node.input], outs)
            copy.domain = node.domain
            copy.attribute.extend(node.attribute)
            ctx.before.append(copy)
        return [names.get(v.name, v.name) for v in self.body.output]


def written_for(ctx, finals: list[str]) -> None:
    """The node's outputs written by ``finals`` (an Identity each), its inputs maybe unused, the node
    removed: the end of an unrolling."""
    node = ctx.node
    for value, out in zip(finals, node.output):
        if out:
            ctx.insert_before("Identity", [value], [out])
    for name in node.input:
        if name:
            ctx.maybe_unused(name)
    ctx.remove()


def without_subgraphs(ctx) -> onnx.GraphProto:
    """The node's body, refused when a node of it has subgraphs of its own."""
    body = attribute_value(ctx.node, "body")
    if any(True for n in body.node for a in n.attribute if traversal.attribute_graphs(a)):
        ctx.block(f"a {ctx.node.op_type} body with subgraphs of its own is not unrolled")
    return body


@decomposition("Scan", None)
def scan_unrolled(node: onnx.NodeProto, ctx) -> None:
    """Scan unrolled over its static iteration count (see the module doc)."""
    if ctx.step[0] < 9:
        ctx.block("Scan-8's batch axis and sequence_lens are not unrolled (Scan from opset 9 is)")
    body = without_subgraphs(ctx)
    count = int(attribute_value(node, "num_scan_inputs"))
    states, scans = list(node.input[:len(node.input) - count]), list(node.input[len(node.input) - count:])
    outputs = len(body.output) - len(states)
    in_axes = _axes(ctx, "scan_input_axes", count, [ctx.rank(s) for s in scans], "scan inputs")
    out_ranks = [len(v.type.tensor_type.shape.dim) + 1 if v.type.tensor_type.HasField("shape") else None
                 for v in body.output[len(states):]]
    out_axes = _axes(ctx, "scan_output_axes", outputs, out_ranks, "scan outputs")
    in_dirs = list(attribute_value(node, "scan_input_directions", [0] * count))
    out_dirs = list(attribute_value(node, "scan_output_directions", [0] * outputs))
    steps = _iterations(ctx, scans, in_axes)
    if not 1 <= steps <= MAX_ITERATIONS or steps * len(body.node) > MAX_NODES:
        ctx.block(f"{steps} iterations of a body of {len(body.node)} nodes are not unrolled (from 1 to "
                  f"{MAX_ITERATIONS} iterations, at most {MAX_NODES} nodes)")
    opset = ctx.step[1]
    written = UnrolledBody(ctx, body)
    current, per_output = states, [[] for _ in range(outputs)]
    for i in range(steps):
        slices = []
        for name, axis, rev in zip(scans, in_axes, in_dirs):
            index = ctx.add_constant("scan_index", np.array(steps - 1 - i if rev else i, dtype=np.int64))
            slices.append(ctx.insert_before("Gather", [name, index], axis=axis).output[0])
        results = written.iteration([*current, *slices], i)
        current = results[:len(states)]
        for k, value in enumerate(results[len(states):]):
            per_output[k].append(unsqueezed(ctx, value, out_axes[k], opset))
    finals = list(current)
    for k in range(outputs):
        parts = per_output[k][::-1] if out_dirs[k] else per_output[k]
        finals.append(ctx.insert_before("Concat", parts, axis=out_axes[k]).output[0] if len(parts) > 1 else parts[0])
    written_for(ctx, finals)
