"""Load and save model files: clear errors on bad input, lazy weights, streamed atomic writes.

``load_model`` never reads weights into memory. Tensors stored as external data stay
references (checked up-front: inside the model's directory, within their file). Big
*inline* tensors (``raw_data`` of 1 MiB or more) are cut out of the file's protobuf bytes
(see :mod:`rewriter.wire`) and become references to the model file itself, marked so that
``save_model`` writes them back inline. ``read_external_tensor`` maps a reference as a
read-only numpy memmap. ``save_model`` streams every referenced tensor from its source
into the output (inline, or into ``<out>.data`` beside it) and renames into place last.

Two private ``external_data`` keys travel with references in memory and are never written:
``__rewriter_base__`` (the directory a location is relative to) and ``__rewriter_inline__``.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import stat

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter import traversal, wire
from rewriter.errors import ModelLoadError, RewriterError

__all__ = ["load_model", "save_model", "read_external_tensor", "set_default_layout", "check_model",
           "external_data_dir", "without_big_data", "INLINE_THRESHOLD"]

logger = logging.getLogger(__name__)

INLINE_THRESHOLD = 1 << 20  # inline raw_data at least this big is left in the file, not parsed
PROTOBUF_LIMIT = (1 << 31) - (1 << 20)  # a serialized ModelProto must stay under 2 GiB
_BASE, _INLINE, _PRIVATE = "__rewriter_base__", "__rewriter_inline__", "__rewriter"
_ALIGN = 64
_EXTERNAL = onnx.TensorProto.EXTERNAL
_T = onnx.TensorProto
_PACKED = {_T.INT4: 2, _T.UINT4: 2, _T.FLOAT4E2M1: 2}  # elements per byte
for _name in ("INT2", "UINT2"):
    if hasattr(_T, _name):
        _PACKED[getattr(_T, _name)] = 4


# ---------------------------------------------------------------- walking tensors

_A = onnx.AttributeProto
_PLAIN = frozenset({_A.FLOAT, _A.INT, _A.STRING, _A.FLOATS, _A.INTS, _A.STRINGS,
                    _A.TYPE_PROTO, _A.TYPE_PROTOS})


_HOLDERS = traversal.GRAPH_KINDS | traversal.TENSOR_KINDS


def _node_tensors(nodes, loadable: bool):
    for node in nodes:
        if not traversal.may_hold(node, _HOLDERS):
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


def _all_tensors(model: onnx.ModelProto):
    """Every TensorProto with whether onnx's own loader would find it as external data."""
    yield from _graph_tensors(model.graph, True)
    for info in model.training_info:
        yield from _graph_tensors(info.initialization, False)
        yield from _graph_tensors(info.algorithm, False)
    for fn in model.functions:
        yield from _node_tensors(fn.node, False)


def _tensor_name(t: onnx.TensorProto) -> str:
    return f"tensor '{t.name}'" if t.name else "unnamed tensor"


def _expected_bytes(t: onnx.TensorProto) -> int | None:
    """Bytes the raw data of ``t`` must have, or None for strings and unknown types."""
    numel = int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1
    if t.data_type in _PACKED:
        per = _PACKED[t.data_type]
        return (numel + per - 1) // per
    if t.data_type in (_T.UNDEFINED, _T.STRING):
        return None
    try:
        return numel * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------- references

def _resolve(location: str, base_dir: str, what: str) -> str:
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


def _reference(t: onnx.TensorProto, base_dir: str | None, what: str) -> tuple[str, int, int]:
    """(real path, offset, length) of an external tensor, checked against its file."""
    entries = {e.key: e.value for e in t.external_data}
    base = entries.get(_BASE) or base_dir
    if base is None:
        raise ModelLoadError(f"{what}: external data but no directory to resolve '{entries.get('location')}' in")
    path = _resolve(entries.get("location", ""), base, what)
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
    expected = _expected_bytes(t)
    if expected is not None and expected != length:
        raise ModelLoadError(f"{what}: external data length {length} does not match its type and "
                             f"dims ({expected} bytes)")
    return path, offset, length


def _set_entries(t: onnx.TensorProto, items: dict[str, str]) -> None:
    del t.external_data[:]
    for key, value in items.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, value


def _check_references(model: onnx.ModelProto, path: str) -> None:
    base_dir = os.path.dirname(os.path.abspath(path))
    for t, _ in _all_tensors(model):
        if t.data_location != _EXTERNAL:
            continue
        if not all(isinstance(e.key, str) and isinstance(e.value, str) for e in t.external_data):
            raise ModelLoadError(f"{path}: {_tensor_name(t)}: external data entries are not valid UTF-8")
        inline = any(e.key == _INLINE for e in t.external_data)
        for e in t.external_data:  # a file must not smuggle a base directory in
            if e.key == _BASE:
                e.value = ""
        ref_path, offset, length = _reference(t, base_dir, f"{path}: {_tensor_name(t)}")
        items = {"location": os.path.relpath(ref_path, os.path.realpath(base_dir)),
                 "offset": str(offset), "length": str(length), _BASE: os.path.realpath(base_dir)}
        if inline:
            items[_INLINE] = "1"
        _set_entries(t, items)


# ---------------------------------------------------------------- load

def _cut_big_tensors(buf, size: int, name: str, threshold: int) -> bytes:
    """The model's bytes with every raw_data >= threshold replaced by a reference to the file."""
    def on_raw(start, end):
        if end - start < threshold:
            return None
        return [wire.string_entry(13, "location", name), wire.string_entry(13, "offset", str(start)),
                wire.string_entry(13, "length", str(end - start)), wire.string_entry(13, _INLINE, "1"),
                b"\x70\x01"]  # data_location (14) = EXTERNAL

    pieces, _, changed = wire.rewrite_tensors(buf, 0, size, wire.MODEL, on_raw,
                                              lambda s, e: e - s >= threshold)
    data = b"".join(pieces) if changed else bytes(buf)
    for p in pieces:
        if isinstance(p, memoryview):
            p.release()
    return data, changed


def _mark_cut_tensors_external(model: onnx.ModelProto) -> None:
    """A tensor whose bytes carry its own data_location=DEFAULT after raw_data (as onnx
    writes it after loading external data) overrides the EXTERNAL written in raw_data's
    place: protobuf keeps the last value. The marker entry says which tensors were cut."""
    for t, _ in _all_tensors(model):
        if t.data_location != _EXTERNAL and any(e.key == _INLINE for e in t.external_data):
            t.data_location = _EXTERNAL


def load_model(path: str | os.PathLike, *, inline_threshold: int = INLINE_THRESHOLD) -> onnx.ModelProto:
    """Read an ONNX model file without reading its weights, or raise ModelLoadError naming it."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: no such file") from None
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelLoadError(f"{path}: is a directory, not a model file")
    if not stat.S_ISREG(st.st_mode):
        raise ModelLoadError(f"{path}: not a regular file")
    if st.st_size == 0:
        raise ModelLoadError(f"{path}: empty file")
    model = onnx.ModelProto()
    try:
        cut = False
        with open(path, "rb") as f:
            if st.st_size < inline_threshold:
                data = f.read()
            else:
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    data, cut = _cut_big_tensors(mm, len(mm), os.path.basename(path), inline_threshold)
        model.ParseFromString(data)
        if cut:
            _mark_cut_tensors_external(model)
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror or e}") from None
    except Exception:  # WireError, protobuf's DecodeError or RuntimeError by implementation
        raise ModelLoadError(f"{path}: not an ONNX model (protobuf parse failed)") from None
    if not model.HasField("graph") or model.ir_version <= 0:
        raise ModelLoadError(f"{path}: not an ONNX model (no graph or no IR version)")
    _check_references(model, path)
    return model


def read_external_tensor(tensor: onnx.TensorProto, base_dir: str | None) -> np.ndarray:
    """The value of an external-data tensor as a read-only array mapped from its file."""
    what = _tensor_name(tensor)
    path, offset, length = _reference(tensor, base_dir, what)
    shape = tuple(int(d) for d in tensor.dims)
    if tensor.data_type in _PACKED or tensor.data_type == _T.STRING:
        if tensor.data_type == _T.STRING:
            raise ModelLoadError(f"{what}: string tensors cannot be stored as external data")
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
        del copy.external_data[:]
        copy.data_location = onnx.TensorProto.DEFAULT
        with open(path, "rb") as f:
            f.seek(offset)
            copy.raw_data = f.read(length)
        return numpy_helper.to_array(copy)
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
    except (KeyError, TypeError, ValueError):
        raise ModelLoadError(f"{what}: unknown data type {tensor.data_type}") from None
    if length == 0:
        array = np.zeros(shape, dtype)
        array.flags.writeable = False
        return array
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


@contextlib.contextmanager
def external_data_dir(model: onnx.ModelProto):
    """Make the working directory the one ``model``'s external references are relative to.

    ``onnx.checker`` and ONNX Runtime resolve external data of an in-memory proto against the
    working directory. Wrap just those calls (the CLI is single-threaded; chdir is per process).
    """
    bases = {e.value for t, _ in _all_tensors(model) if t.data_location == _EXTERNAL
             for e in t.external_data if e.key == _BASE}
    if len(bases) > 1:
        raise RewriterError("the model's external data comes from several directories")
    if not bases:
        yield
        return
    old = os.getcwd()
    os.chdir(bases.pop())
    try:
        yield
    finally:
        os.chdir(old)


def without_big_data(model: onnx.ModelProto, limit: int = 1024) -> onnx.ModelProto:
    """A copy for shape inference: references of at most ``limit`` bytes inlined, bigger ones
    left with name, type and dims only (ONNX shape inference would otherwise read them whole
    whenever their file resolves from the working directory)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for t, _ in _all_tensors(copy):
        if t.data_location != _EXTERNAL:
            continue
        entries = {e.key: e.value for e in t.external_data}
        value = read_external_tensor(t, None) if int(entries.get("length", limit + 1)) <= limit else None
        del t.external_data[:]
        t.ClearField("data_location")
        if value is not None:
            t.raw_data = np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()
    return copy


def check_model(model: onnx.ModelProto, full_check: bool = False) -> None:
    """``onnx.checker.check_model`` for a proto whose tensors may be references; raises its errors.

    The checker resolves references from the working directory, and its ``full_check`` shape
    inference reads whatever it resolves into memory: so references are checked in their
    directory, and full_check's strict shape inference runs on :func:`without_big_data`.
    """
    with external_data_dir(model):
        onnx.checker.check_model(model, full_check=False)
    if full_check:
        onnx.shape_inference.infer_shapes(without_big_data(model), check_type=True, strict_mode=True)


# ---------------------------------------------------------------- save

from rewriter.model_save import save_model, set_default_layout  # noqa: E402  (the writer lives in its own module)
