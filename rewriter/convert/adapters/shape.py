"""Shape across opset 15, which added the optional ``start``/``end`` attributes.

- up 13 -> 15: nothing changes (absent start/end mean the whole shape).
- down 15 -> 13: start/end that select the whole shape (start 0, or ``-rank``; end absent or
  ``>= rank``) are dropped; otherwise the node becomes Shape followed by a Slice of the 1-D
  shape with constant starts/ends, which clamps negative and out-of-range values exactly as
  Shape-15 does. The types steps (13, 19, 21, ...) are type-only and left to the engine.
"""

from __future__ import annotations

import numpy as np

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, record_type
from rewriter.graph.attributes import remove_attribute
from rewriter.convert.registry import register

__all__: list[str] = []

_INT64_MAX = np.iinfo(np.int64).max


@register("Shape", 13, 15, kind="new feature")
def shape_13_15(node, ctx) -> None:
    """Shape-15 without start/end is Shape-13."""


@register("Shape", 15, 13, kind="new feature")
def shape_15_13(node, ctx) -> None:
    start = attr_value(node, ctx, "start", 0)
    end = attr_value(node, ctx, "end", None)
    remove_attribute(node, "start")
    remove_attribute(node, "end")
    rank = ctx.rank(node.input[0])
    whole_start = start == 0 or (rank is not None and start <= -rank)
    whole_end = end is None or (rank is not None and end >= rank)
    if whole_start and whole_end:
        if end is not None or start != 0:
            ctx.record("Shape start/end selecting the whole shape dropped")
        return
    original = node.output[0]
    full = ctx.redirect_output(0)
    record_type(ctx, full, 7, [rank])
    starts = add_typed_constant(ctx, "shape_start", np.array([start], dtype=np.int64))
    ends = add_typed_constant(ctx, "shape_end", np.array([_INT64_MAX if end is None else end], dtype=np.int64))
    axes = add_typed_constant(ctx, "shape_axes", np.array([0], dtype=np.int64))
    ctx.insert_after("Slice", [full, starts, ends, axes], [original])
    ctx.record("Shape start/end -> Shape + Slice")
