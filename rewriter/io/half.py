"""float32 tensors stored in half precision without holding them in memory.

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
from rewriter.io.tensors import CONVERT_KEY, EXTERNAL, set_entries

__all__ = ["to_half", "converted_reference", "conversion", "Converted", "write_converted", "chunks", "F16_MAX"]

F16_MAX = float(np.finfo(np.float16).max)
_CHUNK_ELEMENTS = 1 << 22  # 16 MiB of float32 at a time


def to_half(value: np.ndarray, elem: int, clamp: bool) -> np.ndarray:
    """float32 ``value`` in float16 (``elem`` FLOAT16) or bfloat16, rounded to nearest even;
    with ``clamp``, finite magnitudes beyond float16's range become its largest."""
    v = np.asarray(value, dtype=np.float32)
    if clamp:
        v = np.where(np.isfinite(v), np.clip(v, -F16_MAX, F16_MAX), v)
    if elem == onnx.TensorProto.FLOAT16:
        return v.astype("<f2")
    import ml_dtypes

    return v.astype(ml_dtypes.bfloat16)


def converted_reference(source: onnx.TensorProto, elem: int, name: str, clamp: bool) -> onnx.TensorProto:
    """A half tensor named ``name`` whose data is the float32 reference ``source``, converted
    when it is read or written."""
    t = onnx.TensorProto()
    t.CopyFrom(source)
    t.name = name
    t.data_type = elem
    entries = {e.key: e.value for e in source.external_data if e.key != CONVERT_KEY}
    entries[CONVERT_KEY] = "clamp" if clamp else "round"
    set_entries(t, entries)
    t.data_location = EXTERNAL
    return t


def conversion(t: onnx.TensorProto) -> bool | None:
    """None when ``t`` is not a converted reference, else whether it clamps (an empty value,
    as a loaded file's private keys become, is none)."""
    value = next((e.value for e in t.external_data if e.key == CONVERT_KEY), "")
    return None if value not in ("clamp", "round") else value == "clamp"


@dataclasses.dataclass(frozen=True)
class Converted(wire.Copy):
    """A piece of output: the float32 bytes at ``offset`` of ``path`` in half precision;
    ``length`` is the output's (half the source's)."""

    elem: int = onnx.TensorProto.FLOAT16
    clamp: bool = False


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
    for part in _file_chunks(piece.path, piece.offset, piece.length // 2, "<f4", _CHUNK_ELEMENTS):
        view = memoryview(to_half(part, piece.elem, piece.clamp).tobytes())
        while view:
            view = view[os.write(out_fd, view):]
