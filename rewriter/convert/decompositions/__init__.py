"""Exact decompositions of ops that ONNX defines without a function body (Einsum, DFT, STFT):
the engine's route for such an op when the target lacks it (an older opset, or a runtime
target that does not implement it), after constant evaluation and before a refusal.

A decomposition ``fn(node, ctx)`` gets the node and a :class:`rewriter.convert.context.NodeContext`
whose step is ``(source schema version, opset)``: it checks its exactness condition (stated in
its docstring) and refuses with ``ctx.block(reason)`` when it fails, else inserts the nodes that
compute the node's outputs (``ctx.insert_before``, valid at ``opset``; ``insert_before_at_target``
for nodes written for the target) and calls ``ctx.remove()``. The engine converts those nodes
onward to the target, so an op a decomposition uses must convert too.

Importing this package imports every module in it; each module's :func:`decomposition`
decorators fill :data:`DECOMPOSITIONS`.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

__all__ = ["DECOMPOSITIONS", "REORDERED_SUMS", "decomposition", "lookup"]

Decomposition = Callable[..., None]

# op -> (the opset the inserted nodes are written for, None for the node's own, the decomposition)
DECOMPOSITIONS: dict[str, tuple[int | None, Decomposition]] = {}
# the ops whose decomposition computes long float sums in another order than the op's kernels
# (a DFT as a MatMul): the results agree within a tolerance that grows with the output's scale
REORDERED_SUMS: set[str] = set()


def decomposition(op_type: str, opset: int | None, *, reorders_sums: bool = False):
    """Register ``fn`` as the exact decomposition of ``op_type`` into nodes valid at ``opset`` (None:
    at the node's own opset, as a Scan's unrolled body is); ``reorders_sums`` when it sums floats in
    another order than the op's kernels do."""

    def wrap(fn: Decomposition) -> Decomposition:
        if op_type in DECOMPOSITIONS:
            raise ValueError(f"two decompositions of {op_type}")
        DECOMPOSITIONS[op_type] = (opset, fn)
        if reorders_sums:
            REORDERED_SUMS.add(op_type)
        return fn

    return wrap


def lookup(op_type: str) -> tuple[int | None, Decomposition] | None:
    return DECOMPOSITIONS.get(op_type)


for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
