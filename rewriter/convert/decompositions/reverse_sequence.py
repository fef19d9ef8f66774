"""ReverseSequence (no function body in ONNX) as a GatherElements along the time axis, for targets
that lack it (tract 0.23 and TVM 0.27 refuse it at load; Keras bidirectional RNNs exported by
tf2onnx reverse their sequences so).

For time index i and batch index j the element taken is ``lens[j] - 1 - i`` where
``i < lens[j]``, else ``i`` itself: the index tensor is ``Where(Less(i, lens), lens - 1 - i, i)``
with i a ``Range(0, T)`` and ``lens`` the sequence lengths, laid out along the time and batch
axes, Expanded to the input's shape and read by GatherElements on the time axis. Only indices are
computed, so the result is the input's elements, bit for bit, for any element type and for dims
that are not static. The nodes are written at the node's own opset; below 11, which has no
GatherElements, it is refused.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.decompositions import decomposition
from rewriter.convert.decompositions.scan import unsqueezed
from rewriter.graph.attributes import attribute_value

__all__: list[str] = []


@decomposition("ReverseSequence", None)
def reverse_sequence_gathered(node: onnx.NodeProto, ctx) -> None:
    """ReverseSequence as GatherElements (see the module doc); time_axis and batch_axis are 0 and 1."""
    x, lens = node.input[0], node.input[1]
    opset = ctx.step[1]
    if opset < 11:
        ctx.block(f"its form, GatherElements, exists only from opset 11 (the model's is {opset})")
    rank = ctx.rank(x)
    if rank is None:
        ctx.block("the input's rank is not known, and the index tensor is laid out by it")
    time, batch = int(attribute_value(node, "time_axis", 0)), int(attribute_value(node, "batch_axis", 1))
    zero, one, axis = (ctx.add_constant(h, np.array(v, dtype=np.int64)) for h, v in
                       (("rs_zero", 0), ("rs_one", 1), ("rs_time_axis", time)))
    shape = ctx.insert_before("Shape", [x]).output[0]
    length = ctx.insert_before("Gather", [shape, axis], axis=0).output[0]  # (a scalar index: a scalar)
    steps = ctx.insert_before("Range", [zero, length, one]).output[0]
    # i along the time axis and lens along the batch axis of a [T, B] or [B, T] grid
    i = unsqueezed(ctx, steps, 1 - time, opset)
    n = ctx.insert_before("Cast", [lens], to=onnx.TensorProto.INT64).output[0]
    n = unsqueezed(ctx, n, 1 - batch, opset)
    back = ctx.insert_before("Sub", [ctx.insert_before("Sub", [n, one]).output[0], i]).output[0]
    inside = ctx.insert_before("Less", [i, n]).output[0]
    index = ctx.insert_before("Where", [inside, back, i]).output[0]
    for k in range(2, rank):
        index = unsqueezed(ctx, index, k, opset)
    index = ctx.insert_before("Expand", [index, shape]).output[0]
    ctx.insert_before("GatherElements", [x, index], [node.output[0]], axis=time)
    ctx.remove()
