"""DepthToSpace across 11 and SpaceToDepth across 28 (``mode`` added, default "DCR"), GridSample
across 20 (modes renamed: bilinear -> linear, bicubic -> cubic; N-D inputs).

- DepthToSpace 11 -> 1: DCR (the old behaviour) dropped; CRD rewritten exactly as
  Reshape [b, c/bs^2, bs, bs, h, w] -> Transpose [0, 1, 4, 2, 5, 3] -> Reshape [b, c/bs^2, h*bs, w*bs]
  (static c, h, w; the batch dim is copied with 0).
- SpaceToDepth 28 -> 13: DCR dropped; CRD rewritten exactly as Reshape [b, c, h/bs, bs, w/bs, bs]
  -> Transpose [0, 1, 3, 5, 2, 4] -> Reshape [b, c*bs*bs, h/bs, w/bs] (static C, H, W).
- GridSample 16 <-> 20: the mode names are mapped; below 20 the input must be 4-D.
"""

from __future__ import annotations

import numpy as np

from rewriter.convert.adapters.feature_support import add_typed_constant, attr_value, check_types, record_type
from rewriter.graph.attributes import remove_attribute, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


def _nothing(node, ctx) -> None:
    """The newer version without the new attribute is the older one."""



def _crd_input(node, ctx, since: int):
    """Drop ``mode``; for mode CRD, (blocksize, the input's static 4-D shape), else None (DCR is the
    older schema's only mode); blocks for CRD on an input whose C, H and W are not static."""
    check_types(node, ctx)
    mode = attr_value(node, ctx, "mode", "DCR")
    remove_attribute(node, "mode")
    if mode == "DCR":
        return None
    bs = attr_value(node, ctx, "blocksize")
    shape = ctx.shape(node.input[0])
    if shape is None or len(shape) != 4 or None in shape[1:]:
        ctx.block(f"mode={mode!r} exists only from opset {since}; it can be rewritten with Reshape/Transpose only "
                  f"for a 4-D input of static channels, height and width, and the input's shape is {shape}")
    return bs, shape


def _into_transpose(node, ctx, reshaped: str, perm: list[int]) -> tuple[str, str]:
    """The node made a Transpose of ``reshaped``; (its original output name, the name its output
    is moved to, for the Reshape after it)."""
    node.op_type = "Transpose"
    del node.attribute[:]
    node.input[0] = reshaped
    set_attribute(node, "perm", perm)
    original = node.output[0]
    return original, ctx.redirect_output(0)

@register("DepthToSpace", 11, 1, kind="new feature")
def depth_to_space_11_1(node, ctx) -> None:
    crd = _crd_input(node, ctx, 11)
    if crd is None:
        return
    bs, (b, c, h, w) = crd
    elem = ctx.elem_type(node.input[0])
    first = ctx.insert_before("Reshape", [node.input[0]], shape=[0, c // (bs * bs), bs, bs, h, w])
    record_type(ctx, first.output[0], elem, [b, c // (bs * bs), bs, bs, h, w])
    original, moved = _into_transpose(node, ctx, first.output[0], [0, 1, 4, 2, 5, 3])
    record_type(ctx, moved, elem, [b, c // (bs * bs), h, bs, w, bs])
    ctx.insert_after("Reshape", [moved], [original], shape=[0, c // (bs * bs), h * bs, w * bs])
    ctx.record("DepthToSpace CRD -> Reshape/Transpose/Reshape")


@register("SpaceToDepth", 28, 13, kind="new feature")
def space_to_depth_28_13(node, ctx) -> None:
    """DCR dropped; CRD rewritten exactly: Reshape [b, c, h/bs, bs, w/bs, bs] -> Transpose
    [0, 1, 3, 5, 2, 4] -> Reshape [b, c*bs*bs, h/bs, w/bs] (static C, H, W)."""
    crd = _crd_input(node, ctx, 28)
    if crd is None:
        return
    bs, (b, c, h, w) = crd
    elem = ctx.elem_type(node.input[0])
    first_shape = add_typed_constant(ctx, "s2d_split", np.array([0, c, h // bs, bs, w // bs, bs], dtype=np.int64))
    first = ctx.insert_before("Reshape", [node.input[0], first_shape])
    record_type(ctx, first.output[0], elem, [b, c, h // bs, bs, w // bs, bs])
    original, moved = _into_transpose(node, ctx, first.output[0], [0, 1, 3, 5, 2, 4])
    record_type(ctx, moved, elem, [b, c, bs, bs, h // bs, w // bs])
    last_shape = add_typed_constant(ctx, "s2d_merge", np.array([0, c * bs * bs, h // bs, w // bs], dtype=np.int64))
    ctx.insert_after("Reshape", [moved, last_shape], [original])
    ctx.record("SpaceToDepth CRD -> Reshape/Transpose/Reshape")


register(("DepthToSpace", 1, 11), ("SpaceToDepth", 13, 28), kind="new feature")(_nothing)

_NEW_NAMES = {"bilinear": "linear", "bicubic": "cubic"}
_OLD_NAMES = {v: k for k, v in _NEW_NAMES.items()}


@register("GridSample", 16, 20, kind="meaning change")
def grid_sample_16_20(node, ctx) -> None:
    mode = attr_value(node, ctx, "mode", None)
    if mode in _NEW_NAMES:
        set_attribute(node, "mode", _NEW_NAMES[mode])
        ctx.record("GridSample mode renamed")


@register("GridSample", 20, 16, kind="meaning change")
def grid_sample_20_16(node, ctx) -> None:
    check_types(node, ctx)
    rank = ctx.rank(node.input[0])
    if rank != 4:
        ctx.block(f"GridSample below opset 20 takes only 4-D inputs; the input's rank is "
                  f"{'unknown' if rank is None else rank}")
    mode = attr_value(node, ctx, "mode", None)
    if mode in _OLD_NAMES:
        set_attribute(node, "mode", _OLD_NAMES[mode])
        ctx.record("GridSample mode renamed")
