"""Rounding a float32 weight to half precision: the one home of the algorithm, its native
kernel's binding, which sums it keeps, and the key a deferred tensor carries.

Each value is rounded to nearest even; ``clamp`` first brings finite magnitudes beyond float16's
range to its largest (exact for an additive mask). Kept sums: a filter whose taps nearly cancel
(an edge detector: taps of 10 summing to 0.01) answers a smooth input with that small sum;
rounding each tap to nearest moves the sum by about the taps' own rounding, which is then a large
part of it. Natural inputs are mostly smooth (pictures, spectra, activations after a ReLU), so
such a filter's response is off by far more than half precision's relative step: EfficientNet-
Lite0's trained weights alone, rounded to nearest, move its output on a photograph by 1.4e-2.
Rounding a few taps the other way keeps each sum close to its float32 value while every tap stays
within one unit in the last place. The groups are what one output sums over: a Conv's taps over
its kernel per (output, input) channel pair, or its input channels when the kernel is one tap; a
MatMul or Gemm weight's inputs per output; an RNN's weights per gate unit. A weight read in half
by readers that group it differently, or by any other op, is rounded to nearest.

A weight that is a reference (a model of any size) is not converted here: it becomes a deferred
tensor (:mod:`rewriter.io.deferred`) whose producer, registered below as ``"half"``, rounds its
float32 bytes when it is read or written, chunk by chunk.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.graph.attributes import attribute
from rewriter.graph.schemas import is_default_domain
from rewriter.io import deferred

__all__ = ["Rounding", "to_half", "balanced", "kept_sums", "half_tensor", "half_of", "F16_MAX", "SUM_BLOCK"]

F16_MAX = float(np.finfo(np.float16).max)
SUM_BLOCK = 256  # a sum is kept over runs of at most this many elements, each on its own
_SUMS_CHUNK = 1 << 20  # elements balanced at a time (the balancing holds a few arrays of this size)
_MAX_COLUMNS_BLOCK = 1 << 24  # ("cols", n) balances SUM_BLOCK rows of n at a time: bounded memory
_RNN = frozenset({"RNN", "GRU", "LSTM"})
_PRODUCER = "half"


@dataclasses.dataclass(frozen=True)
class Rounding:
    """How float32 values become half: ``clamp`` finite magnitudes beyond float16's range to its
    largest; ``sums`` keep the sums of groups of weights: ``("rows", n)``, each run of ``n``
    consecutive elements (a Conv filter's taps over its kernel), or ``("cols", n)``, each column
    of the tensor seen as ``[-1, n]`` (a MatMul weight's inputs for one output), kept over
    blocks of :data:`SUM_BLOCK`. None: round each value to nearest even."""

    clamp: bool = False
    sums: tuple | None = None

    def key(self) -> str:
        return ("clamp" if self.clamp else "round") + (f";{self.sums[0]}={self.sums[1]}" if self.sums else "")

    @staticmethod
    def parse(value: str) -> "Rounding | None":
        head, _, tail = value.partition(";")
        if head not in ("clamp", "round"):
            return None
        kind, _, n = tail.partition("=")
        sums = (kind, int(n)) if kind in ("rows", "cols") and n.isdigit() and int(n) > 0 else None
        return Rounding(head == "clamp", sums)

    def unit(self) -> int:
        """Elements a chunk holds whole groups of: rows, or SUM_BLOCK rows of columns."""
        if self.sums is None:
            return 1
        kind, n = self.sums
        return n * (SUM_BLOCK if kind == "cols" else 1)


def to_half(value: np.ndarray, elem: int, clamp: bool, sums: tuple | None = None) -> np.ndarray:
    """float32 ``value`` in float16 (``elem`` FLOAT16) or bfloat16, rounded to nearest even;
    with ``clamp``, finite magnitudes beyond float16's range become its largest; with ``sums``
    (see :class:`Rounding`), rounded so each group's sum stays as close to its float32 sum as
    rounding a few elements the other way can bring it (:func:`balanced`)."""
    half = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    v = np.asarray(value, dtype=np.float32)
    if clamp:
        v = np.where(np.isfinite(v), np.clip(v, -F16_MAX, F16_MAX), v)
    if sums is not None and v.size:
        return balanced(v, half, sums)
    return v.astype(half)


def _native_balance(w: np.ndarray, h_bits: np.ndarray, k: int, cols: int, bfloat16: bool) -> bool:
    """:func:`_balance` in the native extension: ``h_bits`` (uint16, ``w`` rounded to nearest) is
    rewritten in place; groups are runs of ``k`` values (``cols`` 0) or the columns of blocks of
    ``k`` rows of ``w`` seen as ``[-1, cols]``. False, with nothing done, without the extension."""
    from rewriter import kernels

    native = kernels.native_extension()
    if native is None:
        return False
    native.balance(w, h_bits, int(k), int(cols), 1 if bfloat16 else 0, kernels.kernel_threads())
    return True


def _balance(w: np.ndarray, half, block: int = 0) -> np.ndarray:
    """``w`` (2-D float32) in ``half``, each group's sum kept; the groups are ``w``'s rows, or,
    with ``block``, the columns of each ``block`` consecutive rows. Each value is rounded to
    nearest even; then, in every group, values are taken in order of what rounding them the
    other way costs (:func:`_order`), and each is rounded to its other neighbour when that brings
    the group's sum nearer its float32 sum (each value stays within one unit in the last place
    of its float32 value). The native kernel computes it group by group; without it,
    :func:`_balance_numpy` gives the same bits."""
    w = np.ascontiguousarray(w, dtype=np.float32)
    h = w.astype(half)
    k = block or w.shape[1]
    if 0 < k <= 4096 and _native_balance(w, h.view(np.uint16), k, w.shape[1] if block else 0, h.dtype != np.float16):
        return h
    if not block:
        return _balance_numpy(w, h)
    n = w.shape[1]  # columns of blocks: as rows [blocks * n, block], and back
    rows = lambda a: np.ascontiguousarray(a.reshape(-1, block, n).transpose(0, 2, 1)).reshape(-1, block)  # noqa: E731
    return _balance_numpy(rows(w), rows(h)).reshape(-1, n, block).transpose(0, 2, 1).reshape(w.shape)


def _balance_numpy(w: np.ndarray, h: np.ndarray) -> np.ndarray:
    """:func:`_balance` in numpy, every group at once; ``h`` is ``w`` rounded to nearest. The
    same arithmetic in the same order as the native kernel (float32 errors and steps, float64
    sums taken in order), so both give the same bits."""
    hf = h.astype(np.float32)
    e = hf - w  # exact (Sterbenz): each value's rounding error
    # the other neighbour: one step further from 0 when rounded toward 0, else one step nearer
    # (float16 and bfloat16 are sign-magnitude: +-1 on the bits moves the magnitude, 0 included)
    away = (e < 0) != np.signbit(w)
    alt = (h.view(np.uint16) + np.where(away, np.uint16(1), np.uint16(0xFFFF))).view(h.dtype)
    delta = alt.astype(np.float32) - hf
    ok = (e != 0) & np.isfinite(e) & np.isfinite(delta)
    total = np.cumsum(np.where(np.isfinite(e), e, np.float32(0)), axis=1, dtype=np.float64)[:, -1] \
        if w.shape[1] else np.zeros(w.shape[0])
    order = np.argsort(_order(e, delta, ok, w.shape[1]), axis=1, kind="stable")
    rows = np.arange(w.shape[0])
    flip = np.zeros(w.shape, dtype=bool)
    for j in range(w.shape[1]):
        idx = order[:, j]
        candidate = ok[rows, idx]
        if not candidate.any():
            break  # (the rest are not candidates either: they sort last)
        step = delta[rows, idx].astype(np.float64)
        better = candidate & (np.abs(total + step) < np.abs(total))
        total = np.where(better, total + step, total)
        flip[rows[better], idx[better]] = True
    return np.where(flip, alt, h)


def _order(e: np.ndarray, delta: np.ndarray, ok: np.ndarray, k: int) -> np.ndarray:
    """The order a group's values are tried in, as keys: by what rounding each the other way
    adds to its error (``|step| - 2|e|``: 0 at the midpoint of its two neighbours), to the power
    of two (float32's exponent field), cheapest first, then by position; values that cannot
    move last."""
    cost = np.abs(delta) - np.float32(2) * np.abs(e)
    level = ((cost.view(np.uint32) >> 23) & 0xFF).astype(np.int64)
    return np.where(ok, level, 256) * k + np.arange(k)


def balanced(v: np.ndarray, half, sums: tuple) -> np.ndarray:
    """float32 ``v`` in ``half`` keeping the sums ``sums`` names (:class:`Rounding`), over
    blocks of at most :data:`SUM_BLOCK` elements each balanced on its own (zeros pad the last)."""
    kind, n = sums
    flat = v.reshape(-1)
    if n < 2 or flat.size % n:
        return v.astype(half)
    if kind == "rows":
        width = -(-n // SUM_BLOCK)  # blocks a row splits into
        grid = np.pad(flat.reshape(-1, n), ((0, 0), (0, width * SUM_BLOCK - n))) if n > SUM_BLOCK else \
            flat.reshape(-1, n)
        out = np.empty(grid.shape, dtype=half)
        rows_at = max(1, _SUMS_CHUNK // grid.shape[1])
        for start in range(0, grid.shape[0], rows_at):
            part = grid[start:start + rows_at]
            out[start:start + rows_at] = _balance(part.reshape(-1, min(n, SUM_BLOCK)), half).reshape(part.shape)
        return out[:, :n].reshape(v.shape)
    grid = flat.reshape(-1, n)  # ("cols", n): each column of [-1, n], SUM_BLOCK rows at a time
    out = np.empty(grid.shape, dtype=half)
    step = max(1, _SUMS_CHUNK // (SUM_BLOCK * n)) * SUM_BLOCK
    for start in range(0, grid.shape[0], step):
        part = grid[start:start + step]
        whole = part.shape[0] // SUM_BLOCK * SUM_BLOCK
        if whole:
            out[start:start + whole] = _balance(part[:whole], half, block=SUM_BLOCK)
        if whole < part.shape[0]:  # the last rows: one block of fewer
            out[start + whole:start + part.shape[0]] = _balance(part[whole:], half, block=part.shape[0] - whole)
    return out.reshape(v.shape)


# ---------------------------------------------------------------- which sums a weight keeps

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


# ---------------------------------------------------------------- tensors

def half_tensor(value: np.ndarray, elem: int, name: str, rounding: Rounding) -> onnx.TensorProto:
    """``value`` (float32) as a float16/bfloat16 TensorProto named ``name``, rounded as
    ``rounding`` says."""
    t = numpy_helper.from_array(to_half(value, elem, rounding.clamp, rounding.sums))
    t.name = name  # (set even when empty, as the tensors written so far have it)
    return t


def half_of(t: onnx.TensorProto, elem: int, name: str, rounding: Rounding, read) -> onnx.TensorProto:
    """The half version of a float32 tensor: a deferred tensor rounded as it is read or written
    when ``t`` is a reference (a model of any size is never held in memory), else the rounded
    bytes (``read`` gives ``t``'s value)."""
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return deferred.deferred_reference(t, elem, name, _PRODUCER, rounding.key())
    return half_tensor(read(t), elem, name, rounding)


def _make(source: np.ndarray, elem: int, spec: str) -> np.ndarray:
    r = Rounding.parse(spec) or Rounding()
    return to_half(source, elem, r.clamp, r.sums)


deferred.register(_PRODUCER, deferred.Producer(np.dtype("<f4"), _make,
                                               lambda spec: (Rounding.parse(spec) or Rounding()).unit()))
