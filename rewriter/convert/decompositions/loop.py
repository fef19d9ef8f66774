"""Loop (no function body in ONNX) unrolled over its trip count when constants and static shapes
decide it, for targets that lack it (tract 0.23, TVM 0.27, LiteRT 2.6): a ``for`` loop (a trip
count M, the condition passed on unchanged) or a ``while`` loop whose condition the body computes
from its iteration number, its loop-carried values and constants, as tf2onnx writes
``while t < len`` (an RNN over a sequence whose length is a dim of the input).

The trip count is found before anything is written (:func:`rewriter.graph.loop_trips.trip_count`:
M and the initial condition read as constants or from static shapes, ``--input-shape``; a
condition the body computes evaluated with the body's nodes it depends on, iteration by
iteration). Then the body is written once per iteration (``scan.UnrolledBody``): its iteration
number a constant, its condition input true (every iteration written runs), its loop-carried
inputs the values of the iteration before; each scan output is the iterations' values Unsqueezed
at axis 0 and Concatenated in order; the final loop-carried values are the last iteration's. The
copies compute exactly what the body computes.

Refused, with the reason: sequence or optional values in the body, a trip count not decided before the run (the refusal names the inputs to
give with ``--input-shape``), more than :data:`scan.MAX_NODES` body nodes written in all, a body
with subgraphs of its own, and zero iterations with a scan output used (its shape is not written).
The body's nodes are valid at the model's opset, so the decomposition is registered for the
node's own opset.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.decompositions import decomposition
from rewriter.convert.decompositions.scan import MAX_NODES, UnrolledBody, unsqueezed, without_subgraphs, written_for
from rewriter.graph import traversal
from rewriter.graph.loop_trips import KnownValues, NotDecided, trip_count

__all__: list[str] = []


def _producer(ctx):
    def producer(name: str) -> onnx.NodeProto | None:
        kind, node, _ = traversal.definition(name, ctx.scope)
        return node if kind == "node" else None

    return producer


def _trips(ctx) -> int:
    values = KnownValues(ctx.constant, ctx.shape, _producer(ctx), ctx.scope.opset)
    try:
        trips = trip_count(ctx.node, values)
    except NotDecided as e:
        from rewriter.targets.static_dims import dynamic_inputs

        inputs = ", ".join(dynamic_inputs(ctx.model))
        ctx.block(f"{e}, and the unrolled form needs the trip count" +
                  (f": give --input-shape NAME:DIMS for {inputs} (or --fix-dim SYMBOL=N)" if inputs else ""))
    for name in values.read:
        ctx.maybe_unused(name)
    return trips


@decomposition("Loop", None)
def loop_unrolled(node: onnx.NodeProto, ctx) -> None:
    """Loop unrolled over its trip count (see the module doc)."""
    body = without_subgraphs(ctx)
    kinds = {v.type.WhichOneof("value") for v in (*body.input, *body.output)}
    if kinds - {"tensor_type", None}:
        ctx.block(f"a Loop carrying {', '.join(sorted(k.replace('_type', '') for k in kinds - {'tensor_type', None}))} "
                  f"values is not unrolled (tensors only)")
    carried = list(node.input[2:])
    scans = len(body.output) - 1 - len(carried)
    trips = _trips(ctx)
    if trips * len(body.node) > MAX_NODES:
        ctx.block(f"{trips} iterations of a body of {len(body.node)} nodes are not unrolled (at most {MAX_NODES} nodes)")
    used_scans = [out for out in node.output[len(carried):] if out]
    if trips == 0 and used_scans:
        ctx.block(f"the loop runs no iteration, and its scan outputs ({', '.join(used_scans)}) have no shape to write")
    written = UnrolledBody(ctx, body)
    current, per_output = carried, [[] for _ in range(scans)]
    for i in range(trips):
        number = ctx.add_constant("loop_iteration", np.array(i, dtype=np.int64))
        going = ctx.add_constant("loop_condition", np.array(True))
        results = written.iteration([number, going, *current], i)
        current = results[1:1 + len(carried)]
        for k, value in enumerate(results[1 + len(carried):]):
            per_output[k].append(unsqueezed(ctx, value, 0, ctx.step[1]))
    finals = list(current)
    for parts in per_output:
        finals.append(ctx.insert_before("Concat", parts, axis=0).output[0] if len(parts) > 1 else
                      parts[0] if parts else "")
    written_for(ctx, finals)
