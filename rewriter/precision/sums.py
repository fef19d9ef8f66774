"""Which sums a weight's rounding to half keeps (:class:`rewriter.io.half.Rounding`).

A filter whose taps nearly cancel (an edge detector: taps of 10 summing to 0.01) answers a
smooth input with that small sum; rounding each tap to nearest moves the sum by about the
taps' own rounding, which is then a large part of it. Natural inputs are mostly smooth
(pictures, spectra, and activations after a ReLU, whose mean is far from 0), so such a filter's
response to them is off by far more than half precision's relative step: EfficientNet-Lite0's
trained weights alone, rounded to nearest, move its output on a photograph by 1.4e-2, and by
4e-3 on random inputs, which are not smooth. Rounding a few taps the other way keeps each sum
close to its float32 value while every tap stays within one unit in the last place.

The groups are what one output sums over: a Conv's taps over its kernel for each (output,
input) channel pair, or over its input channels when the kernel is one tap; a MatMul or Gemm
weight's inputs for each output; an RNN's weights for each gate unit. A weight read in half
by readers that group it differently, or by any other op, is rounded to nearest.
"""

from __future__ import annotations

import math

import onnx

from rewriter.graph.schemas import is_default_domain
from rewriter.io.half import SUM_BLOCK
from rewriter.precision.plan import attribute

__all__ = ["kept_sums"]

_MAX_COLUMNS_BLOCK = 1 << 24  # ("cols", n) balances SUM_BLOCK rows of n at a time: bounded memory
_RNN = frozenset({"RNN", "GRU", "LSTM"})


def _grouping(node: onnx.NodeProto, i: int, shape: tuple) -> tuple | None:
    """The sums ``node`` computes over its constant input ``i`` of ``shape``, or None."""
    if not is_default_domain(node.domain):
        return None
    op, rank = node.op_type, len(shape)
    if op in ("Conv", "ConvTranspose") and i == 1 and rank >= 3:
        taps = math.prod(shape[2:])
        if taps > 1:
            return ("rows", taps)  # per (output, input) channel pair, over the kernel
        # one tap: Conv [M, C/g, 1..] sums over its input channels (a row); ConvTranspose
        # [C, M/g, 1..] over C, for each output channel (a column)
        return ("rows", shape[1]) if op == "Conv" else ("cols", shape[1])
    if op == "MatMul" and rank == 2:
        return ("cols", shape[1]) if i == 1 else ("rows", shape[1]) if i == 0 else None
    if op == "Gemm" and rank == 2 and i in (0, 1):
        a = attribute(node, "transB" if i == 1 else "transA")
        transposed = a is not None and a.i
        # B [K, N] sums each column (transB: [N, K], each row); A [M, K] each row (transA: columns)
        return ("rows", shape[1]) if (i == 1) == bool(transposed) else ("cols", shape[1])
    if op in _RNN and i in (1, 2) and rank == 3:
        return ("rows", shape[2])  # W [dirs, gates*H, I], R [dirs, gates*H, H]: each unit's inputs
    return None


def kept_sums(shape, readers) -> tuple | None:
    """The groups whose sums rounding a constant of ``shape`` to half keeps, when every one of
    ``readers`` ((node, input position) reading it in half) sums it the same way; else None
    (round to nearest)."""
    shape = tuple(int(d) for d in shape)
    found = {_grouping(node, i, shape) for node, i in readers}
    if len(found) != 1:
        return None
    sums = found.pop()
    if sums is None or sums[1] < 2 or (sums[0] == "cols" and sums[1] * SUM_BLOCK > _MAX_COLUMNS_BLOCK):
        return None
    return sums
