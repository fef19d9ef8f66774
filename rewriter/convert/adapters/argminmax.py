"""ArgMax/ArgMin across opset 12, which added ``select_last_index`` (default 0).

- up 11 -> 12: nothing.
- down 12 -> 11: select_last_index=0 is dropped; 1 becomes ``(n - 1) - ArgX(reverse(data))``
  along the axis: a Slice with step -1 reverses the data (ArgX then finds the last of equal
  values first), Shape + Gather give n (the data may have a dynamic shape) and two Subs map the
  index back. Exact. (Slice's negative steps exist from opset 10, so such a node stops there.)
(1 <-> 11 negative axes: ``negative_axes.py``; 12 <-> 13: types.)
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import attr_value, record_type
from rewriter.graph.attributes import remove_attribute
from rewriter.convert.registry import register

__all__: list[str] = []

_INT64 = onnx.TensorProto.INT64


@register(("ArgMax", 11, 12), ("ArgMin", 11, 12), kind="new feature")
def argx_11_12(node, ctx) -> None:
    """ArgX-12 with select_last_index=0 is ArgX-11."""


@register(("ArgMax", 12, 11), ("ArgMin", 12, 11), kind="new feature")
def argx_12_11(node, ctx) -> None:
    last = attr_value(node, ctx, "select_last_index", 0)
    remove_attribute(node, "select_last_index")
    if not last:
        return
    axis = attr_value(node, ctx, "axis", 0)
    data = node.input[0]
    shape = ctx.shape(data)
    rank = len(shape) if shape is not None else None
    if rank is not None:
        if not -rank <= axis < rank:
            ctx.block(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
    elem = ctx.elem_type(data)
    starts = ctx.add_constant("argx_start", np.array([-1], dtype=np.int64))
    ends = ctx.add_constant("argx_end", np.array([np.iinfo(np.int64).min], dtype=np.int64))
    axes = ctx.add_constant("argx_axis", np.array([axis], dtype=np.int64))
    steps = ctx.add_constant("argx_step", np.array([-1], dtype=np.int64))
    reversed_ = ctx.insert_before("Slice", [data, starts, ends, axes, steps]).output[0]
    record_type(ctx, reversed_, elem, shape)
    dims = ctx.insert_before("Shape", [data]).output[0]
    record_type(ctx, dims, _INT64, [rank] if rank is not None else None)
    index = ctx.add_constant("argx_axis_index", np.array(axis, dtype=np.int64))
    n = ctx.insert_before("Gather", [dims, index], axis=0).output[0]
    record_type(ctx, n, _INT64, [])
    one = ctx.add_constant("argx_one", np.array(1, dtype=np.int64))
    last_index = ctx.insert_before("Sub", [n, one]).output[0]
    record_type(ctx, last_index, _INT64, [])
    node.input[0] = reversed_
    original = node.output[0]
    out_type = ctx.value_type(original)
    found = ctx.redirect_output(0)
    if out_type is not None:
        ctx.set_type(found, out_type)
    ctx.insert_after("Sub", [last_index, found], [original])
    ctx.record(f"{node.op_type} select_last_index=1 -> reversed data")
