"""``com.microsoft`` Attention and MultiHeadAttention as standard ONNX (ONNX Attention-23 from opset 23,
MatMul/Softmax below), as ONNX Runtime's CPU kernels compute them (``contrib_ops/cpu/bert/
attention.cc``, ``multihead_attention.cc``): Q, K, V projected (Attention: one weight, split by
``qkv_hidden_sizes``) plus bias, heads split, past keys and values prepended (the present outputs),
scores scale * Q K^T (scale default 1/sqrt(head size)) plus the kernel's additive mask
(``mask_filter_value`` at masked keys: 1D end / start positions, 2D and 3D raw masks,
``unidirectional``), plus attention_bias, softmax, times V, heads merged.

Named blockers: do_rotary, past_present_share_buffer / past_sequence_length, 4D masks, packed QKV or
KV inputs, key/value already in heads layout, cache_indirection, the qk output."""

from __future__ import annotations


import numpy as np
from onnx import TensorProto

from rewriter.convert.lowering.contrib_attention_core import (
    attend, causal_mask, dim, key_mask, merge_heads, scalar, split_heads)
from rewriter.convert.lowering.contrib_common import COM
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32
from rewriter.convert.lowering.registry import lowering

__all__ = ["attend_packed"]

F16 = TensorProto.FLOAT16
TYPES = {F32: "float", F16: "float16"}
NEAR = "within float32 rounding of ONNX Runtime's CPU kernel (its GEMM and softmax order sums differently)"



def _scale(ctx, head_size: int | None) -> float:
    scale = ctx.attr("scale", 0.0)
    if scale:
        return float(np.float32(scale))
    if head_size is None:
        ctx.block("the head size is not static: the default scale 1/sqrt(head size) is folded into the graph")
    return float(np.float32(1.0) / np.sqrt(np.float32(head_size)))


def _mask_and_bias(ctx, mask_i: int, bias_i: int | None, query: str, keys: str, causal: bool):
    """(masked by the mask input, masked as the future, attention_bias; each None when absent) for
    the queries of ``query`` [B, S, .] over the keys of ``keys`` [B, N, T, h]."""
    e = ctx.emit
    total = scalar(e, dim(e, keys, 2))
    masked = None
    mask = ctx.name(mask_i)
    if mask is not None:
        lengths, queries = ctx.input(mask_i).shape, ctx.input(0).shape
        ends_only = bool(lengths and queries and len(lengths) == 1 and lengths[0] is not None
                         and lengths[0] == queries[0])  # the same symbol or number: [B], not [2B]
        masked = key_mask(ctx, mask, ctx.input(mask_i).rank, total, dim(e, query, 0), ends_only)
    tri = causal_mask(e, scalar(e, dim(e, query, 1)), total) if causal else None
    return masked, tri, None if bias_i is None else ctx.name(bias_i)


def _with_past(ctx, k: str, v: str, past_k: str | None, past_v: str | None):
    e = ctx.emit
    if past_k is not None:
        k = e.op("Concat", [past_k, k], axis=2)
    if past_v is not None:
        v = e.op("Concat", [past_v, v], axis=2)
    return k, v


@output_types("Attention")
def _attention_types(node, types):
    elem, dims = dims_of(types[node.input[0]])
    sizes = next((list(a.ints) for a in node.attribute if a.name == "qkv_hidden_sizes"), None)
    _, w = dims_of(types[node.input[1]])
    dv = sizes[2] if sizes else (w[1] // 3 if w and isinstance(w[1], int) else None)
    return [tensor_type(elem, None if dims is None else dims[:2] + [dv]), None]


@lowering("Attention", COM, exactness=NEAR)
def attention(ctx) -> None:
    ctx.known("num_heads", "qkv_hidden_sizes", "unidirectional", "scale", "mask_filter_value", "do_rotary",
              "rotary_embedding_dim", "past_present_share_buffer")
    elem = ctx.input_elem(TYPES)
    if ctx.attr("do_rotary", 0):
        ctx.block("do_rotary=1 (rotary embedding inside Attention) is not lowered: a named blocker")
    if ctx.attr("past_present_share_buffer", 0) or ctx.name(6):
        ctx.block("past_present_share_buffer / past_sequence_length (a shared KV buffer) is not lowered")
    heads = int(ctx.attr("num_heads"))
    width = ctx.input(1).dim(-1)
    sizes = list(ctx.attr("qkv_hidden_sizes", [])) or ([width // 3] * 3 if width else None)
    if not sizes:
        ctx.block("the width of weights is not static and qkv_hidden_sizes is not given")
    e, x = ctx.emit, ctx.node.input[0]
    qkv = e.op("MatMul", [x, ctx.node.input[1]])
    if ctx.name(2):
        qkv = e.op("Add", [qkv, ctx.node.input[2]])
    attend_packed(ctx, x, qkv, sizes, heads, elem, mask_i=3, past_i=4, bias_i=5)


def attend_packed(ctx, x: str, qkv: str, sizes: list, heads: int, elem: int, *, mask_i: int, past_i: int,
                  bias_i: int | None) -> None:
    """Attention (and QAttention) after the projection: ``qkv`` [B, S, q + k + v] split by ``sizes``,
    heads split, the past [2, B, N, P, h] of input ``past_i`` prepended (present: output 1), the mask
    of input ``mask_i``, attention_bias of input ``bias_i``; output 0 written."""
    e = ctx.emit
    q, k, v = (split_heads(e, t, heads) for t in e.op("Split", [qkv, e.ints(sizes)], n_out=3, axis=-1))
    past = ctx.name(past_i)
    if past is not None:  # [2, B, N, P, h]
        pk, pv = (e.op("Gather", [past, e.const(np.int64(i), hint="index")], axis=0) for i in (0, 1))
        k, v = _with_past(ctx, k, v, pk, pv)
    if ctx.used(1):
        e.op("Concat", [e.unsqueeze(k, [0]), e.unsqueeze(v, [0])], out=ctx.node.output[1], axis=0)
    masked, causal, bias = _mask_and_bias(ctx, mask_i, bias_i, x, k, bool(ctx.attr("unidirectional", 0)))
    out = attend(e, q, k, v, scale=_scale(ctx, sizes[0] // heads), masked=masked, causal=causal,
                 filter_value=ctx.attr("mask_filter_value", -10000.0), bias=bias, elem=elem)
    merge_heads(e, out, out=ctx.node.output[0])


@output_types("MultiHeadAttention")
def _mha_types(node, types):
    elem, dims = dims_of(types[node.input[0]])
    value = node.input[2] if len(node.input) > 2 and node.input[2] else None
    dv = dims_of(types[value])[1][-1] if value else None
    return [tensor_type(elem, None if dims is None or len(dims) != 3 else dims[:2] + [dv])]


@lowering("MultiHeadAttention", COM, exactness=NEAR)
def multi_head_attention(ctx) -> None:
    ctx.known("num_heads", "unidirectional", "scale", "mask_filter_value")
    elem = ctx.input_elem(TYPES)
    ranks = [ctx.input(i).rank for i in (0, 1, 2)]
    if ranks != [3, 3, 3]:
        ctx.block(f"query/key/value of ranks {ranks}: only separate 3D [B, S, D] inputs are lowered (packed QKV, "
                  "packed KV and key/value in heads layout are named blockers)")
    for i, what in ((8, "past_sequence_length"), (9, "cache_indirection")):
        if ctx.name(i):
            ctx.block(f"input {what} is not lowered")
    if ctx.used(3):
        ctx.block("output qk is read: not lowered")
    heads = int(ctx.attr("num_heads"))
    widths = [ctx.input(i).dim(-1) for i in (0, 1, 2)]
    e = ctx.emit
    q, k, v = ctx.node.input[0], ctx.node.input[1], ctx.node.input[2]
    if ctx.name(3):
        if not all(isinstance(w, int) for w in widths):
            ctx.block("the widths of query/key/value are not static: the bias is split by them")
        bq, bk, bv = e.op("Split", [ctx.node.input[3], e.ints(widths)], n_out=3, axis=0)
        q, k, v = e.op("Add", [q, bq]), e.op("Add", [k, bk]), e.op("Add", [v, bv])
    q, k, v = (split_heads(e, t, heads) for t in (q, k, v))
    k, v = _with_past(ctx, k, v, ctx.name(6), ctx.name(7))
    for i, t in ((1, k), (2, v)):
        if ctx.used(i):
            e.identity(t, ctx.node.output[i])
    masked, causal, bias = _mask_and_bias(ctx, 4, 5, ctx.node.input[0], k, bool(ctx.attr("unidirectional", 0)))
    head_size = widths[0] // heads if isinstance(widths[0], int) else None
    out = attend(e, q, k, v, scale=_scale(ctx, head_size), masked=masked, causal=causal,
                 filter_value=ctx.attr("mask_filter_value", -10000.0), bias=bias, elem=elem)
    merge_heads(e, out, out=ctx.node.output[0])


