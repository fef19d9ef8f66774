"""``com.microsoft`` QEmbedLayerNormalization as standard ONNX (``contrib_ops/cpu/quantization/
qembed_layer_norm.cc``): the five quantized tensors (word, position, segment embeddings, gamma, beta)
dequantized as the kernel does, float32(q - zero point) * scale, then EmbedLayerNormalization's
lowering (:func:`contrib_norm.embed_layer_norm`: rows gathered and summed, positions 0..S-1,
normalized; the mask index the count of ones per row, zeros without a mask), within float32 rounding
of the kernel's two-pass normalization."""

from __future__ import annotations

from onnx import TensorProto, helper

from rewriter.convert.lowering.contrib_common import COM, INT32
from rewriter.convert.lowering.contrib_norm import NEAR, embed_layer_norm
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32
from rewriter.convert.lowering.registry import lowering

__all__ = []

U8, I8 = TensorProto.UINT8, TensorProto.INT8
TENSORS = ((2, 8, 13), (3, 9, 14), (4, 10, 15), (5, 11, 16), (6, 12, 17))  # (quantized, scale, zero point)



@output_types("QEmbedLayerNormalization")
def _qembed_types(node, types):
    _, ids = dims_of(types[node.input[0]])
    _, table = dims_of(types[node.input[2]])
    dims = None if ids is None or table is None else [ids[0], ids[1], table[1]]
    return [tensor_type(TensorProto.FLOAT, dims), tensor_type(INT32, None if ids is None else [ids[0]])]


@lowering("QEmbedLayerNormalization", COM, exactness=NEAR)
def qembed_layer_norm(ctx) -> None:
    ctx.known("epsilon")
    ctx.input_elem({INT32: "int32"})
    elem = ctx.input_elem({U8: "uint8", I8: "int8"}, i=2)
    e = ctx.emit
    inputs = [ctx.node.input[0], ctx.name(1) or ""]
    for q, scale, zero_point in TENSORS:
        if ctx.name(q) is None:
            inputs.append("")
            continue
        if ctx.name(scale) is None or ctx.name(zero_point) is None:
            ctx.block(f"input {q} has no scale or zero point (ONNX Runtime reads both)")
        if ctx.input(q).elem != elem:
            ctx.block("the quantized inputs are not all of one type (ONNX Runtime reads them as the word embedding's)")
        diff = e.op("Sub", [e.cast(ctx.node.input[q], INT32), e.cast(ctx.node.input[zero_point], INT32)])
        value = e.op("Mul", [e.cast(diff, F32), ctx.node.input[scale]])
        ctx.declare(value, F32, ctx.input(q).shape)
        inputs.append(value)
    inputs.append(ctx.name(7) or "")
    while not inputs[-1]:
        inputs.pop()
    derived = helper.make_node("EmbedLayerNormalization", inputs, list(ctx.node.output[:2]), domain=COM,
                               name=ctx.node.name, epsilon=float(ctx.attr("epsilon", 1e-12)))
    embed_layer_norm(ctx.derived(derived))
