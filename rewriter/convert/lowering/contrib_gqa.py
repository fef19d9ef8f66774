"""``com.microsoft`` GroupQueryAttention as standard ONNX, as ONNX Runtime's CPU kernel computes it
(``contrib_ops/cpu/bert/group_query_attention.cc``, ``gqa_attention_base.h``): Q, K, V (packed or
separate) in heads; with ``do_rotary`` the rotary embedding at the kernel's positions (0..S-1 for the
first prompt, past length + s after it, the past length being seqlens_k + 1 - S); K and V after the
past ones (the present outputs); each query head attends its group's KV head; scale * Q K^T
(optionally softcap * tanh(. / softcap)); keys after the query's causal position, or before its
local window of ``local_window_size`` keys, are left out of the softmax; times V, heads merged.
Attention-23 (with the mask as an additive -inf) when the final opset has it and there is no
softcap, MatMul/Softmax otherwise.

The present KV is the past KV followed by the new one: ONNX Runtime writes the new keys of a row
right after that row's own past length, which is the same whenever each row's past length is the
past tensor's length (a batch of one, or rows decoded in step; a shared past/present buffer is
ONNX Runtime's I/O binding, not the graph's).

Named blockers: position_ids, attention_bias, head_sink, quantized KV cache (k/v scales, quant
types), q/k norm weights, query_seqlens, smooth_softmax, qk_output, causal=0, sliding_window_cache."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rewriter.convert.lowering.contrib_attention_core import dim, merge_heads, scalar, split_heads
from rewriter.convert.lowering.contrib_common import COM
from rewriter.convert.lowering.contrib_llm import cos_sin, rotate
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32, I64
from rewriter.convert.lowering.registry import lowering

__all__ = []

NEAR = "within float32 rounding of ONNX Runtime's CPU kernel"
UNSUPPORTED_INPUTS = {9: "position_ids", 10: "attention_bias", 11: "head_sink", 12: "k_scale", 13: "v_scale",
                      14: "q_norm_weight", 15: "k_norm_weight", 16: "query_seqlens"}
DEFAULTS = {"smooth_softmax": (-1, 0), "qk_output": (0,), "causal": (1,), "sliding_window_cache": (0,),
            "k_quant_type": ("NONE",), "v_quant_type": ("NONE",), "kv_cache_bit_width": (0,)}



def _refuse_unsupported(ctx) -> None:
    for i, what in UNSUPPORTED_INPUTS.items():
        if ctx.name(i):
            ctx.block(f"input {what} is not lowered")
    for name, allowed in DEFAULTS.items():
        if ctx.attr(name, allowed[0]) not in allowed:
            ctx.block(f"{name}={ctx.attr(name)} is not lowered")
    if ctx.used(3):
        ctx.block("output output_qk is read: not lowered")


@output_types("GroupQueryAttention")
def _gqa_types(node, types):
    elem, dims = dims_of(types[node.input[0]])
    attrs = {a.name: a.i for a in node.attribute if a.type == 2}
    heads, kv = attrs["num_heads"], attrs["kv_num_heads"]
    packed = len(node.input) < 2 or not node.input[1]
    width = dims[-1] if dims else None
    head = width // (heads + 2 * kv if packed else heads) if isinstance(width, int) else None
    out = None if dims is None else dims[:2] + [None if head is None else heads * head]
    present = tensor_type(elem, None if dims is None else [dims[0], kv, None, head])
    return [tensor_type(elem, out), present, present]


def _heads(ctx, heads: int, kv: int):
    """(Q [B, N, S, h], K, V [B, kvN, S, h], head size)."""
    e, q = ctx.emit, ctx.node.input[0]
    width = ctx.input(0).dim(-1)
    packed = ctx.name(1) is None
    if width is None:
        ctx.block("the query's width is not static: the head size is folded into the graph")
    head = width // (heads + 2 * kv) if packed else width // heads
    if packed:
        q, k, v = e.op("Split", [q, e.ints([heads * head, kv * head, kv * head])], n_out=3, axis=-1)
    else:
        k, v = ctx.node.input[1], ctx.node.input[2]
    return split_heads(e, q, heads), split_heads(e, k, kv), split_heads(e, v, kv), head


def _past_lengths(e, seqlens: str, total: str, query_len: str) -> str:
    """Each row's past length [B] (int64): 0 for the first prompt (S == total_sequence_length),
    else seqlens_k + 1 - S."""
    first = e.op("Equal", [e.cast(total, I64), query_len])
    rest = e.op("Sub", [e.op("Add", [e.cast(seqlens, I64), e.const(np.int64(1), hint="one")]), query_len])
    return e.op("Where", [first, e.const(np.int64(0), hint="zero"), rest])


def _repeat_kv(e, x: str, groups: int, heads: int) -> str:
    if groups == 1:
        return x
    # head i reads key/value head i // groups: a Gather of constant indices (no Reshape whose -1 is the
    # key length: LiteRT's onnx2tf derives that shape wrongly while the length is not static)
    return e.op("Gather", [x, e.ints(list(np.arange(heads) // groups))], axis=1)


def _allowed(e, past: str, query_len: str, keys: str, window: int) -> str:
    """Boolean [B, 1, S, T]: key j is attended by query s when j < past + s + 1 and, with a local
    window W > 0, j >= past + s + 1 - W (ONNX Runtime 1.32 keeps W keys, the query's own among them)."""
    steps = e.op("Range", [e.const(np.int64(0), hint="zero"), query_len, e.const(np.int64(1), hint="one")])
    limit = e.op("Add", [e.unsqueeze(past, [1]), e.op("Add", [steps, e.const(np.int64(1), hint="one")])])  # [B, S]
    limit = e.unsqueeze(limit, [1, 3])  # [B, 1, S, 1]
    j = e.op("Range", [e.const(np.int64(0), hint="zero"), keys, e.const(np.int64(1), hint="one")])
    allowed = e.op("Less", [j, limit])
    if window > 0:
        start = e.op("Sub", [limit, e.const(np.int64(window), hint="window")])  # 1.32 measured: window keys in all
        allowed = e.op("And", [allowed, e.op("GreaterOrEqual", [j, start])])
    return allowed


@lowering("GroupQueryAttention", COM, exactness=NEAR)
def group_query_attention(ctx) -> None:
    ctx.known("num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary", "rotary_interleaved",
              "smooth_softmax", "qk_output", "causal", "sliding_window_cache", "k_quant_type", "v_quant_type",
              "kv_cache_bit_width", "q_norm_epsilon", "k_norm_epsilon", "qk_norm_epsilon", "mask_filter_value")
    elem = ctx.input_elem({F32: "float", TensorProto.FLOAT16: "float16"})
    _refuse_unsupported(ctx)
    heads, kv = int(ctx.attr("num_heads")), int(ctx.attr("kv_num_heads"))
    e = ctx.emit
    q, k, v, head = _heads(ctx, heads, kv)
    query_len = dim(e, ctx.node.input[0], 1)
    past = _past_lengths(e, ctx.node.input[5], scalar(e, e.op("Reshape", [ctx.node.input[6], e.ints([1])])),
                         scalar(e, query_len))
    if ctx.attr("do_rotary", 0):
        if not (ctx.name(7) and ctx.name(8)):
            ctx.block("do_rotary=1 without cos_cache and sin_cache")
        half = ctx.input(7).dim(-1)
        if half is None:
            ctx.block("the cos_cache width is not static")
        zero, one = e.const(np.int64(0), hint="zero"), e.const(np.int64(1), hint="one")
        steps = e.op("Range", [zero, scalar(e, query_len), one])
        positions = e.op("Add", [e.unsqueeze(past, [1]), steps])
        cos, sin = cos_sin(e, ctx.node.input[7], ctx.node.input[8], positions)
        interleaved = bool(ctx.attr("rotary_interleaved", 0))
        q, k = (rotate(e, t, cos, sin, 2 * half, head, interleaved) for t in (q, k))
    for i, past_i, t in ((1, 3, k), (2, 4, v)):
        full = e.op("Concat", [ctx.node.input[past_i], t], axis=2) if ctx.name(past_i) else t
        if i == 1:
            k = full
        else:
            v = full
        if ctx.used(i):
            e.identity(full, ctx.node.output[i])
    allowed = _allowed(e, past, scalar(e, query_len), scalar(e, dim(e, k, 2)), int(ctx.attr("local_window_size", -1)))
    scale = ctx.attr("scale", 0.0) or float(np.float32(1) / np.sqrt(np.float32(head)))
    out = _attend(e, q, _repeat_kv(e, k, heads // kv, heads), _repeat_kv(e, v, heads // kv, heads),
                  allowed, float(np.float32(scale)), float(ctx.attr("softcap", 0.0)), elem)
    merge_heads(e, out, out=ctx.node.output[0])


def _attend(e, q, k, v, allowed, scale, softcap, elem):
    """In float32 (half inputs cast, the result rounded once)."""
    if elem != F32:
        q, k, v = (e.cast(t, F32) for t in (q, k, v))
        return e.cast(_attend(e, q, k, v, allowed, scale, softcap, F32), elem)
    dtype = np.float32
    if e.final_opset >= 23 and not softcap:
        mask = e.op("Where", [allowed, e.const(dtype(0), hint="zero"), e.const(dtype(-np.inf), hint="minus_inf")])
        return e.op("Attention", [q, k, v, mask], scale=scale)
    product = e.op("MatMul", [q, e.op("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = e.op("Mul", [product, e.const(dtype(scale), hint="scale")])
    if softcap:
        cap = e.const(dtype(softcap), hint="softcap")
        scores = e.op("Mul", [e.op("Tanh", [e.op("Div", [scores, cap])]), cap])
    scores = e.op("Where", [allowed, scores, e.const(dtype(-np.inf), hint="minus_inf")])
    return e.op("MatMul", [e.op("Softmax", [scores], axis=-1), v])


