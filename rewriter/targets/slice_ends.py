"""``Slice`` / ``huge_ends_maximal`` (``rewrite_forms``; tract 0.23's data): exporters mark "to the
end of the axis" with a large constant end (jax2tf and tf2onnx: 1,000,000,000 or 2,147,483,647).
Over a dim that is not static, tract 0.23 takes the slice's length to be that end (magika's
``Conv_0/strided_slice``: its output dim becomes 1,000,000,000, and a later Reshape fails, "Reshape
volume mismatch"), and it runs the same slice with the end INT64_MAX.  Here each constant end of
at least 10^9 of a Slice with positive (or default) steps is written INT64_MAX, its other index
inputs int64 too (int32 ends become int64: tract reads INT32_MAX as a length): ONNX clamps an end
to the dim, so the values are the same for every dim below the end given.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.graph import traversal
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import taken_names
from rewriter.targets.restriction_lookups import constant_array

__all__ = ["HUGE", "huge_ends_maximal"]

HUGE = 10 ** 9  # an end at least this large reads "to the end of the axis"


def _as_int64(node: onnx.NodeProto, scope: traversal.Scope, taken: set, ends: np.ndarray) -> list[onnx.NodeProto]:
    """The Slice ``node`` reading ``ends`` and its other index inputs as int64 (tract takes only
    INT64_MAX for "to the end": INT32_MAX is a length to it, measured), each a new Constant, or a
    Cast to int64 where not constant; the nodes to add before it."""
    made = []
    for i in range(1, len(node.input)):
        if not node.input[i]:
            continue
        value = ends if i == 2 else constant_array(node.input[i], scope)
        name = fresh_name(taken, f"{node.input[i]}_{'maximal' if i == 2 else 'int64'}")
        if value is None:
            made.append(onnx.helper.make_node("Cast", [node.input[i]], [name], to=onnx.TensorProto.INT64,
                                              name=fresh_name(taken, name)))
        else:
            made.append(onnx.helper.make_node("Constant", [], [name], name=fresh_name(taken, name),
                                              value=numpy_helper.from_array(np.asarray(value, np.int64), name)))
        node.input[i] = name
    return made


def huge_ends_maximal(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each Slice (opset 10 or later: ends an input) whose constant ends hold a
    value of at least :data:`HUGE` other than an int64 INT64_MAX and whose steps are positive;
    one note naming them."""
    taken = taken_names(model)
    done = []
    for scope in traversal.iter_scopes(model):
        added = []
        for node in scope.body.node:
            if node.op_type != "Slice" or not is_default_domain(node.domain) or len(node.input) < 3:
                continue
            ends = constant_array(node.input[2], scope)
            steps = constant_array(node.input[4], scope) if len(node.input) > 4 and node.input[4] else None
            if ends is None or ends.dtype.kind != "i" or not (ends >= HUGE).any():
                continue
            if len(node.input) > 4 and node.input[4] and (steps is None or (steps <= 0).any()):
                continue
            if ends.dtype == np.int64 and ((ends < HUGE) | (ends == np.iinfo(np.int64).max)).all():
                continue  # (already INT64_MAX: nothing to write)
            wide = ends.astype(np.int64)  # (first: INT64_MAX in an int32 array would wrap to -1)
            added += _as_int64(node, scope, taken, np.where(wide >= HUGE, np.iinfo(np.int64).max, wide))
            done.append(node.name or node.output[0])
        if added:
            nodes = added + list(scope.body.node)
            del scope.body.node[:]
            scope.body.node.extend(nodes)
    if not done:
        return []
    return [f"{len(done)} Slice node(s) ending at 10^9 or more (\"to the end\") end at INT64_MAX ({release} "
            f"takes the slice's length to be that end over a dim that is not static): {first_few(repr(n) for n in done)}"]
