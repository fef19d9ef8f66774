"""The project's own output-shape rule for ReduceProd (versions 1, 11, 13, 18), and dim helpers.

A shape is a tuple of dims, or None when even the rank is unknown. A dim is an ``int``
(static), a ``str`` (symbolic, e.g. ``"N"``) or ``None`` (unknown).
"""

from __future__ import annotations

from collections.abc import Sequence

from rewriter.errors import RewriterError

__all__ = [
    "DYNAMIC_AXES",
    "REDUCE_PROD_VERSIONS",
    "ShapeRuleError",
    "reduce_prod_form",
    "reduce_prod_output_shape",
    "compatible",
    "first_conflict",
    "format_shape",
]

Dim = "int | str | None"

REDUCE_PROD_VERSIONS = (1, 11, 13, 18)


class _DynamicAxes:
    def __repr__(self) -> str:
        return "DYNAMIC_AXES"


#: Pass as ``axes`` when the node has an axes input whose value is not a constant.
DYNAMIC_AXES = _DynamicAxes()


class ShapeRuleError(RewriterError):
    """The node's axes are invalid for its data's rank."""


def reduce_prod_form(opset: int | None) -> int | None:
    """The ReduceProd schema version in force at default-domain ``opset`` (None if not imported)."""
    if opset is None or opset < 1:
        return None
    return max(v for v in REDUCE_PROD_VERSIONS if v <= opset)


def reduce_prod_output_shape(
    data_shape: Sequence | None,
    axes: Sequence[int] | None | _DynamicAxes = None,
    *,
    keepdims: bool = True,
    noop_with_empty_axes: bool = False,
    version: int = 18,
) -> tuple | None:
    """The output shape of ReduceProd, or None when its rank cannot be known.

    ``axes``: None when absent (attribute or input), a sequence of ints when constant,
    :data:`DYNAMIC_AXES` when given by a non-constant input (version 18 only).
    ``noop_with_empty_axes`` only exists at version 18 and is ignored below.
    Raises :class:`ShapeRuleError` when an axis is out of range for a known rank.
    """
    noop = bool(noop_with_empty_axes) and version >= 18
    shape = None if data_shape is None else tuple(data_shape)
    if axes is DYNAMIC_AXES:
        if not keepdims or shape is None:
            return None
        # each dim is either kept (noop on empty axes) or reduced to 1
        return tuple(1 if d == 1 else None for d in shape)
    axes = None if axes is None else [int(a) for a in axes]
    if not axes:
        if noop:
            return shape
        if not keepdims:
            return ()  # reduce everything to a scalar, whatever the rank
        return None if shape is None else (1,) * len(shape)
    if shape is None:
        return None
    rank = len(shape)
    reduced = set()
    for a in axes:
        if not -rank <= a < rank:
            raise ShapeRuleError(f"axis {a} is out of range for rank {rank} (axes {axes})")
        reduced.add(a % rank)
    if keepdims:
        return tuple(1 if i in reduced else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in reduced)


def first_conflict(a: Sequence | None, b: Sequence | None) -> str | None:
    """Why shapes ``a`` and ``b`` cannot describe the same tensor, or None when they can.

    Unknown ranks and unknown or symbolic dims never conflict; ranks or two numbers do.
    """
    if a is None or b is None:
        return None
    if len(a) != len(b):
        return f"rank {len(a)} vs {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, int) and isinstance(y, int) and x != y:
            return f"dim {i} is {x} vs {y}"
    return None


def compatible(a: Sequence | None, b: Sequence | None) -> bool:
    """True when shapes ``a`` and ``b`` may describe the same tensor."""
    return first_conflict(a, b) is None


def format_shape(shape: Sequence | None) -> str:
    """``[N,1,?]`` for a shape, ``?`` for an unknown rank."""
    if shape is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
