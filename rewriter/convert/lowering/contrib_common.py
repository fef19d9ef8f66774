"""What the ``com.microsoft`` lowerings share: constant scales and zero points read from the node's
inputs, the integer types of ONNX Runtime's quantized kernels, the saturating conversion its x86-64
kernels end with (``cvtps2dq`` then packing: round half to even, saturate, and the "integer
indefinite" of a value beyond int32 or NaN that packs to the type's minimum), and the float32
fused multiply-add of its AVX2 kernels written as double arithmetic."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rewriter.convert.lowering.context import type_name
from rewriter.convert.lowering.emit import F32, F64

__all__ = ["COM", "QTYPES", "INT32", "qtype", "scale_input", "zero_point_input", "const_input", "saturate",
           "fma_f32", "fma32", "quantize_values"]

COM = "com.microsoft"
INT32 = TensorProto.INT32
QTYPES = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.UINT16: np.uint16,
          TensorProto.INT16: np.int16}
_BY_DTYPE = {np.dtype(v): k for k, v in QTYPES.items()}
TWO_31 = np.float32(2.0 ** 31)


def const_input(ctx, i: int, what: str, *, optional: bool = False):
    """Input ``i``'s constant value; None when absent and ``optional``; else refused."""
    if i >= len(ctx.node.input) or not ctx.node.input[i]:
        if optional:
            return None
        ctx.block(f"{what} (input {i}) is missing")
    value = ctx.constant(i)
    if value is None:
        ctx.block(f"{what} ({ctx.node.input[i]!r}) is not a constant in scope: the lowering folds it into "
                  "the arithmetic as ONNX Runtime's kernel does when it prepares the node")
    return value


def scale_input(ctx, i: int, what: str = "scale") -> np.float32:
    """A one-element float32 scale, finite and non-zero (otherwise refused: the kernels' NaN paths differ)."""
    v = const_input(ctx, i, what)
    if v.dtype != np.float32 or v.size != 1:
        ctx.block(f"{what} must be one float32 value (got {v.dtype} of shape {v.shape})")
    s = np.float32(v.reshape(-1)[0])
    if not np.isfinite(s) or s == 0:
        ctx.block(f"{what} is {s}: only finite non-zero scales are lowered")
    return s


def zero_point_input(ctx, i: int, elem: int, what: str = "zero point") -> int:
    """A one-element zero point of the integer type ``elem`` (absent: 0)."""
    v = const_input(ctx, i, what, optional=True)
    if v is None:
        return 0
    if v.size != 1 or _BY_DTYPE.get(v.dtype) != elem:
        ctx.block(f"{what} must be one {type_name(elem)} value (got {v.dtype} of shape {v.shape})")
    return int(v.reshape(-1)[0])


def qtype(ctx, allowed, zero_point: int | None = None, i: int = 0) -> int:
    """The quantized element type: input ``i``'s when inferred, else the zero point's; refused
    outside ``allowed`` (the types ONNX Runtime registers the kernel for)."""
    elem = ctx.input(i).elem
    if elem is None and zero_point is not None and zero_point < len(ctx.node.input) and ctx.node.input[zero_point]:
        v = ctx.constant(zero_point)
        elem = None if v is None else _BY_DTYPE.get(v.dtype)
    if elem is None:
        ctx.block(f"the element type of {ctx.node.input[i]!r} is unknown")
    if elem not in allowed:
        ctx.block(f"{type_name(elem)} input: ONNX Runtime's kernel takes {', '.join(type_name(t) for t in allowed)}")
    return elem


def saturate(e, u: str, elem: int, out: str, *, bound: float = np.inf) -> str:
    """``u`` (float32) to ``elem`` as x86-64's conversion and packing do: round half to even, clamp;
    NaN and |u| >= 2^31 give the type's minimum (skipped when |u| < ``bound`` <= 2^31 is known)."""
    info = np.iinfo(QTYPES[elem])
    lo, hi = e.const(np.float32(info.min), hint="qmin"), e.const(np.float32(info.max), hint="qmax")
    y = e.op("Clip", [e.op("Round", [u]), lo, hi])
    if bound >= float(TWO_31):
        inside = e.op("Less", [e.op("Abs", [u]), e.const(TWO_31, hint="two31")])
        y = e.op("Where", [inside, y, lo])
    return e.cast(y, elem, out=out)


def fma_f32(e, x64: str, r: np.float32, c64: str) -> str:
    """float32(x * r + c) rounded once, as ``vfmadd`` does: ``x`` an integer-valued double tensor
    (|x| < 2^16, so x * r is exact in double) and ``c`` a double holding a float32; the double sum
    is exact unless the terms are over 2^29 apart (then one more rounding, see docs/lowering.md)."""
    prod = e.op("Mul", [x64, e.const(np.float64(r), hint="ratio")])
    return e.cast(e.op("Add", [prod, c64]), F32)


def fma32(a, b, c) -> np.ndarray:
    """Correctly rounded float32 a * b + c (numpy), for constants computed as the kernels do."""
    a, b, c = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    p = a * b  # exact: 24 + 24 bits
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)  # p + c == s + err exactly
    r = s.astype(np.float32)
    d = s - r.astype(np.float64)
    up, dn = np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(-np.inf))
    r = np.where((d == (up.astype(np.float64) - r) / 2) & (err > 0), up, r)  # s was a tie: err decides
    r = np.where((d == (dn.astype(np.float64) - r) / 2) & (err < 0), dn, r)
    return np.asarray(r, np.float32)


def quantize_values(values: np.ndarray, scale: np.float32, zero_point: int, elem: int) -> np.ndarray:
    """``MlasQuantizeLinear``: round half to even of value / scale in float32, plus the zero point,
    saturated."""
    info = np.iinfo(QTYPES[elem])
    with np.errstate(all="ignore"):
        q = np.round(np.asarray(values, np.float32) / np.float32(scale)).astype(np.float64) + zero_point
    return np.clip(np.nan_to_num(q, nan=info.min), info.min, info.max).astype(QTYPES[elem])


