"""One-node ``com.microsoft`` models for the lowering tests: the original runs in ONNX Runtime (which
implements the domain: the oracle), the lowered one in ONNX Runtime and onnx.reference
(:func:`tests.convert.support.lowering_oracle.check_lowering`)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

COM = "com.microsoft"
NP = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.FLOAT: np.float32,
      TensorProto.FLOAT16: np.float16, TensorProto.INT32: np.int32, TensorProto.INT64: np.int64}


def const(name, value, dtype):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def com_model(op, inputs, outputs, *, initializers=(), onnx_opset=17, name="n", **attrs):
    """A model of one ``com.microsoft`` node: ``inputs`` are (name, elem, shape) graph inputs or names
    of ``initializers`` ("" for an absent optional input); ``outputs`` (name, elem, shape)."""
    names = [i if isinstance(i, str) else i[0] for i in inputs]
    node = helper.make_node(op, names, [o[0] for o in outputs], domain=COM, name=name, **attrs)
    graph_inputs = [helper.make_tensor_value_info(*i) for i in inputs if not isinstance(i, str)]
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info(*o) for o in outputs],
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", onnx_opset), helper.make_opsetid(COM, 1)])
    model.ir_version = 8
    return model


def qparams(prefix, scale, zero_point, elem):
    """(scale, zero point) initializers named ``prefix``_s and ``prefix``_z."""
    return [const(f"{prefix}_s", scale, np.float32), const(f"{prefix}_z", zero_point, NP[elem])]


def random_q(rng, elem, shape):
    info = np.iinfo(NP[elem])
    return rng.integers(info.min, info.max + 1, size=shape).astype(NP[elem])


def every_byte(elem):
    """The 256 values of an 8-bit type."""
    return np.arange(256).astype(np.uint8).view(NP[elem])
