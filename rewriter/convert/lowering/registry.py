"""The lowerings, keyed the ONNX way: ``(domain, op_type) -> fn(ctx)``. A lowering writes the nodes
that compute the node's outputs through ``ctx.emit`` or refuses with ``ctx.block(reason)``."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ML", "LOWERINGS", "lowering", "Blocked"]

ML = "ai.onnx.ml"

LOWERINGS: dict[tuple[str, str], Callable] = {}


class Blocked(Exception):
    """A node that cannot be lowered exactly; the argument says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def lowering(op_type: str, domain: str = ML, *, exactness: str = ""):
    """Register ``fn(ctx)`` as the lowering of ``domain::op_type``; ``exactness`` is what
    :class:`rewriter.convert.lowering.LoweringReport` says of it."""

    def register(fn):
        fn.exactness = exactness
        LOWERINGS[(domain, op_type)] = fn
        return fn

    return register
