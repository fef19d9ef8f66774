"""Tile across opset 6: Tile-1 repeated along one ``axis`` ``tiles`` times (both scalar inputs
of the data's float type); Tile-6 takes ``repeats``, one int64 per dim.

- up 1 -> 6: constant tiles/axis and the data's rank known -> a constant repeats input (1 for
  every other dim); otherwise blocked.
- down 6 -> 1: constant repeats -> one Tile-1 per dim repeated more than once (tiling along
  several dims is tiling along each in turn); a computed repeats blocks, as do the types
  Tile-1 lacks (it takes float, float16 and double only).
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.convert.adapters.feature_support import record_type
from rewriter.convert.adapters.moves import check_types, constant_input, input_name
from rewriter.convert.registry import register
from rewriter.graph import traversal

__all__: list[str] = []


@register("Tile", 1, 6, kind="attribute<->input")
def tile_1_6(node, ctx) -> None:
    if not input_name(node, 1) or not input_name(node, 2):
        ctx.block("Tile-1 without its tiles and axis inputs")
    tiles = constant_input(node, ctx, 1, "tiles", None)
    axis = constant_input(node, ctx, 2, "axis", None)
    if tiles.size != 1 or axis.size != 1:
        ctx.block("Tile-1's tiles and axis must be scalars")
    rank = _rank(ctx, node.input[0])
    if rank is None:
        ctx.block(f"the rank of '{node.input[0]}' is unknown, and Tile-6's repeats need one value per dim")
    axis, tiles = int(axis.reshape(-1)[0]), int(tiles.reshape(-1)[0])
    if not 0 <= axis < rank:
        ctx.block(f"axis {axis} is out of range for rank {rank}")
    repeats = np.ones(rank, dtype=np.int64)
    repeats[axis] = tiles
    for name in node.input[1:]:
        ctx.maybe_unused(name)
    del node.input[1:]
    node.input.append(ctx.add_constant("tile_repeats", repeats))
    ctx.record("Tile tiles/axis -> repeats")


def _rank(ctx, name: str, depth: int = 0) -> int | None:
    """The rank of ``name``, also through a chain of Tiles (Tile-1 has no shape inference)."""
    rank = ctx.rank(name)
    if rank is None and depth < 64:
        kind, producer, _ = traversal.definition(name, ctx.scope)
        if kind == "node" and producer.op_type == "Tile":
            return _rank(ctx, producer.input[0], depth + 1)
    return rank


@register("Tile", 6, 1, kind="attribute<->input")
def tile_6_1(node, ctx) -> None:
    repeats = constant_input(node, ctx, 1, "repeats", 6)
    repeats = [int(r) for r in np.asarray(repeats).reshape(-1)]
    name = node.input[1]
    del node.input[1:]
    check_types(node, ctx)
    elem = ctx.elem_type(node.input[0])
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    ctx.maybe_unused(name)
    axes = [a for a, r in enumerate(repeats) if r != 1] or [0]
    shape = ctx.shape(node.input[0])
    for a in axes[:-1]:  # every axis but the last: a Tile-1 before the node
        tile = ctx.insert_before("Tile", [node.input[0], ctx.add_constant("tile_tiles", np.array(repeats[a], dtype)),
                                          ctx.add_constant("tile_axis", np.array(a, dtype))])
        if shape is not None:
            shape = [None if d is None else d * (repeats[k] if k == a else 1) for k, d in enumerate(shape)]
        record_type(ctx, tile.output[0], elem, shape)
        node.input[0] = tile.output[0]
    a = axes[-1]
    node.input.extend([ctx.add_constant("tile_tiles", np.array(repeats[a], dtype)),
                       ctx.add_constant("tile_axis", np.array(a, dtype))])
    ctx.record("Tile repeats -> tiles/axis")
