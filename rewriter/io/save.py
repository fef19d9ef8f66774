"""Write a model streamed and atomically.

Referenced tensors (external data, or big inline tensors that ``load_model`` left in their
file) are copied in chunks from their source with ``os.sendfile`` (or, for a deferred tensor, made
from it in chunks by its producer, :mod:`rewriter.io.deferred`): back inline, by splicing
their ``raw_data`` into the serialized proto (:mod:`rewriter.io.wire`), or into the output's own
data file ``<out>.data``. Everything goes to temporary files in the output directory,
fsynced, then renamed: the data file first, the model last. The output never references
the input's data file.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import stat
import struct
import secrets

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.errors import RewriterError
from rewriter.io import wire
from rewriter.io.deferred import Deferred, deferred, write_deferred
from rewriter.io.tensors import (ALIGN, EXTERNAL, INLINE_KEY, PROTOBUF_LIMIT, all_tensors, expected_bytes,
                                 reference, set_entries, tensor_name)

__all__ = ["save_model", "parse_layout", "check_output", "output_path"]

logger = logging.getLogger(__name__)
_CHUNK = 1 << 26
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def parse_layout(value) -> float | None:
    """None (keep each tensor's layout), 'always' (0), 'never' (inf) or a byte threshold."""
    if value is None:
        return None
    if isinstance(value, str):
        if value == "always":
            return 0
        if value == "never":
            return float("inf")
        if value.isdigit():
            return int(value)
        raise RewriterError(f"--external-data must be always, never or a size in bytes, got {value!r}")
    if isinstance(value, int) and value >= 0:
        return value
    raise RewriterError(f"external_data must be None, 'always', 'never' or a size >= 0, got {value!r}")


@dataclasses.dataclass(eq=False)
class _Item:
    tensor: onnx.TensorProto
    size: int
    loadable: bool
    source: wire.Copy | None  # None: the data is in the proto
    external: bool = False


NEW_TENSOR_THRESHOLD = 1024  # onnx.save's size_threshold for external data


# float inputs whose values decide an output's shape: (op, input positions)
_SHAPE_FLOATS = {"Resize": (1, 2, 3), "Upsample": (1,), "Range": (0, 1, 2), "OneHot": (1,)}


def _shape_like(t: onnx.TensorProto, size: int, read_at_load=None) -> bool:
    """A small int64 tensor (axes, shapes, pads, indices), or one ``read_at_load`` names (Resize's
    scales: a few values), stays inline whatever the layout: ONNX Runtime and ONNX shape inference
    read such values when loading and cannot from a data file."""
    return (t.data_type == onnx.TensorProto.INT64 and size < NEW_TENSOR_THRESHOLD) or id(t) in (read_at_load or {})


def _read_at_load(model: onnx.ModelProto) -> dict[int, onnx.TensorProto]:
    """The tensors (initializers, Constant values) that give a shape-deciding float input
    (:data:`_SHAPE_FLOATS`) its value, in every graph, by id() (the dict holds them: protobuf's
    wrapper objects keep their id only while they live)."""
    found: dict[int, onnx.TensorProto] = {}

    def walk(graph: onnx.GraphProto) -> None:
        tensors = {t.name: t for t in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                value = next((a.t for a in node.attribute if a.name == "value"), None)
                if value is not None:
                    tensors[node.output[0]] = value
        for node in graph.node:
            for i in _SHAPE_FLOATS.get(node.op_type, ()):
                if i < len(node.input) and node.input[i] in tensors:
                    found[id(tensors[node.input[i]])] = tensors[node.input[i]]
            for a in node.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else []) + list(a.graphs):
                    walk(g)

    walk(model.graph)
    return found


def _plan(model: onnx.ModelProto, threshold, base_dir, keep_inline=None) -> list[_Item]:
    items = []
    read_at_load = _read_at_load(model) if threshold is not None else {}
    for t, loadable in all_tensors(model):
        if t.data_location == EXTERNAL:
            path, offset, length = reference(t, base_dir, tensor_name(t))
            inline_origin = any(e.key == INLINE_KEY for e in t.external_data)
            found = deferred(t)
            if found is None:
                item = _Item(t, length, loadable, wire.Copy(path, offset, length))
            else:  # made from the source's bytes by its producer: the tensor's own size
                length = expected_bytes(t)
                item = _Item(t, length, loadable, Deferred(path, offset, length, t.data_type, *found))
            if threshold is None or not loadable:
                item.external = not inline_origin and (threshold is None)
            else:
                item.external = length >= threshold and not _shape_like(t, length, read_at_load)
            items.append(item)
        else:
            size = expected_bytes(t)
            if size is None or size == 0:
                continue
            item = _Item(t, size, loadable, None)
            if threshold is None and keep_inline is not None:  # a value the rewrite created
                item.external = loadable and t.name not in keep_inline and size >= NEW_TENSOR_THRESHOLD
            else:
                item.external = (loadable and threshold is not None and size >= threshold
                                 and not _shape_like(t, size, read_at_load))
            items.append(item)
    inline = model.ByteSize() + sum(i.size for i in items if i.source and not i.external) \
        - sum(i.size for i in items if not i.source and i.external)
    if inline > PROTOBUF_LIMIT:
        if threshold == float("inf"):
            raise RewriterError(f"the model is {inline} bytes inline, over protobuf's 2 GiB limit: "
                                "it needs external data")
        for item in sorted((i for i in items if i.loadable and not i.external), key=lambda i: -i.size):
            if inline <= PROTOBUF_LIMIT:
                break
            item.external = True
            inline -= item.size
        logger.warning("model over 2 GiB inline: its biggest tensors go to external data")
        if inline > PROTOBUF_LIMIT:
            raise RewriterError("the model's graph alone is over protobuf's 2 GiB limit")
    return items


def _copy_range(out_fd: int, piece: wire.Copy) -> None:
    """Copy bytes from the source file in the kernel (sendfile); holes of a sparse source
    stay holes in the output (as ``cp --sparse=auto`` does), so they cost no disk or time.
    A :class:`Deferred` piece is made by its producer in chunks on the way."""
    if isinstance(piece, Deferred):
        if os.stat(piece.path).st_size < piece.offset + piece.source_length():
            raise RewriterError(f"{piece.path}: shorter than expected while copying its data")
        write_deferred(out_fd, piece)
        return
    with open(piece.path, "rb") as src:
        fd = src.fileno()
        offset, end = piece.offset, piece.offset + piece.length
        if os.fstat(fd).st_size < end:
            raise RewriterError(f"{piece.path}: shorter than expected while copying its data")
        skipped = False
        while offset < end:
            data = _seek(fd, offset, os.SEEK_DATA, end)
            if data > offset:
                os.lseek(out_fd, data - offset, os.SEEK_CUR)
                offset, skipped = data, True
                continue
            hole = _seek(fd, offset, os.SEEK_HOLE, end)
            while offset < hole:
                sent = os.sendfile(out_fd, fd, offset, min(hole - offset, _CHUNK))
                if sent == 0:
                    raise RewriterError(f"{piece.path}: shorter than expected while copying its data")
                offset += sent
        if skipped:  # a hole at the end: give the file its full length
            position = os.lseek(out_fd, 0, os.SEEK_CUR)
            if os.fstat(out_fd).st_size < position:
                os.ftruncate(out_fd, position)


def _seek(fd: int, offset: int, whence: int, end: int) -> int:
    """The next data (SEEK_DATA) or hole (SEEK_HOLE) offset at or after ``offset``, capped at
    ``end``; without filesystem support all of it counts as data."""
    try:
        return min(os.lseek(fd, offset, whence), end)
    except OSError as e:
        if e.errno == errno.ENXIO:  # no data after offset (the file's size was checked above)
            return end
        return offset if whence == os.SEEK_DATA else end


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_data_file(items: list[_Item], fd: int, location: str) -> None:
    position = 0
    for item in items:
        if not item.external:
            continue
        t = item.tensor
        pad = -position % ALIGN
        if pad:
            _write_all(fd, b"\0" * pad)
            position += pad
        if item.source is not None:
            _copy_range(fd, item.source)
        else:
            if t.HasField("raw_data"):
                data = t.raw_data
            else:
                array = numpy_helper.to_array(t)
                data = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
            _write_all(fd, data)
            for field in (*_TYPED_FIELDS, "raw_data"):
                t.ClearField(field)
            t.data_location = EXTERNAL
        set_entries(t, {"location": location, "offset": str(position), "length": str(item.size)})
        position += item.size


def _splice_inline(items: list[_Item]) -> tuple[bytes, dict]:
    """Placeholders in raw_data for the references to write inline; returns (magic, {index: Copy})."""
    magic = os.urandom(12)
    sources = {}
    for item in items:
        if item.source is None or item.external:
            continue
        index = len(sources)
        sources[index] = item.source
        t = item.tensor
        del t.external_data[:]
        t.ClearField("data_location")
        t.raw_data = magic + struct.pack("<I", index)
    return magic, sources


def _model_pieces(serialized: bytes, magic: bytes, sources: dict) -> list:
    if not sources:
        return [serialized]

    def on_raw(start, end):
        if end - start != 16 or serialized[start:start + 12] != magic:
            return None
        source = sources[struct.unpack("<I", serialized[start + 12:end])[0]]
        return [b"\x4a", wire.encode_varint(source.length), source]  # raw_data (9), bytes

    pieces, _, _ = wire.rewrite_tensors(serialized, 0, len(serialized), wire.MODEL, on_raw,
                                        lambda s, e: serialized.find(magic, s, e) != -1)
    return pieces


def _file_mode(path: str) -> int:
    """The mode for a new output: the replaced file's, else what the umask allows."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def output_path(path: str | os.PathLike) -> str:
    """Where writing ``path`` really goes: through a symlink to its target (the link stays)."""
    path = os.fspath(path)
    return os.path.realpath(path) if os.path.islink(path) else path


def check_output(path: str | os.PathLike) -> str:
    """The directory a write to ``path`` goes to; RewriterError when it cannot or must not be
    written: a directory, a missing directory, an existing file that is read-only (no write
    permission bit, or not writable by this user), like ``cp`` and ``onnx.save``."""
    path = output_path(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise RewriterError(f"{path}: is a directory")
    if not os.path.isdir(directory):
        raise RewriterError(f"{path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):  # the temporary file is made there first
        raise RewriterError(f"{path}: directory {directory} is not writable; refused before any work")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return directory
    except OSError as e:
        raise RewriterError(f"{path}: cannot write: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise RewriterError(f"{path}: exists and is not a regular file; refused")
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise RewriterError(f"{path}: the file is read-only; refused (it is left untouched)")
    return directory


def _temporary(directory: str, suffix: str, temps: list[str]) -> tuple[int, str]:
    """A new temporary file beside the destination, its name in ``temps`` *before* it exists, so
    that an interrupt at any moment leaves nothing behind (the caller removes what ``temps``
    names)."""
    while True:
        name = os.path.join(directory, f".rewriter-{secrets.token_hex(6)}{suffix}")
        temps.append(name)
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), name
        except FileExistsError:
            temps.pop()


def save_model(model: onnx.ModelProto, path: str | os.PathLike, *, external_data=None,
               base_dir: str | None = None, keep_inline=None) -> list[str]:
    """Write ``model`` to ``path`` atomically, streaming referenced tensors from their source.

    ``external_data``: None (the default) keeps each tensor where the input had it; ``"always"`` puts every
    tensor with data in ``<path>.data``; ``"never"`` writes everything inline; an int puts
    tensors of at least that many bytes in ``<path>.data``. With ``"always"`` or a size, int64
    tensors under 1 KiB (axes, shapes: ONNX Runtime reads them at load time, and cannot from a
    data file) stay inline, and so do the float ones that decide a shape (Resize's scales and
    roi, Upsample's scales, Range's bounds, OneHot's depth). Over 2 GiB, external data is
    required. With None, ``keep_inline`` (names of the tensors the input held inline) says
    which inline tensors are new: those of at least 1 KiB go to ``<path>.data`` like the
    input's external ones. ``base_dir`` resolves references that ``load_model`` did not make.

    A symlink ``path`` is written through (the link stays, its target gets the model; with
    external data only when link and target share a directory, where readers look for the
    data); a read-only existing file is refused. On any failure the destination (and its data file) is
    left as it was; ``model`` is not changed.

    Returns:
        The files written: the model's path, then its data file's when there is one.
    """
    given = os.fspath(path)
    path = output_path(given)
    directory = check_output(path)
    threshold = parse_layout(external_data)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    items = _plan(copy, threshold, base_dir, keep_inline)
    if path != given and any(i.external for i in items) and \
            os.path.realpath(os.path.dirname(os.path.abspath(given))) != directory:
        raise RewriterError(f"{given}: a symlink to {path} in another directory; the model's external data "
                            "would be looked for beside the link (by ONNX Runtime and onnx.load): give the "
                            "target path, or --external-data never")
    data_name = os.path.basename(path) + ".data"
    temps: list[str] = []
    try:
        data_tmp = None
        if any(i.external for i in items):
            fd, data_tmp = _temporary(directory, ".data.tmp", temps)
            os.fchmod(fd, _file_mode(os.path.join(directory, data_name)))
            with os.fdopen(fd, "wb") as f:
                _write_data_file(items, f.fileno(), data_name)
                os.fsync(f.fileno())
        magic, sources = _splice_inline(items)
        for t, _ in all_tensors(copy):  # private keys are never written
            if t.data_location == EXTERNAL and any(e.key.startswith("__rewriter") for e in t.external_data):
                set_entries(t, {e.key: e.value for e in t.external_data if not e.key.startswith("__rewriter")})
        pieces = _model_pieces(copy.SerializeToString(), magic, sources)
        fd, model_tmp = _temporary(directory, ".onnx.tmp", temps)
        os.fchmod(fd, _file_mode(path))
        with os.fdopen(fd, "wb") as f:
            for piece in pieces:
                if isinstance(piece, wire.Copy):
                    _copy_range(f.fileno(), piece)
                else:
                    _write_all(f.fileno(), piece)
            os.fsync(f.fileno())
        written = [path]
        if data_tmp is not None:
            os.replace(data_tmp, os.path.join(directory, data_name))
            written.append(os.path.join(directory, data_name))
        os.replace(model_tmp, path)
        temps.clear()
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return written
    except OSError as e:
        raise RewriterError(f"{path}: cannot write: {e.strerror or e}") from None
    finally:
        for tmp in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
