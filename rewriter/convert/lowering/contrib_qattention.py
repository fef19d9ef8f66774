"""``com.microsoft`` QAttention as standard ONNX (``contrib_ops/cpu/quantization/attention_quant.cc``):
the projection is the kernel's integer GEMM (MatMulInteger: uint8 input, uint8 or int8 weights,
scalar or per-column weight zero points, exact int32 sums), then float32(acc) * (weight_scale *
input_scale) + bias as its scale-bias output processor writes it; the attention after it is
Attention's (:func:`contrib_attention.attend_packed`: heads, past/present, the CPU kernel's masks,
unidirectional, scale, mask_filter_value), within float32 rounding of the kernel.

Named blockers: do_rotary, past_present_share_buffer, weights of other than rank 2 or of a width
that is not static and a multiple of 3 x num_heads, input types the kernel has no kernel for."""

from __future__ import annotations

from onnx import TensorProto

from rewriter.convert.lowering.contrib_attention import attend_packed
from rewriter.convert.lowering.contrib_common import COM
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32
from rewriter.convert.lowering.registry import lowering

__all__ = []

U8, I8 = TensorProto.UINT8, TensorProto.INT8
NEAR = ("the projection's int32 sums exact (MatMulInteger), then float32 rounding of ONNX Runtime's CPU kernel "
        "(its GEMM and softmax order sums differently)")



@output_types("QAttention")
def _qattention_types(node, types):
    _, dims = dims_of(types[node.input[0]])
    _, w = dims_of(types[node.input[1]])
    width = w[1] // 3 if w and len(w) == 2 and isinstance(w[1], int) else None
    return [tensor_type(TensorProto.FLOAT, None if dims is None else dims[:2] + [width]), None]


@lowering("QAttention", COM, exactness=NEAR)
def qattention(ctx) -> None:
    ctx.known("num_heads", "unidirectional", "do_rotary", "past_present_share_buffer", "mask_filter_value", "scale")
    ctx.input_elem({U8: "uint8"})
    ctx.input_elem({U8: "uint8", I8: "int8"}, i=1)
    if ctx.attr("do_rotary", 0):
        ctx.block("do_rotary=1 (rotary embedding inside QAttention) is not lowered: a named blocker")
    if ctx.attr("past_present_share_buffer", 0):
        ctx.block("past_present_share_buffer (a shared KV buffer) is not lowered")
    heads = int(ctx.attr("num_heads"))
    weights = ctx.input(1)
    width = weights.dim(-1)
    if weights.rank != 2 or width is None or width % (3 * heads):
        ctx.block(f"weights of shape {weights.shape}: the kernel reads [D, 3 x hidden] with hidden a multiple of "
                  "num_heads (static here)")
    e, x = ctx.emit, ctx.node.input[0]
    zero_points = [ctx.name(6) or "", ctx.name(7) or ""]
    while zero_points and not zero_points[-1]:
        zero_points.pop()
    acc = e.op("MatMulInteger", [x, ctx.node.input[1], *zero_points])
    scale = e.op("Mul", [ctx.node.input[4], ctx.node.input[3]])  # dequant_scale *= input_scale
    qkv = e.op("Add", [e.op("Mul", [e.cast(acc, F32), scale]), ctx.node.input[2]])
    hidden = width // 3
    attend_packed(ctx, x, qkv, [hidden] * 3, heads, F32, mask_i=5, past_i=8, bias_i=None)
