"""Tensor helpers shared by loading and saving: walking every TensorProto of a model,
external-data references (resolved and checked against their file), sizes.

Two private ``external_data`` keys travel with references in memory and are never written:
``BASE_KEY`` (the directory a location is relative to), ``INLINE_KEY`` (a big inline
tensor that loading left in the model file, to be written back inline) and ``DEFERRED_KEY`` (a
tensor a producer makes from the bytes of its reference, :mod:`rewriter.io.deferred`).
"""

from __future__ import annotations

import os
import stat

import numpy as np
import onnx

from rewriter.errors import ModelLoadError
from rewriter.graph import traversal
from rewriter.graph.schemas import DEFAULT_DOMAINS
from rewriter.io.deferred import DEFERRED_KEY, source_bytes

__all__ = ["INLINE_THRESHOLD", "PROTOBUF_LIMIT", "BASE_KEY", "INLINE_KEY", "PRIVATE_PREFIX", "DEFERRED_KEY",
           "ALIGN", "EXTERNAL", "PACKED", "all_tensors", "tensor_name", "expected_bytes", "resolve_location", "reference",
           "set_entries"]

INLINE_THRESHOLD = 1 << 20  # inline raw_data at least this big is left in the file, not parsed
PROTOBUF_LIMIT = (1 << 31) - (1 << 20)  # a serialized ModelProto must stay under 2 GiB
BASE_KEY, INLINE_KEY, PRIVATE_PREFIX = "__rewriter_base__", "__rewriter_inline__", "__rewriter"
ALIGN = 64
EXTERNAL = onnx.TensorProto.EXTERNAL
_T = onnx.TensorProto
PACKED = {_T.INT4: 2, _T.UINT4: 2, _T.FLOAT4E2M1: 2}  # elements per byte
for _name in ("INT2", "UINT2"):
    if hasattr(_T, _name):
        PACKED[getattr(_T, _name)] = 4


# ---------------------------------------------------------------- walking tensors

_A = onnx.AttributeProto
_PLAIN = frozenset({_A.FLOAT, _A.INT, _A.STRING, _A.FLOATS, _A.INTS, _A.STRINGS,
                    _A.TYPE_PROTO, _A.TYPE_PROTOS})


_HOLDERS = traversal.GRAPH_KINDS | traversal.TENSOR_KINDS


def _node_tensors(nodes, loadable: bool):
    holders = traversal.ops_with(_HOLDERS)
    for node in nodes:
        domain = node.domain
        if domain in DEFAULT_DOMAINS and node.op_type not in holders:
            continue
        for attr in node.attribute:
            if attr.type in _PLAIN:  # the common case, decided by one field read
                continue
            if attr.HasField("t"):
                yield attr.t, loadable
            for t in attr.tensors:
                yield t, loadable
            if attr.HasField("sparse_tensor"):
                yield attr.sparse_tensor.values, False
                yield attr.sparse_tensor.indices, False
            if attr.HasField("g"):
                yield from _graph_tensors(attr.g, loadable)
            for g in attr.graphs:
                yield from _graph_tensors(g, loadable)


def _graph_tensors(graph, loadable: bool):
    for t in graph.initializer:
        yield t, loadable
    for sp in graph.sparse_initializer:
        yield sp.values, False
        yield sp.indices, False
    yield from _node_tensors(graph.node, loadable)


def all_tensors(model: onnx.ModelProto):
    """Every TensorProto with whether onnx's own loader would find it as external data."""
    yield from _graph_tensors(model.graph, True)
    for info in model.training_info:
        yield from _graph_tensors(info.initialization, False)
        yield from _graph_tensors(info.algorithm, False)
    for fn in model.functions:
        yield from _node_tensors(fn.node, False)


def tensor_name(t: onnx.TensorProto) -> str:
    return f"tensor '{t.name}'" if t.name else "unnamed tensor"


def expected_bytes(t: onnx.TensorProto) -> int | None:
    """Bytes the raw data of ``t`` must have, or None for strings and unknown types."""
    numel = int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1
    if t.data_type in PACKED:
        per = PACKED[t.data_type]
        return (numel + per - 1) // per
    if t.data_type in (_T.UNDEFINED, _T.STRING):
        return None
    try:
        return numel * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------- references

def resolve_location(location: str, base_dir: str, what: str) -> str:
    """The real path of ``location`` under ``base_dir``; refuses anything that leaves it."""
    if not location or "\0" in location:
        raise ModelLoadError(f"{what}: external data has an empty or invalid location")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or os.path.splitdrive(location)[0]:
        raise ModelLoadError(f"{what}: external data location '{location}' is absolute; refused")
    norm = os.path.normpath(location)
    if norm == os.pardir or norm.startswith(os.pardir + os.sep):
        raise ModelLoadError(f"{what}: external data location '{location}' leaves the model's directory; refused")
    real_base = os.path.realpath(base_dir)
    real = os.path.realpath(os.path.join(real_base, norm))
    if os.path.commonpath([real, real_base]) != real_base:
        raise ModelLoadError(f"{what}: external data location '{location}' links outside the model's directory; refused")
    return real


def reference(t: onnx.TensorProto, base_dir: str | None, what: str) -> tuple[str, int, int]:
    """(real path, offset, length) of an external tensor, checked against its file."""
    entries = {e.key: e.value for e in t.external_data}
    base = entries.get(BASE_KEY) or base_dir
    if base is None:
        raise ModelLoadError(f"{what}: external data but no directory to resolve '{entries.get('location')}' in")
    path = resolve_location(entries.get("location", ""), base, what)
    try:
        st = os.stat(path)
    except OSError:
        raise ModelLoadError(f"{what}: external data file '{entries.get('location')}' does not exist") from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(f"{what}: external data file '{entries.get('location')}' is not a regular file")
    try:
        offset = int(entries.get("offset", "0"))
        length = int(entries["length"]) if "length" in entries else st.st_size - offset
    except ValueError:
        raise ModelLoadError(f"{what}: external data offset/length is not an integer") from None
    if offset < 0 or length < 0 or offset + length > st.st_size:
        raise ModelLoadError(f"{what}: external data offset {offset} + length {length} is past the end "
                             f"of '{entries.get('location')}' ({st.st_size} bytes)")
    expected = expected_bytes(t)
    if expected is not None:
        expected = source_bytes(t) or expected  # a deferred tensor's reference holds its source
    if expected is not None and expected != length:
        raise ModelLoadError(f"{what}: external data length {length} does not match its type and "
                             f"dims ({expected} bytes)")
    return path, offset, length


def set_entries(t: onnx.TensorProto, items: dict[str, str]) -> None:
    del t.external_data[:]
    for key, value in items.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, value


