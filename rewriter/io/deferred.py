"""Deferred tensors: a tensor whose data a producer makes from the bytes of a reference.

A rewrite that derives a big tensor from a referenced one (a float32 weight stored in half
precision) need not hold either in memory: the new tensor keeps the source's reference, marked
with the private key ``DEFERRED_KEY`` whose value names a registered :class:`Producer` and its
``spec``. Reading it (:func:`rewriter.io.read_external_tensor`) calls the producer on the source;
writing it (:mod:`rewriter.io.save`) calls it chunk by chunk on the way to the file, so a model of
any size is rewritten with memory near one chunk. This package knows nothing of what a producer
computes; producers register themselves (:func:`register`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import numpy as np
import onnx

from rewriter.io import wire

__all__ = ["DEFERRED_KEY", "Producer", "register", "deferred_reference", "deferred", "source_bytes", "Deferred",
           "write_deferred", "chunks", "CHUNK_ELEMENTS"]

DEFERRED_KEY = "__rewriter_deferred__"  # private: never written (rewriter.io.tensors)
CHUNK_ELEMENTS = 1 << 22  # source elements converted at a time


@dataclasses.dataclass(frozen=True)
class Producer:
    """Makes a deferred tensor's data: ``make(source, elem, spec)`` turns source elements (a
    flat chunk, or the whole source in its shape) of type ``source`` into elements of the
    tensor's type ``elem``, one for one; ``unit(spec)`` is the number of elements a chunk must
    be a multiple of (the groups ``make`` treats together)."""

    source: np.dtype
    make: Callable[[np.ndarray, int, str], np.ndarray]
    unit: Callable[[str], int] = lambda spec: 1


_PRODUCERS: dict[str, Producer] = {}


def register(name: str, producer: Producer) -> None:
    """Make ``producer`` known as ``name`` (a name without ':')."""
    _PRODUCERS[name] = producer


def deferred_reference(source: onnx.TensorProto, elem: int, name: str, producer: str, spec: str) -> onnx.TensorProto:
    """A tensor named ``name`` of type ``elem`` and ``source``'s dims whose data is
    ``producer``'s result on the reference ``source`` (made when it is read or written)."""
    t = onnx.TensorProto()
    t.CopyFrom(source)
    t.name = name
    t.data_type = elem
    entries = {e.key: e.value for e in source.external_data if e.key != DEFERRED_KEY}
    entries[DEFERRED_KEY] = f"{producer}:{spec}"
    del t.external_data[:]
    for key, value in entries.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    t.data_location = onnx.TensorProto.EXTERNAL
    return t


def deferred(t: onnx.TensorProto) -> tuple[Producer, str] | None:
    """(producer, spec) of a deferred tensor, else None (an empty or unknown value, as a loaded
    file's private keys become, is none)."""
    value = next((e.value for e in t.external_data if e.key == DEFERRED_KEY), "")
    name, _, spec = value.partition(":")
    producer = _PRODUCERS.get(name)
    return None if producer is None else (producer, spec)


def source_bytes(t: onnx.TensorProto) -> int | None:
    """The bytes the reference of the deferred tensor ``t`` must hold, or None when ``t`` is not
    deferred."""
    found = deferred(t)
    if found is None:
        return None
    return (int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1) * found[0].source.itemsize


@dataclasses.dataclass(frozen=True)
class Deferred(wire.Copy):
    """A piece of output: the source elements at ``offset`` of ``path``, made into ``length``
    bytes of type ``elem`` by ``producer``."""

    elem: int = onnx.TensorProto.FLOAT
    producer: Producer | None = None
    spec: str = ""

    def source_length(self) -> int:
        """The bytes of the source this piece is made from."""
        return self.length // _itemsize(self.elem) * self.producer.source.itemsize


def _itemsize(elem: int) -> int:
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).itemsize


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


def chunks(value: np.ndarray, chunk: int = CHUNK_ELEMENTS):
    """The elements of ``value`` in order, flat, ``chunk`` at a time; an array mapped from a
    file (:func:`rewriter.io.read_external_tensor`) is read from it instead of mapped whole."""
    if isinstance(value, np.memmap) and getattr(value, "filename", None) and value.flags.c_contiguous:
        yield from _file_chunks(value.filename, value.offset, value.size, value.dtype, chunk)
        return
    flat = np.asarray(value).reshape(-1)
    for start in range(0, flat.size, chunk):
        yield flat[start:start + chunk]


def write_deferred(out_fd: int, piece: Deferred) -> None:
    """Write ``piece``'s data to ``out_fd``, made a chunk of whole units at a time."""
    producer = piece.producer
    unit = producer.unit(piece.spec)
    chunk = max(unit, CHUNK_ELEMENTS // unit * unit)
    for part in _file_chunks(piece.path, piece.offset, piece.length // _itemsize(piece.elem), producer.source, chunk):
        view = memoryview(producer.make(part, piece.elem, piece.spec).tobytes())
        while view:
            view = view[os.write(out_fd, view):]
