"""A Slice that reverses part of an axis written as a positive Slice then a reversal of the whole
axis, for a release whose ``form_verdicts`` say it refuses the first form (``negative_steps``:
LiteRT's onnx2tf 2.6.9 writes a custom op for ``x[:, 119::-1]``, as onnx-asr's kaldi features
slice, and runs ``x[:, ::-1]``).

With step -1 along one axis from a constant start s >= 0 to a constant end e != -1 (the other
axes' steps 1), ONNX's clamping gives the elements s', s' - 1, ..., e' + 1 (s' = min(s, dim - 1);
e' = e, or e + dim when negative, at least -1): the same elements, reversed, as the positive slice
from e + 1 to s + 1 (which clamps alike: e + 1 <= -dim gives 0, s + 1 > dim gives dim). e = -1
(the last element: an empty slice) and s < 0 are left as they are; so is every other negative
step. The reversal is Slice(y, [-1], [INT64_MIN], [axis], [-1])."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph.constants import constant_value
from rewriter.graph.names import fresh_name
from rewriter.targets.measured_verdicts import (
    NEGATIVE_STEPS,
    node_versions,
    read_or_none,
    rewrite_note,
)

__all__ = ["reversed_slices"]

_LOW, _HIGH = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _plan(node: onnx.NodeProto, scope) -> tuple | None:
    """(starts, ends, axes, the reversed axis) of the positive Slice, or None when the rule does not hold."""
    values = [constant_value(n, scope, read_or_none) if n else None for n in node.input[1:5]]
    if len(values) < 4 or any(v is None for v in (values[0], values[1], values[3])):
        return None
    starts, ends, steps = (np.asarray(values[i], np.int64).reshape(-1).tolist() for i in (0, 1, 3))
    axes = np.asarray(values[2], np.int64).reshape(-1).tolist() if values[2] is not None else list(range(len(starts)))
    if node.input[3] and values[2] is None:
        return None  # axes fed at run time
    back = [i for i, step in enumerate(steps) if step < 0]
    if len(back) != 1 or steps[back[0]] != -1 or any(step != 1 for i, step in enumerate(steps) if i != back[0]):
        return None
    i = back[0]
    s, e = starts[i], ends[i]
    if s < 0 or e == -1 or e >= s:  # (e >= s >= 0: an empty slice)
        return None
    starts[i], ends[i] = e + 1, min(s, _HIGH - 1) + 1  # (e = INT64_MIN: INT64_MIN + 1 clamps to 0 alike)
    return starts, ends, axes, axes[i]


def _const(name: str, values, taken: set) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=fresh_name(taken, name),
                            value=numpy_helper.from_array(np.array(values, np.int64), name))


def reversed_slices(model: onnx.ModelProto, table: dict, release: str) -> list[str]:
    """Rewrite, in place, every Slice of a version whose ``negative_steps`` form ``table``
    (``form_verdicts``) says is not right and that the rule above covers; the notes."""
    bad = {int(v) for v, forms in table.get("", {}).get("Slice", {}).items() if forms.get(NEGATIVE_STEPS, "ok") != "ok"}
    if not bad:
        return []
    found = [(node, scope) for node, scope, domain, version in node_versions(model)
             if domain == "" and node.op_type == "Slice" and version in bad and len(node.input) > 4 and node.input[4]]
    done = []
    for node, scope in found:
        plan = _plan(node, scope)
        if plan is None:
            continue
        starts, ends, axes, axis = plan
        taken = {o for n in scope.body.node for o in [*n.output, n.name]} | {t.name for t in scope.body.initializer}
        base = node.name or node.output[0]
        names = [fresh_name(taken, f"{base}_forward_{k}") for k in ("starts", "ends", "axes", "steps", "out")]
        rev = [fresh_name(taken, f"{base}_reverse_{k}") for k in ("starts", "ends", "axes", "steps")]
        new = [_const(names[0], starts, taken), _const(names[1], ends, taken), _const(names[2], axes, taken),
               _const(names[3], [1] * len(axes), taken),
               helper.make_node("Slice", [node.input[0], *names[:4]], [names[4]], name=fresh_name(taken, f"{base}_forward")),
               _const(rev[0], [-1], taken), _const(rev[1], [_LOW], taken), _const(rev[2], [axis], taken),
               _const(rev[3], [-1], taken)]
        body = scope.body.node
        at = list(body).index(node)
        for k, n in enumerate(new):
            body.insert(at + k, n)
        del node.input[:]
        node.input.extend([names[4], *rev])
        done.append(node.name or node.output[0])
    return rewrite_note(done, "Slice node(s) reversing part of an axis written as a positive Slice and a whole-axis "
                              "reversal", release)
