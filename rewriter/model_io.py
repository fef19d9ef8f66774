"""Load and save model files: clear errors on bad input, atomic writes."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.errors import ModelLoadError

__all__ = ["load_model", "save_model", "read_external_tensor"]


def load_model(path: str | os.PathLike) -> onnx.ModelProto:
    """Read an ONNX model file (with its external data) or raise ModelLoadError naming it."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelLoadError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ModelLoadError(f"{path}: is a directory, not a model file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror or e}") from None
    if not data:
        raise ModelLoadError(f"{path}: empty file")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # protobuf raises DecodeError or RuntimeError by implementation
        raise ModelLoadError(f"{path}: not an ONNX model (protobuf parse failed)") from None
    if not model.HasField("graph") or model.ir_version <= 0:
        raise ModelLoadError(f"{path}: not an ONNX model (no graph or no IR version)")
    base_dir = os.path.dirname(os.path.abspath(path))
    try:
        onnx.external_data_helper.load_external_data_for_model(model, base_dir)
    except (OSError, ValueError, onnx.checker.ValidationError) as e:
        raise ModelLoadError(f"{path}: cannot read external data: {e}") from None
    return model


def read_external_tensor(tensor: onnx.TensorProto, base_dir: str | None) -> np.ndarray:
    """The value of a tensor whose data is stored in an external file."""
    copy = onnx.TensorProto()
    copy.CopyFrom(tensor)
    try:
        onnx.external_data_helper.load_external_data_for_tensor(copy, base_dir or ".")
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"tensor '{tensor.name}': cannot read external data: {e}") from None
    copy.data_location = onnx.TensorProto.DEFAULT
    del copy.external_data[:]
    return numpy_helper.to_array(copy)


def save_model(model: onnx.ModelProto, path: str | os.PathLike) -> None:
    """Write ``model`` to ``path`` atomically: a temporary file beside it, fsync, rename.

    On any failure the destination is left as it was.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ModelLoadError(f"{path}: is a directory")
    if not os.path.isdir(directory):
        raise ModelLoadError(f"{path}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".rewriter-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
