"""Protobuf wire-format surgery on serialized ONNX models, without parsing them whole.

The loader uses it to cut big ``TensorProto.raw_data`` fields out of a model file (so a
1 GiB inline initializer is never copied into Python memory) and the writer to splice
them back in, streamed from their source file. Only the message fields that can lead to
a tensor are descended into; everything else is copied through byte for byte.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

__all__ = ["WireError", "Copy", "encode_varint", "rewrite_tensors", "piece_len", "MODEL"]


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


@dataclasses.dataclass(frozen=True)
class Copy:
    """A piece of output that is ``length`` bytes of the file ``path`` at ``offset``."""

    path: str
    offset: int
    length: int


# Message kinds and, for each, the length-delimited fields that hold a message on the way
# to a TensorProto (field numbers from onnx.proto).
MODEL, GRAPH, NODE, ATTR, TENSOR, FUNCTION, TRAINING, SPARSE = range(8)
_CHILDREN = {
    MODEL: {7: GRAPH, 20: TRAINING, 25: FUNCTION},      # graph, training_info, functions
    TRAINING: {1: GRAPH, 2: GRAPH},                     # initialization, algorithm
    GRAPH: {1: NODE, 5: TENSOR, 15: SPARSE},            # node, initializer, sparse_initializer
    FUNCTION: {7: NODE},                                # node
    NODE: {5: ATTR},                                    # attribute
    ATTR: {5: TENSOR, 6: GRAPH, 10: TENSOR, 11: GRAPH, 22: SPARSE},  # t, g, tensors, graphs, sparse_tensor
    SPARSE: {1: TENSOR, 2: TENSOR},                     # values, indices
    TENSOR: {},
}
RAW_DATA = 9


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf, start: int, end: int):
    """(field number, wire type, field start, value start, value end) for each field."""
    pos = start
    while pos < end:
        field_start = pos
        key = buf[pos]  # one-byte keys and lengths (most of them) without a call
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire_type == 0:
            _, pos = _varint(buf, pos, end)
            yield number, wire_type, field_start, field_start, pos
            continue
        if wire_type == 2:
            if pos < end and buf[pos] < 0x80:
                length = buf[pos]
                pos += 1
            else:
                length, pos = _varint(buf, pos, end)
            value_start, pos = pos, pos + length
        elif wire_type == 1:
            value_start, pos = pos, pos + 8
        elif wire_type == 5:
            value_start, pos = pos, pos + 4
        else:  # groups (3, 4) are not used by onnx.proto
            raise WireError(f"unsupported wire type {wire_type}")
        if pos > end:
            raise WireError("field runs past the end of its message")
        yield number, wire_type, field_start, value_start, pos


def piece_len(piece) -> int:
    return piece.length if isinstance(piece, Copy) else len(piece)


RawHook = Callable[[int, int], "list | None"]


def rewrite_tensors(
    buf, start: int, end: int, kind: int, on_raw: RawHook, descend: Callable[[int, int], bool]
) -> tuple[list, int, bool]:
    """Rebuild the message ``buf[start:end]`` of ``kind``, replacing raw_data fields.

    ``on_raw(value_start, value_end)`` returns the pieces that replace a TensorProto's whole
    raw_data field, or None to keep it. ``descend(value_start, value_end)`` says whether a
    sub-message may hold a field to replace. Returns (pieces, total length, changed);
    unchanged stretches are memoryview slices of ``buf`` (no copy).
    """
    view = memoryview(buf)
    pieces: list = []
    total = 0
    changed = False
    run_start = start  # start of the stretch copied through unchanged
    children = _CHILDREN[kind]
    for number, wire_type, field_start, value_start, value_end in _fields(buf, start, end):
        if wire_type != 2:
            continue
        replacement = None
        if kind == TENSOR and number == RAW_DATA:
            replacement = on_raw(value_start, value_end)
        elif number in children and descend(value_start, value_end):
            sub, sub_len, sub_changed = rewrite_tensors(
                buf, value_start, value_end, children[number], on_raw, descend)
            if sub_changed:
                replacement = [encode_varint(number << 3 | 2), encode_varint(sub_len), *sub]
        if replacement is None:
            continue
        if field_start > run_start:
            pieces.append(view[run_start:field_start])
            total += field_start - run_start
        pieces.extend(replacement)
        total += sum(piece_len(p) for p in replacement)
        run_start = value_end
        changed = True
    if end > run_start:
        pieces.append(view[run_start:end])
        total += end - run_start
    return pieces, total, changed


def string_entry(field: int, key: str, value: str) -> bytes:
    """A StringStringEntryProto field (key=1, value=2) as field ``field`` of its parent."""
    k, v = key.encode(), value.encode()
    body = b"\x0a" + encode_varint(len(k)) + k + b"\x12" + encode_varint(len(v)) + v
    return encode_varint(field << 3 | 2) + encode_varint(len(body)) + body
