"""Drop a nearest-neighbour upsample that a strided Slice undoes: ``Slice(Resize(x, 2x), ::2)`` is ``x``.

``F.interpolate(x, scale_factor=2, mode="nearest")[:, :, ::2, ::2]`` picks back exactly the
elements the upsample copied from x. For each resized axis the pass computes, with exact
fractions and the ONNX formulas, which input element every kept output element copies
(``coordinate_transformation_mode`` asymmetric, half_pixel, pytorch_half_pixel or
tf_half_pixel_for_nn; any ``nearest_mode``); when it is the input element at the same
position, for every element and every axis, the Slice's result is ``x`` itself.

Applies to Resize (opset 11+) with ``mode="nearest"``, constant ``scales`` that are powers of
two (their float32 arithmetic in a runtime is exact too), no ``sizes``, no ``axes``
attribute, static sizes on the sliced axes (an axis with scale 1 the Slice does not touch may
be symbolic unless tf_half_pixel_for_nn); and a Slice with constant parameters and positive steps whose
result is not a graph output. The Resize stays while something else reads it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import constant_array
from rewriter.graph.schemas import is_default_domain

__all__ = ["RemoveUpsampleSubsamplePass"]

_MODES = ("asymmetric", "half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn")


def _dims(value: ir.Value | None):
    """Dims as ints, None for a symbolic dim; None for an unknown rank."""
    if value is None or value.shape is None:
        return None
    return [d if isinstance(d, int) else None for d in value.shape.dims]


def _str_attr(node: ir.Node, name: str, default: str):
    attr = node.attributes.get(name)
    if attr is None:
        return default
    return None if attr.is_ref() else attr.as_string()


def _source(i: int, scale: Fraction, n_in: int, n_out: int, coord: str, nearest: str) -> int:
    """The input index output index ``i`` copies (ONNX Resize, nearest)."""
    if coord == "asymmetric":
        x = Fraction(i) / scale
    elif coord == "half_pixel" or (coord == "pytorch_half_pixel" and n_out > 1):
        x = (Fraction(i) + Fraction(1, 2)) / scale - Fraction(1, 2)
    elif coord == "pytorch_half_pixel":
        x = Fraction(0)
    else:  # tf_half_pixel_for_nn
        x = (Fraction(i) + Fraction(1, 2)) / scale
    if nearest == "floor":
        k = math.floor(x)
    elif nearest == "ceil":
        k = math.ceil(x)
    elif nearest == "round_prefer_ceil":
        k = math.floor(x + Fraction(1, 2))
    else:  # round_prefer_floor (the default)
        k = math.ceil(x - Fraction(1, 2))
    return min(max(k, 0), n_in - 1)


def _scales(resize: ir.Node, rank: int):
    inputs = list(resize.inputs)
    if len(inputs) < 3 or inputs[2] is None or (len(inputs) > 3 and inputs[3] is not None):
        return None
    scales = constant_array(inputs[2], max_size=16)
    if scales is None or scales.dtype.kind != "f" or scales.shape != (rank,):
        return None
    out = []
    for s in scales.tolist():
        if s < 1 or not float(s).is_integer() or int(s) & (int(s) - 1):
            return None
        out.append(Fraction(int(s)))
    return out


def _slice_indices(node: ir.Node, shape: list[int]):
    """Per axis, the indices the Slice keeps (a range), or None."""
    inputs = list(node.inputs) + [None] * (5 - len(node.inputs))
    arrays = [constant_array(v, max_size=16) if v is not None else None for v in inputs[1:5]]
    starts, ends, axes, steps = arrays
    if starts is None or ends is None or inputs[3] is not None and axes is None or inputs[4] is not None and steps is None:
        return None
    if any(a is not None and a.dtype.kind not in "iu" for a in arrays):
        return None
    n = len(starts)
    axes = list(range(n)) if axes is None else [int(a) + len(shape) if a < 0 else int(a) for a in axes]
    steps = [1] * n if steps is None else [int(s) for s in steps]
    if len(ends) != n or len(axes) != n or len(steps) != n or len(set(axes)) != n or any(s <= 0 for s in steps):
        return None
    if any(not 0 <= a < len(shape) for a in axes):
        return None
    kept: list = [None] * len(shape)  # None: the Slice does not touch this axis
    for start, end, axis, step in zip(starts.tolist(), ends.tolist(), axes, steps):
        if shape[axis] is None:
            return None
        kept[axis] = range(shape[axis])[slice(int(start), int(end), step)]
    return kept


class RemoveUpsampleSubsamplePass(NodeRewritePass):
    """Replace ``Slice(Resize(x))`` that gives back ``x`` by ``x`` (see the module doc)."""

    OPS = frozenset({"Slice"})
    DONE = 'removed %d Slice(s) that undo a nearest upsample'

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        self._try(scope.graph, node, scope.outputs)

    def _try(self, graph, node: ir.Node, outputs) -> None:
        up = node.inputs[0] if node.inputs else None
        resize = up.producer() if up is not None else None
        if resize is None or resize.op_type != "Resize" or not is_default_domain(resize.domain) or node.outputs[0] in outputs:
            return
        x = resize.inputs[0]
        a, b = _dims(x), _dims(up)
        if a is None or b is None or len(a) != len(b):
            return
        if _str_attr(resize, "mode", "nearest") != "nearest" or "axes" in resize.attributes:
            return
        coord = _str_attr(resize, "coordinate_transformation_mode", "half_pixel")
        nearest = _str_attr(resize, "nearest_mode", "round_prefer_floor")
        if coord not in _MODES or nearest not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            return
        scales = _scales(resize, len(a))
        kept = _slice_indices(node, b)
        if scales is None or kept is None:
            return
        for n_in, n_out, scale, idx in zip(a, b, scales, kept):
            if idx is None:  # an axis the Slice does not touch: kept whole
                if scale == 1 and coord != "tf_half_pixel_for_nn":
                    continue  # output i reads input i exactly, whatever the size
                if n_in is None:
                    return
                idx = range(n_out)
            if n_in is None or n_out != n_in * scale or len(idx) != n_in:
                return
            if any(_source(i, scale, n_in, n_out, coord, nearest) != k for k, i in enumerate(idx)):
                return
        if x.dtype is None or node.outputs[0].dtype not in (None, x.dtype):
            return
        node.outputs[0].replace_all_uses_with(x)
        graph.remove(node, safe=True)
        self.count += 1
