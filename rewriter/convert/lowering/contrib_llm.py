"""``com.microsoft`` ops of LLM exports (onnxruntime-genai's model builder) as standard ONNX:

- MatMulNBits (``contrib_ops/cpu/quantization/matmul_nbits.cc``): B's k-blocks of 4- or 8-bit codes
  (low bits first), dequantized as (q - zero point) * scale with the default zero point 2^(bits-1).
  When the final opset is 21 or newer the codes stay codes: a uint4/uint8 initializer [K, N] and
  DequantizeLinear-21 with ``block_size`` along K, then MatMul; below 21 the weight is stored as
  float [K, N] (8x the 4-bit bytes, 4x the 8-bit ones) and multiplied. As ONNX Runtime computes it
  at accuracy_level 0 (float), within float32 rounding. At accuracy_level 4 ONNX Runtime quantizes A
  to int8 per block of K (MLAS ``QuantizeARow_CompInt8``) before the product; the lowering writes the
  same codes in front of the MatMul (``int8_activations``), so any runtime computes what ONNX Runtime
  does at that level instead of 5e-3 (relative L2) from it.
- GatherBlockQuantized (``quantization/gather_block_quantized.cc``; 2D tables, uint8-packed 2/4/8-bit
  or int4/uint4 codes, quantized along the last axis): the rows' codes (one byte each), zero points
  (default 2^(bits-1) for packed uint8, 0 for int4/uint4) and scales gathered, then float32(code -
  zero point) * scale as the kernel writes it (bit for bit), cast to the scales' type.
- RotaryEmbedding (``bert/rotary_embedding.cc``): RotaryEmbedding-23 when the final opset has it,
  else cos/sin gathered at the positions (a [1] position_ids is an offset) and the halves (or the
  even/odd elements, ``interleaved``) rotated, the part beyond ``rotary_embedding_dim`` kept.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from rewriter.convert.lowering.contrib_attention_core import dim
from rewriter.convert.lowering.contrib_common import COM, INT32, const_input
from rewriter.convert.lowering.contrib_norm import FLOATS
from rewriter.convert.lowering.contrib_types import dims_of, output_types, tensor_type
from rewriter.convert.lowering.emit import F32
from rewriter.convert.lowering.exact_divide import divide_rounded
from rewriter.convert.lowering.registry import lowering
from rewriter.graph.attributes import attribute_int

__all__ = ["unpack_codes", "rotate", "cos_sin"]

NEAR = "within float32 rounding of ONNX Runtime's kernel"
NBITS = ("float weights: within float32 rounding of ONNX Runtime (at accuracy_level 4 A quantized to int8 per block "
         "first, as its kernel does from release 1.19 on x86-64: 4 bits from 1.19, 8 bits from 1.22, 2 bits from 1.32)")


def unpack_codes(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` codes of each row of ``packed`` (uint8 [rows, bytes]), low bits first."""
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    codes = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return codes.reshape(packed.shape[0], -1)[:, :count]


def _nbits_weights(ctx):
    """(codes [N, K], scales [N, blocks] float, zero points [N, blocks] codes or None, K, N, bits, block)."""
    k, n = int(ctx.attr("K")), int(ctx.attr("N"))
    bits, block = int(ctx.attr("bits", 4)), int(ctx.attr("block_size"))
    if bits not in (2, 4, 8):
        ctx.block(f"bits={bits}: MatMulNBits takes 2, 4 or 8")
    blocks = -(-k // block)
    packed = const_input(ctx, 1, "B")
    if packed.dtype != np.uint8:
        ctx.block(f"B of type {packed.dtype}: the packed uint8 layout is lowered")
    codes = unpack_codes(packed.reshape(n, -1), bits, k)
    scales = const_input(ctx, 2, "scales").reshape(n, blocks)
    zp = const_input(ctx, 3, "zero_points", optional=True)
    if zp is not None:
        if zp.dtype != np.uint8:
            ctx.block(f"zero points of type {zp.dtype} (float zero points are not lowered)")
        zp = unpack_codes(zp.reshape(n, -1), bits, blocks)
    return codes, scales, zp, k, n, bits, block


@output_types("MatMulNBits")
def _nbits_types(node, types):
    elem, dims = dims_of(types[node.input[0]])
    n = next(a.i for a in node.attribute if a.name == "N")
    return [tensor_type(elem, None if dims is None else dims[:-1] + [n])]


@lowering("MatMulNBits", COM, exactness=NBITS)
def matmul_nbits(ctx) -> None:
    ctx.known("K", "N", "bits", "block_size", "accuracy_level", "weight_prepacked")
    if ctx.attr("weight_prepacked", 0):
        ctx.block("weight_prepacked=1: B is in a backend's own layout")
    if len(ctx.node.input) > 4 and ctx.node.input[4]:
        ctx.block("g_idx (act-order groups) is not lowered")
    elem = ctx.input_elem(FLOATS)
    codes, scales, zp, k, n, bits, block = _nbits_weights(ctx)
    e, a = ctx.emit, ctx.node.input[0]
    level4 = ctx.attr("accuracy_level", 0) == 4
    if level4:  # (float32 throughout, as the kernel widens a float16 A and adds the bias before narrowing)
        a, scales = int8_activations(ctx, a, k, block, elem), scales.astype(np.float32)
    zero = np.full(scales.shape, 1 << (bits - 1), np.uint8) if zp is None else zp
    if e.final_opset >= 21 and bits in (4, 8):
        ctx.exactness = NBITS.replace("float weights", "DequantizeLinear-21 blocks")
        dtype = ml_dtypes.uint4 if bits == 4 else np.uint8
        w = e.op("DequantizeLinear", [e.const(codes.T.astype(dtype), hint="codes"),
                                      e.const(np.ascontiguousarray(scales.T), hint="scales"),
                                      e.const(zero.T.astype(dtype), hint="zero_points")], axis=0, block_size=block)
    else:
        steps = np.repeat(np.arange(scales.shape[1]), block)[:k]
        diff = (codes.astype(np.int32) - zero[:, steps].astype(np.int32)).astype(np.float32)
        w = e.const((diff * scales[:, steps].astype(np.float32)).astype(scales.dtype).T.copy(), hint="weight")
    y = ctx.node.output[0]
    narrow = level4 and elem != F32
    product = e.op("MatMul", [a, w], out=None if narrow or _has_bias(ctx) else y)
    if _has_bias(ctx):
        bias = e.cast(ctx.node.input[5], F32) if narrow else ctx.node.input[5]
        product = e.op("Add", [product, bias], out=None if narrow else y)
    if narrow:
        e.cast(product, elem, out=y)


def _has_bias(ctx) -> bool:
    return len(ctx.node.input) > 5 and bool(ctx.node.input[5])


def int8_activations(ctx, a: str, k: int, block: int, elem: int) -> str:
    """``a`` (float32, or float16 widened) as ONNX Runtime's accuracy_level 4 kernel reads it: per block
    of ``block`` along K (a partial last block as if padded with zeros), the codes round(a * (127 /
    max|a|)) (half to even; 0 in an all-zero block) times max|a| / 127, each a float32 operation as
    MLAS writes it (the two divisions correctly rounded: ``exact_divide``), so the MatMul after it sums
    the kernel's int8 products within float32 rounding.
    The blocks' maxima are a GlobalMaxPool over [rows, blocks, 1, block] (one version from opset 1 to
    21, which every measured release runs; ReduceMax-20 is unmeasured or measured wrongly on its
    empty set there; 4D, where onnx.reference's GlobalMaxPool reduces the right axes), so A has rank
    1, 2 or 3 (LLM exports: [batch, sequence, K])."""
    e, rank = ctx.emit, ctx.input(0).rank
    if rank not in (1, 2, 3):
        ctx.block(f"accuracy_level 4: A of rank {rank} (its int8 blocks are written for rank 1 to 3)")
    if e.final_opset < 11:
        ctx.block(f"accuracy_level 4: the int8 blocks need Round (opset 11), the final opset is {e.final_opset}")
    blocks = -(-k // block)
    x = a if elem == F32 else e.cast(a, F32)
    if blocks * block != k:
        x = e.op("Pad", [x, e.ints([0] * (2 * rank - 1) + [blocks * block - k])])
    x = e.op("Reshape", [x, e.ints([1 if rank == 1 else 0, -1, 1, block])])
    most = e.op("GlobalMaxPool", [e.op("Abs", [x])])
    top, zero = e.const(np.float32(127), hint="int8_max"), e.const(np.float32(0), hint="zero")
    # (both quotients correctly rounded where a runtime divides by a reciprocal; a zero block divides
    # a harmless 127 / FLT_MIN, not 127 / 0, and takes 0)
    positive = e.op("Max", [most, e.const(np.float32(np.finfo(np.float32).tiny), hint="tiny")])
    inverse = e.op("Where", [e.op("Equal", [most, zero]), zero, divide_rounded(e, top, positive)])
    codes = e.op("Round", [e.op("Mul", [x, inverse])])
    back = {1: [blocks * block], 2: [0, blocks * block], 3: [0, -1, blocks * block]}[rank]
    x = e.op("Reshape", [e.op("Mul", [codes, divide_rounded(e, most, top)]), e.ints(back)])
    return x if blocks * block == k else e.op("Slice", [x, e.ints([0]), e.ints([k]), e.ints([-1])])


def cos_sin(e, cos_cache: str, sin_cache: str, positions: str) -> tuple[str, str]:
    """cos and sin [B, 1, S, r/2] at int64 ``positions`` [B, S]."""
    return tuple(e.unsqueeze(e.op("Gather", [c, positions], axis=0), [1]) for c in (cos_cache, sin_cache))


def rotate(e, x: str, cos: str, sin: str, rot_dim: int, head_size: int, interleaved: bool) -> str:
    """Rotary embedding of ``x`` [B, N, S, h] (its first ``rot_dim`` features; cos, sin [B, 1, S, r/2])."""
    whole = rot_dim == head_size
    part = x if whole else e.op("Slice", [x, e.ints([0]), e.ints([rot_dim]), e.ints([-1])])
    half = rot_dim // 2
    if interleaved:
        first = e.op("Slice", [part, e.ints([0]), e.ints([rot_dim]), e.ints([-1]), e.ints([2])])
        second = e.op("Slice", [part, e.ints([1]), e.ints([rot_dim]), e.ints([-1]), e.ints([2])])
    else:
        first, second = e.op("Split", [part, e.ints([half, half])], n_out=2, axis=-1)
    y1 = e.op("Sub", [e.op("Mul", [first, cos]), e.op("Mul", [second, sin])])
    y2 = e.op("Add", [e.op("Mul", [second, cos]), e.op("Mul", [first, sin])])
    if interleaved:
        pairs = e.op("Concat", [e.unsqueeze(y1, [-1]), e.unsqueeze(y2, [-1])], axis=-1)
        lead = e.op("Slice", [e.op("Shape", [x]), e.ints([0]), e.ints([3])])
        rotated = e.op("Reshape", [pairs, e.op("Concat", [lead, e.ints([rot_dim])], axis=0)])
    else:
        rotated = e.op("Concat", [y1, y2], axis=-1)
    if whole:
        return rotated
    rest = e.op("Slice", [x, e.ints([rot_dim]), e.ints([head_size]), e.ints([-1])])
    return e.op("Concat", [rotated, rest], axis=-1)


@output_types("RotaryEmbedding")
def _rotary_types(node, types):
    return [types[node.input[0]]]


def _positions(ctx, x: str, seq_axis: int) -> str:
    """position_ids [B, S] as given, or offset + 0..S-1 for a [1] offset."""
    e, pos = ctx.emit, ctx.node.input[1]
    shape = ctx.input(1).shape
    if shape is not None and len(shape) == 2:
        return pos
    if shape is None or len(shape) != 1:
        ctx.block(f"position_ids of shape {shape}: [B, S] ids or a [1] offset are lowered")
    steps = e.op("Range", [e.const(np.int64(0), hint="zero"), e.op("Squeeze", [dim(e, x, seq_axis), e.ints([0])]),
                           e.const(np.int64(1), hint="one")])
    rows = e.unsqueeze(e.op("Add", [steps, pos]), [0])  # [1, S]: one row per batch entry
    return e.op("Expand", [rows, e.op("Concat", [dim(e, x, 0), dim(e, x, seq_axis)], axis=0)])


@lowering("RotaryEmbedding", COM, exactness=NEAR)
def rotary_embedding(ctx) -> None:
    ctx.known("interleaved", "num_heads", "rotary_embedding_dim", "scale", "is_packed_batching")
    ctx.input_elem(FLOATS)
    if ctx.attr("is_packed_batching", 0):
        ctx.block("is_packed_batching=1 is not lowered")
    rank, half = ctx.input(0).rank, ctx.input(2).dim(-1)
    if rank not in (3, 4) or half is None:
        ctx.block(f"input rank {rank} / cos_cache width {half}: a 3D or 4D input and a static cache width are needed")
    rot = int(ctx.attr("rotary_embedding_dim", 0)) or 2 * half
    heads, width = int(ctx.attr("num_heads", 0)), ctx.input(0).dim(-1)
    if rank == 4:
        head = width
    else:  # num_heads 0: the heads are as wide as the rotation
        head = width // heads if heads and width else rot
        heads = heads or (width // head if width else 0)
    if head is None:
        ctx.block("the head size is not static")
    e, x, y = ctx.emit, ctx.node.input[0], ctx.node.output[0]
    interleaved = bool(ctx.attr("interleaved", 0))
    if e.final_opset >= 23 and (rank == 4 or heads):
        pos = _positions(ctx, x, 1 if rank == 3 else 2)
        e.op("RotaryEmbedding", [x, ctx.node.input[2], ctx.node.input[3], pos], out=y, interleaved=int(interleaved),
             rotary_embedding_dim=rot, **({"num_heads": heads} if rank == 3 else {}))
        return
    elem = ctx.input(0).elem
    x4 = x if rank == 4 else e.op("Transpose", [e.op("Reshape", [x, e.ints([0, 0, -1, head])])], perm=[0, 2, 1, 3])
    caches = ctx.node.input[2:4] if elem == F32 else [e.cast(c, F32) for c in ctx.node.input[2:4]]
    cos, sin = cos_sin(e, *caches, _positions(ctx, x4, 2))
    out = rotate(e, x4 if elem == F32 else e.cast(x4, F32), cos, sin, rot, head, interleaved)
    out = out if elem == F32 else e.cast(out, elem)  # half inputs rotated in float32, rounded once
    if rank == 4:
        e.identity(out, y)
    else:
        e.op("Reshape", [e.op("Transpose", [out], perm=[0, 2, 1, 3]), e.ints([0, 0, -1])], out=y)



@output_types("GatherBlockQuantized")
def _gbq_types(node, types):
    _, data = dims_of(types[node.input[0]])
    _, idx = dims_of(types[node.input[1]])
    elem = dims_of(types[node.input[2]])[0]
    bits = attribute_int(node, "bits", 4)
    if data is None or idx is None or len(data) != 2:
        return [tensor_type(elem, None)]
    cols = data[1] * (8 // bits) if isinstance(data[1], int) and types[node.input[0]].tensor_type.elem_type == 2 \
        else data[1]
    return [tensor_type(elem, list(idx) + [cols])]


def _gbq_tables(ctx, bits: int, block: int):
    """(codes [rows, cols] uint8 or int8, zero points [rows, blocks] likewise, scales [rows, blocks])."""
    data = const_input(ctx, 0, "data")
    scales = const_input(ctx, 2, "scales")
    zp = const_input(ctx, 3, "zero_points", optional=True)
    if data.ndim != 2 or scales.ndim != 2:
        ctx.block(f"data of rank {data.ndim}: 2D tables (embeddings) are lowered")
    rows, blocks = scales.shape
    if data.dtype == np.uint8:
        codes = unpack_codes(data, bits, data.shape[1] * (8 // bits))
        zero = (np.full((rows, blocks), 1 << (bits - 1), np.uint8) if zp is None else
                unpack_codes(zp.reshape(rows, -1), bits, blocks))
    else:  # int4 / uint4 tensors: one byte per code (2x the packed size)
        small = np.int8 if data.dtype == ml_dtypes.int4 else np.uint8
        codes = data.astype(small)
        zero = np.zeros((rows, blocks), small) if zp is None else zp.astype(small).reshape(rows, blocks)
    if codes.shape[1] != blocks * block:
        ctx.block(f"{codes.shape[1]} columns in blocks of {block}: a partial last block is not lowered")
    return codes, zero, scales


@lowering("GatherBlockQuantized", COM, exactness="exact: (code - zero point) * scale in float32, as the kernel")
def gather_block_quantized(ctx) -> None:
    ctx.known("bits", "block_size", "gather_axis", "quantize_axis")
    bits, block = int(ctx.attr("bits", 4)), int(ctx.attr("block_size", 128))
    if ctx.attr("gather_axis", 0) != 0 or ctx.attr("quantize_axis", 1) not in (1, -1):
        ctx.block("gather_axis 0 and quantize_axis the last one are lowered")
    codes, zero, scales = _gbq_tables(ctx, bits, block)
    rows, blocks = scales.shape
    e, idx = ctx.emit, ctx.node.input[1]
    lead = e.op("Shape", [idx])
    picked = e.cast(e.op("Gather", [e.const(codes.reshape(rows, blocks, block), hint="codes"), idx], axis=0), INT32)
    grouped = e.op("Reshape", [picked, e.op("Concat", [lead, e.ints([blocks, block])], axis=0)])
    zp = e.cast(e.op("Gather", [e.const(zero.reshape(rows, blocks, 1), hint="zero_points"), idx], axis=0), INT32)
    scale = e.op("Gather", [e.const(scales.astype(np.float32).reshape(rows, blocks, 1), hint="scales"), idx], axis=0)
    values = e.op("Mul", [e.cast(e.op("Sub", [grouped, zp]), F32), scale])
    flat = e.op("Reshape", [values, e.op("Concat", [lead, e.ints([blocks * block])], axis=0)])
    if scales.dtype == np.float32:
        e.identity(flat, ctx.node.output[0])
    else:
        e.cast(flat, FLOATS_BY_DTYPE[scales.dtype], out=ctx.node.output[0])


FLOATS_BY_DTYPE = {np.dtype(np.float16): 10, np.dtype(ml_dtypes.bfloat16): 16}  # FLOAT16, BFLOAT16
