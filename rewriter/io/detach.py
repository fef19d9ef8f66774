"""A result the caller can keep: no private reference leaves the package.

In memory, a model loaded by :func:`rewriter.io.load_model` or rewritten by the engines holds
references only this package understands: tensors that point into their source file through
the private ``external_data`` keys of :mod:`rewriter.io.tensors` (the directory a location is
relative to, a big inline tensor left in the model file, a deferred tensor whose bytes are still
its source's). ``rewriter.io.save_model`` streams them; ``onnx.save``, ``SerializeToString``
and ONNX Runtime cannot read them. :func:`detach` reads each such tensor into ``raw_data``, as
``onnx.load`` does, so what a public function returns is a plain ModelProto.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.io.load import read_external_tensor
from rewriter.io.tensors import (BASE_KEY, DEFERRED_KEY, EXTERNAL, PACKED, PRIVATE_PREFIX, all_tensors, reference,
                                 tensor_name)

__all__ = ["detach", "private_references"]

_KEEP_WITH_DIRECTORY = frozenset({BASE_KEY})


def _private(t: onnx.TensorProto) -> set[str]:
    return {e.key for e in t.external_data if e.key.startswith(PRIVATE_PREFIX)}


def private_references(model: onnx.ModelProto) -> list[str]:
    """The names of the tensors of ``model`` that carry a private key (empty when it is plain)."""
    return [tensor_name(t) for t, _ in all_tensors(model) if _private(t)]


def _raw(t: onnx.TensorProto, base_dir: str | None) -> bytes:
    """The bytes ``raw_data`` holds for the referenced tensor ``t`` (a deferred one made)."""
    if t.data_type in PACKED and not any(e.key == DEFERRED_KEY for e in t.external_data):
        path, offset, length = reference(t, base_dir, tensor_name(t))
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)
    value = read_external_tensor(t, base_dir)
    return np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()


def detach(model: onnx.ModelProto, base_dir: str | None = None, *, keep_located: bool = False) -> onnx.ModelProto:
    """``model`` (changed in place and returned) with every tensor that carries a private key
    read into ``raw_data``; plain external references (the caller's own) stay as they are.

    ``keep_located``: a reference whose only private key is its directory stays a reference (for
    the bridge to ``onnx_ir``, which gives each ``ExternalTensor`` its directory); the deferred
    and inline ones are read all the same, since onnx_ir would read their bytes as they lie.
    """
    for t, _ in all_tensors(model):
        if t.data_location != EXTERNAL:
            continue
        private = _private(t)
        if not private or (keep_located and private <= _KEEP_WITH_DIRECTORY):
            continue
        raw = _raw(t, base_dir)
        del t.external_data[:]
        t.ClearField("data_location")
        t.raw_data = raw
    return model

