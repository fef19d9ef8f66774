"""What the attention lowerings share: heads split and merged, the additive mask ONNX Runtime's CPU
kernels build (``contrib_ops/cpu/bert/attention_helper.h`` PrepareMask: a masked key gets
``mask_filter_value``, not -inf), and the core: softmax(scale * Q K^T + mask + attention_bias) V,
written as ONNX Attention-23 when the opset has it and as MatMul/Softmax otherwise."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from rewriter.convert.lowering.contrib_common import INT32
from rewriter.convert.lowering.emit import F32

__all__ = ["split_heads", "merge_heads", "key_mask", "causal_mask", "attend", "dim", "scalar", "BOOL"]

BOOL = TensorProto.BOOL


def split_heads(e, x: str, heads: int) -> str:
    """[B, S, N*h] -> [B, N, S, h]."""
    return e.op("Transpose", [e.op("Reshape", [x, e.ints([0, 0, heads, -1])])], perm=[0, 2, 1, 3])


def merge_heads(e, x: str, out: str | None = None) -> str:
    """[B, N, S, h] -> [B, S, N*h]."""
    return e.op("Reshape", [e.op("Transpose", [x], perm=[0, 2, 1, 3]), e.ints([0, 0, -1])], out=out)


def _positions(e, total: str) -> str:
    """0 .. T-1 (int32) for the scalar int64 ``total``."""
    return e.cast(e.op("Range", [e.const(np.int64(0), hint="zero"), total, e.const(np.int64(1), hint="one")]), INT32)


def key_mask(ctx, mask: str, rank: int | None, total: str, batch: str, ends_only: bool = False) -> str:
    """Boolean "masked" for the mask input's format: 1D [B] (keys at or after the end position) or
    [2B] (also before the start), 2D [B, T] / 3D [B, S, T] raw (masked where <= 0). Shape
    broadcastable to [B, 1, S, T]."""
    e = ctx.emit
    if rank == 1 and ends_only:  # [B]: end positions only (ONNX Runtime tells [B] from [2B] by the length)
        keys = e.unsqueeze(_positions(e, total), [0])  # [1, T]
        return e.unsqueeze(e.op("GreaterOrEqual", [keys, e.unsqueeze(mask, [1])]), [1, 2])  # [B, 1, 1, T]
    if rank == 1:
        ends = e.op("Slice", [mask, e.ints([0]), batch, e.ints([0])])
        pad = e.op("ConstantOfShape", [batch], value=_zero_int32())
        starts = e.op("Slice", [e.op("Concat", [mask, pad], axis=0), batch, e.op("Add", [batch, batch]), e.ints([0])])
        keys = e.unsqueeze(_positions(e, total), [0])  # [1, T]
        masked = e.op("Or", [e.op("GreaterOrEqual", [keys, e.unsqueeze(ends, [1])]),
                             e.op("Less", [keys, e.op("Min", [e.unsqueeze(starts, [1]), e.cast(total, INT32)])])])
        return e.unsqueeze(masked, [1, 2])  # [B, 1, 1, T]
    if rank == 2:
        return e.unsqueeze(e.op("LessOrEqual", [mask, e.const(np.int32(0), hint="zero")]), [1, 2])
    if rank == 3:
        return e.unsqueeze(e.op("LessOrEqual", [mask, e.const(np.int32(0), hint="zero")]), [1])
    ctx.block(f"mask of rank {rank}: ONNX Runtime's CPU kernel takes 1D (end, or end and start positions), "
              "2D or 3D masks (4D Megatron masks are not implemented there)")


def _zero_int32():
    return numpy_helper.from_array(np.zeros(1, np.int32))


def causal_mask(e, query_len: str, total: str) -> str:
    """Boolean [S, T]: key j is masked for query i when j > (T - S) + i (past length T - S)."""
    q = e.unsqueeze(_positions(e, query_len), [1])
    k = e.unsqueeze(_positions(e, total), [0])
    past = e.cast(e.op("Sub", [total, query_len]), INT32)
    return e.op("Greater", [k, e.op("Add", [q, past])])


def attend(e, q: str, k: str, v: str, *, scale: float, masked: str | None, filter_value: float,
           bias: str | None, causal: str | None = None, elem: int = F32) -> str:
    """softmax(scale * q k^T + mask + bias) v on [B, N, S, h] tensors: the mask is ``filter_value``
    where ``masked``, the type's lowest value where ``causal`` (as the kernel writes them), else 0.
    Half inputs are computed in float32 and rounded once, as ONNX Runtime's CPU kernels do."""
    if elem != F32:
        q, k, v = (e.cast(t, F32) for t in (q, k, v))
        out = attend(e, q, k, v, scale=scale, masked=masked, filter_value=filter_value,
                     bias=None if bias is None else e.cast(bias, F32), causal=causal)
        return e.cast(out, elem)
    dtype = np.float32
    additive = None
    if masked is not None:
        additive = e.op("Where", [masked, e.const(dtype(filter_value), hint="filter"), e.const(dtype(0), hint="zero")])
    if causal is not None:
        lowest = e.const(np.finfo(dtype).min, hint="lowest")
        additive = e.op("Where", [causal, lowest, e.const(dtype(0), hint="zero") if additive is None else additive])
    if bias is not None:
        additive = bias if additive is None else e.op("Add", [additive, bias])
    if e.final_opset >= 23:
        inputs = [q, k, v]
        if additive is not None:  # Attention-23 wants the mask's query axis spelled out
            shape = e.op("Concat", [e.ints([1, 1]), dim(e, q, 2), dim(e, k, 2)], axis=0)
            inputs.append(e.op("Expand", [additive, shape]))
        return e.op("Attention", inputs, scale=float(scale))
    scores = e.op("Mul", [e.op("MatMul", [q, e.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                          e.const(dtype(scale), hint="scale")])
    if additive is not None:
        scores = e.op("Add", [scores, additive])
    return e.op("MatMul", [e.op("Softmax", [scores], axis=-1), v])


def dim(e, x: str, axis: int) -> str:
    """Dim ``axis`` of ``x`` as a 1-element int64 tensor."""
    return e.op("Gather", [e.op("Shape", [x]), e.ints([axis])], axis=0)


def scalar(e, x: str) -> str:
    return e.op("Squeeze", [x, e.ints([0])])

