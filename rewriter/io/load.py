"""Load model files: clear errors on bad input, lazy weights.

``load_model`` never reads weights into memory. Tensors stored as external data stay
references (checked up-front: inside the model's directory, within their file). Big
*inline* tensors (``raw_data`` of 1 MiB or more) are cut out of the file's protobuf bytes
(see :mod:`rewriter.io.wire`) and become references to the model file itself, marked so that
``save_model`` writes them back inline. ``read_external_tensor`` maps a reference as a
read-only numpy memmap (:func:`tensor_reader` makes the reader that constant lookups take).
Writing is :mod:`rewriter.io.save`'s job.
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

from rewriter.io import wire
from rewriter.io.deferred import deferred
from rewriter.io.tensors import (BASE_KEY, EXTERNAL, INLINE_KEY, INLINE_THRESHOLD, PACKED, PRIVATE_PREFIX,
                                 all_tensors, reference, set_entries, tensor_name)
from rewriter.errors import ModelLoadError, RewriterError

__all__ = ["load_model", "read_external_tensor", "tensor_reader", "check_model", "external_data_dir",
           "without_big_data"]

logger = logging.getLogger(__name__)

def _check_references(model: onnx.ModelProto, path: str, token: str) -> None:
    """Resolve and check every external reference; the private keys are the loader's own:
    a file cannot bring a base directory or an inline marker (only ``token``, made for this
    load, marks a tensor cut out of the model file). A reference to the model file itself
    (other than those) is refused: a model's bytes are not tensor data."""
    base_dir = os.path.dirname(os.path.abspath(path))
    model_real = os.path.realpath(path)
    for t, _ in all_tensors(model):
        if t.data_location != EXTERNAL:
            continue
        if not all(isinstance(e.key, str) and isinstance(e.value, str) for e in t.external_data):
            raise ModelLoadError(f"{path}: {tensor_name(t)}: external data entries are not valid UTF-8")
        inline = any(e.key == INLINE_KEY and e.value == token for e in t.external_data)
        for e in t.external_data:  # a file must not smuggle a base directory or a marker in
            if e.key.startswith(PRIVATE_PREFIX):
                e.value = ""
        ref_path, offset, length = reference(t, base_dir, f"{path}: {tensor_name(t)}")
        if ref_path == model_real and not inline:
            raise ModelLoadError(f"{path}: {tensor_name(t)}: external data location "
                                 f"'{next((e.value for e in t.external_data if e.key == 'location'), '')}' "
                                 "is the model file itself; refused")
        items = {"location": os.path.relpath(ref_path, os.path.realpath(base_dir)),
                 "offset": str(offset), "length": str(length), BASE_KEY: os.path.realpath(base_dir)}
        if inline:
            items[INLINE_KEY] = "1"
        set_entries(t, items)


# ---------------------------------------------------------------- load

def _cut_big_tensors(buf, size: int, name: str, threshold: int, token: str) -> bytes:
    """The model's bytes with every raw_data >= threshold replaced by a reference to the file."""
    def on_raw(start, end):
        if end - start < threshold:
            return None
        return [wire.string_entry(13, "location", name), wire.string_entry(13, "offset", str(start)),
                wire.string_entry(13, "length", str(end - start)), wire.string_entry(13, INLINE_KEY, token),
                b"\x70\x01"]  # data_location (14) = EXTERNAL

    pieces, _, changed = wire.rewrite_tensors(buf, 0, size, wire.MODEL, on_raw,
                                              lambda s, e: e - s >= threshold)
    data = b"".join(pieces) if changed else bytes(buf)
    for p in pieces:
        if isinstance(p, memoryview):
            p.release()
    return data, changed


def _mark_cut_tensors_external(model: onnx.ModelProto, token: str) -> None:
    """A tensor whose bytes carry its own data_location=DEFAULT after raw_data (as onnx
    writes it after loading external data) overrides the EXTERNAL written in raw_data's
    place: protobuf keeps the last value. The marker entry says which tensors were cut."""
    for t, _ in all_tensors(model):
        if t.data_location != EXTERNAL and any(e.key == INLINE_KEY and e.value == token for e in t.external_data):
            t.data_location = EXTERNAL


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
    token = os.urandom(8).hex()  # marks the tensors this load cut out; a file cannot forge it
    try:
        cut = False
        with open(path, "rb") as f:
            if st.st_size < inline_threshold:
                data = f.read()
            else:
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    data, cut = _cut_big_tensors(mm, len(mm), os.path.basename(path), inline_threshold,
                                                     token)
        model.ParseFromString(data)
        if cut:
            _mark_cut_tensors_external(model, token)
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror or e}") from None
    except Exception:  # WireError, protobuf's DecodeError or RuntimeError by implementation
        raise ModelLoadError(f"{path}: not an ONNX model (protobuf parse failed)") from None
    if not model.HasField("graph") or model.ir_version <= 0:
        raise ModelLoadError(f"{path}: not an ONNX model (no graph or no IR version)")
    _check_references(model, path, token)
    return model


def read_external_tensor(tensor: onnx.TensorProto, base_dir: str | None) -> np.ndarray:
    """The value of an external-data tensor as a read-only array mapped from its file."""
    what = tensor_name(tensor)
    path, offset, length = reference(tensor, base_dir, what)
    shape = tuple(int(d) for d in tensor.dims)
    found = deferred(tensor)
    if found is not None:  # a tensor its producer makes from the reference's bytes
        producer, spec = found
        source = np.memmap(path, dtype=producer.source, mode="r", offset=offset, shape=shape) if length else \
            np.zeros(shape, producer.source)
        array = producer.make(source, tensor.data_type, spec)
        array.flags.writeable = False
        return array
    if tensor.data_type in PACKED or tensor.data_type == onnx.TensorProto.STRING:
        if tensor.data_type == onnx.TensorProto.STRING:
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


def tensor_reader(base_dir: str | None):
    """A ``TensorProto -> numpy array`` reader for tensors of a model loaded from ``base_dir``:
    external data is mapped from its file, the rest decoded."""

    def read(tensor: onnx.TensorProto) -> np.ndarray:
        if tensor.data_location == EXTERNAL:
            return read_external_tensor(tensor, base_dir)
        return numpy_helper.to_array(tensor)

    return read


@contextlib.contextmanager
def external_data_dir(model: onnx.ModelProto, external: bool | None = None):
    """Make the working directory the one ``model``'s external references are relative to.

    ``onnx.checker`` and ONNX Runtime resolve external data of an in-memory proto against the
    working directory. Wrap just those calls (the CLI is single-threaded; chdir is per process).
    ``external=False``: the caller knows no tensor is a reference (nothing to walk).
    """
    if external is False:
        yield
        return
    bases = {e.value for t, _ in all_tensors(model) if t.data_location == EXTERNAL
             for e in t.external_data if e.key == BASE_KEY}
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
    for t, _ in all_tensors(copy):
        if t.data_location != EXTERNAL:
            continue
        entries = {e.key: e.value for e in t.external_data}
        value = read_external_tensor(t, None) if int(entries.get("length", limit + 1)) <= limit else None
        del t.external_data[:]
        t.ClearField("data_location")
        if value is not None:
            t.raw_data = np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()
    return copy


def check_model(model: onnx.ModelProto, full_check: bool = False, *, external: bool | None = None) -> None:
    """``onnx.checker.check_model`` for a proto whose tensors may be references; raises its errors.

    The checker resolves references from the working directory, and its ``full_check`` shape
    inference reads whatever it resolves into memory: so references are checked in their
    directory, and full_check's strict shape inference runs on :func:`without_big_data`.
    ``external=False``: the caller knows no tensor is a reference.
    """
    from rewriter.graph.ort_onnx_domain import relabel

    model = relabel(model)  # ONNX Runtime's ONNX-domain contrib ops: no schema in onnx
    with external_data_dir(model, external):
        onnx.checker.check_model(model, full_check=False)
    if full_check:
        onnx.shape_inference.infer_shapes(without_big_data(model), check_type=True, strict_mode=True)
