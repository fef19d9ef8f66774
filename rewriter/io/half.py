"""float32 tensors stored in half precision without holding them in memory, and the rounding
that keeps a filter's sums.

A float32 tensor that is a reference (external data, or a big inline tensor the loader left in
its file) becomes a float16/bfloat16 tensor that still refers to the float32 bytes, marked with
the private key ``CONVERT_KEY``: reading it (:func:`rewriter.io.read_external_tensor`) converts
it; writing it (:mod:`rewriter.io.save`) converts it in chunks on the way to the file, so a model
of any size is rewritten with memory near one chunk, not the model.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import onnx

from rewriter.io import wire
from rewriter.io.tensors import CONVERT_KEY, EXTERNAL, converts, set_entries

__all__ = ["to_half", "converted_reference", "conversion", "Rounding", "Converted", "write_converted", "chunks",
           "F16_MAX", "SUM_BLOCK"]

F16_MAX = float(np.finfo(np.float16).max)
_CHUNK_ELEMENTS = 1 << 22  # 16 MiB of float32 at a time
SUM_BLOCK = 256  # a sum is kept over runs of at most this many elements, each on its own
_SUMS_CHUNK = 1 << 20  # elements balanced at a time (the balancing holds a few arrays of this size)


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
        if not converts(value):
            return None
        head, _, tail = value.partition(";")
        kind, _, n = tail.partition("=")
        sums = (kind, int(n)) if kind in ("rows", "cols") and n.isdigit() and int(n) > 0 else None
        return Rounding(head == "clamp", sums)


def _half_type(elem: int):
    if elem == onnx.TensorProto.FLOAT16:
        return np.dtype("<f2")
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def to_half(value: np.ndarray, elem: int, clamp: bool, sums: tuple | None = None) -> np.ndarray:
    """float32 ``value`` in float16 (``elem`` FLOAT16) or bfloat16, rounded to nearest even;
    with ``clamp``, finite magnitudes beyond float16's range become its largest; with ``sums``
    (see :class:`Rounding`), rounded so each group's sum stays as close to its float32 sum as
    rounding a few elements the other way can bring it (:func:`balanced`)."""
    v = np.asarray(value, dtype=np.float32)
    if clamp:
        v = np.where(np.isfinite(v), np.clip(v, -F16_MAX, F16_MAX), v)
    if sums is not None and v.size:
        return balanced(v, _half_type(elem), sums)
    return v.astype(_half_type(elem))


def _balance(w: np.ndarray, half, block: int = 0) -> np.ndarray:
    """``w`` (2-D float32) in ``half``, each group's sum kept; the groups are ``w``'s rows, or,
    with ``block``, the columns of each ``block`` consecutive rows. Each value is rounded to
    nearest even; then, in every group, values are taken in order of what rounding them the
    other way costs (:func:`_order`), and each is rounded to its other neighbour when that brings
    the group's sum nearer its float32 sum (each value stays within one unit in the last place
    of its float32 value). The native kernel computes it group by group
    (:func:`rewriter.kernels.balance_half`); without it, :func:`_balance_numpy` gives the same
    bits."""
    from rewriter.kernels import balance_half

    w = np.ascontiguousarray(w, dtype=np.float32)
    h = w.astype(half)
    k = block or w.shape[1]
    if 0 < k <= 4096 and balance_half(w, h.view(np.uint16), k, w.shape[1] if block else 0, h.dtype != np.float16):
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


def converted_reference(source: onnx.TensorProto, elem: int, name: str, rounding: Rounding) -> onnx.TensorProto:
    """A half tensor named ``name`` whose data is the float32 reference ``source``, converted
    (as ``rounding`` says) when it is read or written."""
    t = onnx.TensorProto()
    t.CopyFrom(source)
    t.name = name
    t.data_type = elem
    entries = {e.key: e.value for e in source.external_data if e.key != CONVERT_KEY}
    entries[CONVERT_KEY] = rounding.key()
    set_entries(t, entries)
    t.data_location = EXTERNAL
    return t


def conversion(t: onnx.TensorProto) -> Rounding | None:
    """None when ``t`` is not a converted reference, else how it is rounded (an empty value,
    as a loaded file's private keys become, is none)."""
    return Rounding.parse(next((e.value for e in t.external_data if e.key == CONVERT_KEY), ""))


@dataclasses.dataclass(frozen=True)
class Converted(wire.Copy):
    """A piece of output: the float32 bytes at ``offset`` of ``path`` in half precision;
    ``length`` is the output's (half the source's)."""

    elem: int = onnx.TensorProto.FLOAT16
    rounding: Rounding = Rounding()


def _file_chunks(path: str, offset: int, numel: int, dtype, chunk: int):
    """``numel`` elements of ``dtype`` at ``offset`` of ``path``, ``chunk`` at a time, read
    (not mapped: mapped pages count as the process's memory)."""
    dtype = np.dtype(dtype)
    with open(path, "rb") as f:
        f.seek(offset)
        for start in range(0, numel, chunk):
            count = min(chunk, numel - start)
            data = f.read(count * dtype.itemsize)
            if len(data) != count * dtype.itemsize:
                raise OSError(f"{path}: shorter than expected")
            yield np.frombuffer(data, dtype)


def chunks(value: np.ndarray, chunk: int = _CHUNK_ELEMENTS):
    """The elements of ``value`` in order, flat, ``chunk`` at a time; an array mapped from a
    file (:func:`rewriter.io.read_external_tensor`) is read from it instead of mapped whole."""
    if isinstance(value, np.memmap) and getattr(value, "filename", None) and value.flags.c_contiguous:
        yield from _file_chunks(value.filename, value.offset, value.size, value.dtype, chunk)
        return
    flat = np.asarray(value).reshape(-1)
    for start in range(0, flat.size, chunk):
        yield flat[start:start + chunk]


def write_converted(out_fd: int, piece: Converted) -> None:
    r = piece.rounding
    chunk = _CHUNK_ELEMENTS  # (whole groups a chunk: rows, or SUM_BLOCK rows of columns)
    if r.sums is not None:
        kind, n = r.sums
        unit = n * (SUM_BLOCK if kind == "cols" else 1)
        chunk = max(unit, chunk // unit * unit)
    for part in _file_chunks(piece.path, piece.offset, piece.length // 2, "<f4", chunk):
        view = memoryview(to_half(part, piece.elem, r.clamp, r.sums).tobytes())
        while view:
            view = view[os.write(out_fd, view):]
