"""Opset 11 allowed negative axes in the ops that take an axis (the Reduce family, ReduceProd
included, Squeeze, Softmax, ...): going below 11 they are normalized with the rank of the tensor
they index; going up nothing changes. The valid range is [-rank, rank - 1] (Flatten's axis:
[-rank, rank]); an axis outside it is refused, negative or not, whenever the rank is known.
"""

from __future__ import annotations

import numpy as np

from rewriter.graph.attributes import attribute, set_ints
from rewriter.convert.registry import register

__all__: list[str] = []

# op -> (schema version below 11, attribute, where the rank comes from: "input" = input 0,
# "output" = output 0 ("Unsqueeze", whose axes index the output), "plus1" = input 0 + 1 (OneHot))
_OPS = {
    "ArgMax": (1, "axis", "input"), "ArgMin": (1, "axis", "input"), "Compress": (9, "axis", "input"),
    "Concat": (4, "axis", "input"), "Flatten": (9, "axis", "input"), "Gather": (1, "axis", "input"),
    "Hardmax": (1, "axis", "input"), "LogSoftmax": (1, "axis", "input"), "Softmax": (1, "axis", "input"),
    "ReduceL1": (1, "axes", "input"), "ReduceL2": (1, "axes", "input"), "ReduceLogSum": (1, "axes", "input"),
    "ReduceLogSumExp": (1, "axes", "input"), "ReduceMax": (1, "axes", "input"),
    "ReduceMean": (1, "axes", "input"), "ReduceMin": (1, "axes", "input"), "ReduceProd": (1, "axes", "input"),
    "ReduceSum": (1, "axes", "input"),
    "ReduceSumSquare": (1, "axes", "input"), "Squeeze": (1, "axes", "input"),
    "Unsqueeze": (1, "axes", "output"), "Split": (2, "axis", "input"), "OneHot": (9, "axis", "plus1"),
    "Scatter": (9, "axis", "input"),
}


def _rank(node, ctx, where: str) -> int | None:
    if where == "output":
        r = ctx.rank(node.output[0])
        if r is None:
            r_in = ctx.rank(node.input[0])
            axes = attribute(node, "axes")
            r = r_in + len(axes.ints) if r_in is not None and axes is not None else None
        return r
    r = ctx.rank(node.input[0])
    return r + 1 if r is not None and where == "plus1" else r


def _normalize(node, ctx) -> None:
    _, name, where = _OPS[node.op_type]
    attr = attribute(node, name)
    if attr is None:
        return
    if attr.ref_attr_name:
        ctx.block(f"{name} {'comes' if name == 'axis' else 'come'} from the calling node's attribute "
                  f"'{attr.ref_attr_name}', so negative values among them cannot be normalized below opset 11")
    values = list(attr.ints) if name == "axes" else [attr.i]
    negative = any(v < 0 for v in values)
    rank = _rank(node, ctx, where)
    if rank is None:
        if not negative:
            return  # nothing to normalize, and no rank to check the range with
        ctx.block(f"negative {name} {values if name == 'axes' else values[0]} cannot be converted below "
                  f"opset 11 because the rank of '{node.input[0]}' is unknown")
    # valid: [-rank, rank - 1], and for Flatten [-rank, rank] (its axis may equal the rank)
    top = rank + 1 if node.op_type == "Flatten" else rank
    normalized = []
    for v in values:
        if not -rank <= v < top:
            ctx.block(f"axis {v} is out of range for rank {rank}")
        normalized.append(v + rank if v < 0 else v)
    if not negative:
        return
    if name == "axes":
        set_ints(node, name, normalized)
    else:
        attr.i = normalized[0]
    ctx.record("negative axes normalized")


def _unchanged(node, ctx) -> None:
    """Opset 11 only widened the accepted range: nothing to do going up."""


for _op, (_low, _name, _where) in _OPS.items():
    register(_op, 11, _low, kind="meaning change")(_normalize)
    register(_op, _low, 11, kind="type-only")(_unchanged)


@register("Slice", 11, 10, kind="meaning change")
def slice_11_10(node, ctx) -> None:
    """Slice-10's axes input must not be negative: a constant one is normalized."""
    if len(node.input) < 4 or not node.input[3]:
        return
    axes = ctx.constant(node.input[3])
    if axes is None:
        ctx.block(f"axes input '{node.input[3]}' is not a constant, so negative values cannot be ruled out "
                  f"below opset 11")
    rank = ctx.rank(node.input[0])
    if rank is None:
        if (axes >= 0).all():
            return
        ctx.block(f"negative axes cannot be converted below opset 11 because the rank of '{node.input[0]}' "
                  f"is unknown")
    if ((axes < -rank) | (axes >= rank)).any():
        ctx.block(f"axes {axes.tolist()} are out of range for rank {rank}")
    if (axes >= 0).all():
        return
    fixed = np.where(axes < 0, axes + rank, axes).astype(axes.dtype)
    ctx.maybe_unused(node.input[3])
    node.input[3] = ctx.add_constant("slice_axes", fixed)
    ctx.record("negative axes normalized")


@register("Slice", 10, 11, kind="type-only")
def slice_10_11(node, ctx) -> None:
    """Nothing to do going up."""
