"""ONNX Runtime as the oracle of 8-bit integer arithmetic on any x86-64 CPU.

On a CPU with AVX2 and no VNNI, ONNX Runtime's uint8 x int8 kernels (MLAS' VPMADDUBSW path: MatMulInteger,
ConvInteger, QLinearConv, QLinearMatMul, QGemm and the QDQ groups it fuses into them) add each pair of
products in int16 with saturation: 255 * 127 * 4 sums to 65534 there, not 129540 (ONNX Runtime's
quantization docs name the saturation). Its result then is neither the op's definition nor its
result on a CPU with VNNI. ``ort_model`` gives the copy of a model that ONNX Runtime computes exactly
on every CPU: each int8 weight of such an op (of uint8 activations) is read as uint8 ``w + 128`` with
zero point ``zp + 128`` (the same integers ``w - zp`` by definition; uint8 x uint8 is exact in MLAS
everywhere).
On a CPU that does not saturate the model is returned as it is.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

__all__ = ["U8S8_OPS", "saturates", "shifted", "ort_model"]

# op -> (weight input, its zero point input)
U8S8_OPS = {"MatMulInteger": (1, 3), "ConvInteger": (1, 3), "QLinearConv": (3, 5), "QLinearMatMul": (3, 5),
            "QGemm": (3, 5), "DequantizeLinear": (0, 2),
            # com.microsoft's dynamic ones: their activations are uint8 (quantized inside, or DynamicQuantizeLinear's)
            "DynamicQuantizeMatMul": (1, 3), "MatMulIntegerToFloat": (1, 5), "QAttention": (1, 7)}
_UINT8_INSIDE = {"DequantizeLinear", "DynamicQuantizeMatMul"}


@functools.lru_cache(maxsize=None)
def saturates() -> bool:
    """Whether this CPU's ONNX Runtime sums uint8 x int8 pairs with int16 saturation (measured)."""
    g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])],
                          [helper.make_tensor("b", TensorProto.INT8, [4, 1], [127] * 4)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return int(s.run(None, {"a": np.full((1, 4), 255, np.uint8)})[0][0, 0]) != 255 * 127 * 4


def shifted(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every int8 weight of a ``U8S8_OPS`` node of uint8 activations (main graph)
    read as uint8 ``w + 128``, its zero point as ``zp + 128`` (Cast / Add / Cast nodes before it,
    which ONNX Runtime folds for constants); ``model`` itself when it has no such weight."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    elems = _elem_types(out.graph)
    uint8_qdq = TensorProto.UINT8 in {elems.get(n.output[0]) for n in out.graph.node if n.op_type == "QuantizeLinear"}
    nodes = []
    for i, node in enumerate(out.graph.node):
        where = U8S8_OPS.get(node.op_type)
        activation = where is not None and len(node.input) > where[0] and (
            uint8_qdq if node.op_type == "DequantizeLinear" else node.op_type in _UINT8_INSIDE
            or elems.get(node.input[0]) == TensorProto.UINT8)
        if activation and elems.get(node.input[where[0]]) == TensorProto.INT8:
            ins = list(node.input) + [""] * (where[1] + 1 - len(node.input))
            for k in where:
                name = ins[k] or f"zero_int8_{i}"
                if not ins[k]:
                    nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.int8(0))))
                ins[k] = f"{name}__u8_{i}"
                nodes += [helper.make_node("Cast", [name], [f"{ins[k]}_i32"], to=TensorProto.INT32),
                          helper.make_node("Add", [f"{ins[k]}_i32", "int8_shift_128"], [f"{ins[k]}_sum"]),
                          helper.make_node("Cast", [f"{ins[k]}_sum"], [ins[k]], to=TensorProto.UINT8)]
            del node.input[:]
            node.input.extend(ins)
        nodes.append(node)
    if len(nodes) == len(out.graph.node):
        return model
    out.graph.initializer.append(numpy_helper.from_array(np.int32(128), "int8_shift_128"))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _elem_types(graph) -> dict:
    """Element types of the main graph's values that its declarations or the zero points of the
    nodes that quantize tell."""
    elems = {t.name: t.data_type for t in graph.initializer}
    for v in [*graph.input, *graph.value_info, *graph.output]:
        if v.type.HasField("tensor_type"):
            elems.setdefault(v.name, v.type.tensor_type.elem_type)
    for n in graph.node:
        if n.op_type == "DynamicQuantizeLinear":
            elems.setdefault(n.output[0], TensorProto.UINT8)
        for op, zp in (("QuantizeLinear", 2), ("QLinearConv", 7), ("QLinearMatMul", 7), ("QGemm", 8)):
            if n.op_type == op and len(n.input) > zp and n.input[zp] in elems:
                elems.setdefault(n.output[0], elems[n.input[zp]])
    return elems


def ort_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model ONNX Runtime computes exactly on this CPU: ``shifted(model)`` where it saturates."""
    return shifted(model) if saturates() else model
