"""Gemm across 7 (``broadcast`` dropped: C broadcasts numpy-style to (M, N)) and 11 (C optional).

- up 6 -> 7: broadcast=0 (C already (M, N)) or 1 (C a suffix run of (M, N) or one element):
  numpy broadcasting does the same, the attribute goes.
- down 7 -> 6: C of the output's shape -> nothing; C that the old rule can express -> broadcast=1
  (C reshaped to its run when it had extra 1s); otherwise refused.
- up 9 -> 11: nothing.
- down 11 -> 9: an absent C becomes a constant signed zero of A's type, of shape [1], that
  changes no result: ``-0.0`` (``x + -0.0 == x`` for every x, also -0.0), ``+0.0`` when beta < 0.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.elementwise import dims, old_broadcast
from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, check_types, record_type
from rewriter.graph.attributes import remove_attribute, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("Gemm", 6, 7, kind="meaning change")
def gemm_6_7(node, ctx) -> None:
    attr_value(node, ctx, "broadcast", 0)
    remove_attribute(node, "broadcast")


@register("Gemm", 7, 6, kind="meaning change")
def gemm_7_6(node, ctx) -> None:
    check_types(node, ctx)
    c = node.input[2]
    out = dims(ctx, node.output[0])
    how = old_broadcast(out, dims(ctx, c), out)
    if isinstance(how, str):
        ctx.block(f"C broadcasts numpy-style only from opset 7, and {how}")
    if how is None:
        return
    axis, shape = how
    if axis is not None and shape is not None and axis + len(shape) != len(out):
        ctx.block(f"C of shape {dims(ctx, c)} does not align with the end of the output {out}, as "
                  f"Gemm's broadcast=1 requires")
    if shape is not None:
        shape_name = add_typed_constant(ctx, "gemm_c_shape", np.array(shape, dtype=np.int64))
        r = ctx.insert_before("Reshape", [c, shape_name])
        record_type(ctx, r.output[0], ctx.elem_type(c), shape)
        node.input[2] = r.output[0]
    set_attribute(node, "broadcast", 1)
    ctx.record("Gemm numpy broadcasting of C -> broadcast=1")


@register("Gemm", 9, 11, kind="new feature")
def gemm_9_11(node, ctx) -> None:
    """Gemm-11 with C is Gemm-9."""


@register("Gemm", 11, 9, kind="new feature")
def gemm_11_9(node, ctx) -> None:
    if len(node.input) > 2 and node.input[2]:
        check_types(node, ctx)
        return
    elem = ctx.elem_type(node.input[0])
    if not elem:
        ctx.block("C is absent and A's type is unknown, so the zero C that Gemm needs below opset 11 "
                  "cannot be made")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    beta = attr_value(node, ctx, "beta", 1.0)
    zero = np.array([-0.0 if beta >= 0 else 0.0]).astype(dtype) if dtype.kind == "f" else np.zeros([1], dtype)
    del node.input[2:]
    node.input.append(add_typed_constant(ctx, "gemm_zero_c", zero))
    check_types(node, ctx)
    ctx.record("Gemm absent C -> zero constant")
