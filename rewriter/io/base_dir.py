"""The directory an ``onnx_ir.Model``'s external data lives in, carried to the ModelProto side.

onnx_ir keeps it in each ``ExternalTensor.base_dir``; a ``TensorProto`` has no field for it, so
``onnx_ir.to_proto`` drops it and a check or a read of the proto would then look in the working
directory. :func:`proto_of` is the one way an onnx_ir model reaches the ModelProto engines
(``rewriter.convert_opset`` and friends, the passes of :mod:`rewriter.passes`, the checks of
:mod:`rewriter.verify`): the proto, with every external reference tagged with the private
``BASE_KEY`` entry that :func:`rewriter.io.load_model` writes for a file, and the directory.
The way back is :func:`rewriter.optimize.bridge.to_ir`, which gives each tensor its directory
again. Imports onnx_ir only when given an onnx_ir model.
"""

from __future__ import annotations

import os

import onnx

from rewriter.io.tensors import BASE_KEY, EXTERNAL, all_tensors

__all__ = ["ir_base_dir", "tag_base_dir", "proto_of"]


def ir_base_dir(model) -> str | None:
    """The directory of an ``onnx_ir.Model``'s external tensors (its main graph's initializers;
    ``""`` is the working directory), or None when it has none."""
    import onnx_ir as ir

    return next((v.const_value.base_dir for v in model.graph.initializers.values()
                 if isinstance(v.const_value, ir.ExternalTensor)), None)


def tag_base_dir(proto: onnx.ModelProto, base_dir: str | None) -> onnx.ModelProto:
    """``proto`` (changed in place) with each external reference that does not say where it is
    relative to tagged with ``base_dir``, as :func:`rewriter.io.load_model` does for a path."""
    if base_dir is None:
        return proto
    real = os.path.realpath(base_dir)
    for t, _ in all_tensors(proto):
        if t.data_location == EXTERNAL and not any(e.key == BASE_KEY for e in t.external_data):
            t.external_data.add(key=BASE_KEY, value=real)
    return proto


def proto_of(model, base_dir: str | None = None) -> tuple[onnx.ModelProto, str | None]:
    """(the ModelProto, the directory of its external data) of a ModelProto (returned as it is)
    or an ``onnx_ir.Model`` (serialized and tagged; the model is not changed). ``base_dir``, when
    given, is that directory instead of the one the model's tensors name."""
    if isinstance(model, onnx.ModelProto):
        return model, base_dir
    import onnx_ir as ir

    if not isinstance(model, ir.Model):
        raise TypeError(f"expected an onnx.ModelProto or an onnx_ir.Model, got {type(model).__name__}")
    base_dir = base_dir or ir_base_dir(model)
    return tag_base_dir(ir.to_proto(model), base_dir), base_dir
