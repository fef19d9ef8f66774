"""Exact rewrites of forms a measured release computes wrongly, where another form of the same
values runs right (``rewrite_forms`` in a release's data: op -> {"form": what ``convert --target``
writes instead, "measured": how and when that was measured}; OpenVINO 2026.4's data so far).

- ``Tile`` / ``rank_6``: OpenVINO 2026.4.1's CPU plugin tiles a rank-4 or rank-5 tensor along axis
  1 wrongly when it picks the channels-last layout (nhwc / ndhwc) for the Tile, which it does after
  a broadcast of a tensor with one channel (the attention mask of a Llama that
  onnxruntime-genai's model builder wrote: ``Expand``, ``Add``, then ``Tile`` by [1, heads, 1, 1];
  2024.6 runs the same model right).  Rank 6 has no channels-last layout: a Tile of rank 4 or 5
  whose repeats along axis 1 are not a constant 1 becomes a Tile of rank 6 between an Unsqueeze
  (leading axes of 1) and a Squeeze of them, with repeats of 1 on the added axes: the same values,
  element for element.  A Tile whose rank shape inference does not tell is left as it is.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.conv_rank import conv_integer_rank_4
from rewriter.targets.dim_scalars import (
    dims_as_scalars,
    scalar_constant_of_shape,
    scalar_reshapes_unsqueezed,
    shape_no_ops_bypassed,
    shapes_cast_for_readers,
)
from rewriter.targets.empty_reshapes import empty_shape_squeezed
from rewriter.targets.folded_inputs import constants_folded
from rewriter.targets.forced_dims import forced_dims_fixed
from rewriter.targets.half_matmul import cast_shapes_folded, float16_in_float32, folded_when_static
from rewriter.targets.int32_dims import int32_dims_widened
from rewriter.targets.nan_fill import constant_branch_broadcast
from rewriter.targets.node_splice import splice, taken_names
from rewriter.targets.output_identity import producer_writes_output
from rewriter.targets.pad_crops import negative_cropped
from rewriter.targets.passthrough_outputs import identity_written
from rewriter.targets.restriction_lookups import constant_array
from rewriter.targets.same_pads import explicit_pads
from rewriter.targets.slice_ends import huge_ends_maximal
from rewriter.targets.tdim_casts import topk_cast_bypassed
from rewriter.targets.tract_declutter import duplicates_merged, int_products_in_float
from rewriter.targets.widened_codes import expand_codes_widened
from rewriter.targets.where_branches import branches_swapped, strings_gathered

__all__ = ["TILE_RANKS", "rewrite_forms", "rewritten_copy"]

TILE_RANKS = (4, 5)  # the ranks OpenVINO's Tile has a channels-last layout for


def _ranks(model: onnx.ModelProto, inferred) -> dict[str, int]:
    return {name: len(t.tensor_type.shape.dim) for name, t in value_types(model, inferred).items()
            if t.HasField("tensor_type") and t.tensor_type.HasField("shape")}


def _repeats(name: str, scope: traversal.Scope):
    """The Tile's repeats when they are a constant this can read, else None."""
    value = constant_array(name, scope)
    return None if value is None else value.reshape(-1).tolist()


def _int64s(name: str, values: list, taken: set) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=fresh_name(taken, name),
                            value=numpy_helper.from_array(np.array(values, np.int64), name))


def _as_rank_6(node: onnx.NodeProto, rank: int, repeats, opset: int, taken: set) -> list[onnx.NodeProto]:
    """``node`` (a Tile of rank ``rank``) as Unsqueeze, Tile of rank 6, Squeeze; the Tile keeps its name."""
    base = node.name or node.output[0]
    axes = list(range(6 - rank))
    wide, tiled = fresh_name(taken, f"{base}_rank6_in"), fresh_name(taken, f"{base}_rank6_out")
    reps = fresh_name(taken, f"{base}_rank6_repeats")
    nodes = []
    if repeats is not None:
        nodes.append(_int64s(reps, [1] * len(axes) + repeats, taken))
    else:
        ones = fresh_name(taken, f"{base}_rank6_ones")
        nodes += [_int64s(ones, [1] * len(axes), taken),
                  helper.make_node("Concat", [ones, node.input[1]], [reps], name=fresh_name(taken, reps), axis=0)]
    squeeze_in, squeeze_attrs = [tiled], {}
    if opset >= 13:
        axes_name = fresh_name(taken, f"{base}_rank6_axes")
        nodes.append(_int64s(axes_name, axes, taken))
        unsqueeze = helper.make_node("Unsqueeze", [node.input[0], axes_name], [wide],
                                     name=fresh_name(taken, f"{base}_rank6_unsqueeze"))
        squeeze_in.append(axes_name)
    else:
        unsqueeze = helper.make_node("Unsqueeze", [node.input[0]], [wide], axes=axes,
                                     name=fresh_name(taken, f"{base}_rank6_unsqueeze"))
        squeeze_attrs["axes"] = axes
    tile = helper.make_node("Tile", [wide, reps], [tiled], name=node.name)
    squeeze = helper.make_node("Squeeze", squeeze_in, [node.output[0]], name=fresh_name(taken, f"{base}_rank6_squeeze"),
                               **squeeze_attrs)
    return nodes + [unsqueeze, tile, squeeze]


def _tile_rank_6(model: onnx.ModelProto, release: str, inferred) -> list[str]:
    ranks = _ranks(model, inferred)
    taken = taken_names(model)
    plans, done = [], []  # (scope, {node index: (rank, repeats)}), found before any scope changes
    for scope in traversal.iter_scopes(model):
        found = {}
        for i, node in enumerate(scope.body.node):
            if node.op_type != "Tile" or not is_default_domain(node.domain) or scope.opset is None:
                continue
            rank, repeats = ranks.get(node.input[0]), _repeats(node.input[1], scope)
            if rank in TILE_RANKS and not (repeats is not None and len(repeats) == rank and repeats[1] == 1):
                found[i] = (rank, repeats)
        if found:
            plans.append((scope, found))
    for scope, found in reversed(plans):  # a subgraph before the graph whose node holds it
        done += splice(scope, found, lambda node, plan, opset=scope.opset: _as_rank_6(node, *plan, opset, taken))
    if not done:
        return []
    labels = first_few(f"'{n}'" for n in done)
    note = (f"{len(done)} Tile node(s) of rank 4 or 5 repeating along axis 1 written as rank 6 (an Unsqueeze "
            f"and a Squeeze around), which {release} tiles right: {labels}")
    return [note]


_REWRITES = {("Tile", "rank_6"): _tile_rank_6, ("Identity", "producer_writes_output"): producer_writes_output,
             ("Slice", "dims_as_scalars"): dims_as_scalars, ("ConstantOfShape", "scalar_as_constant"): scalar_constant_of_shape,
             ("Reshape", "no_ops_bypassed"): shape_no_ops_bypassed, ("MaxPool", "same_pads_explicit"): explicit_pads,
             ("Reshape", "scalar_unsqueezed"): scalar_reshapes_unsqueezed,
             ("AveragePool", "same_pads_explicit"): explicit_pads, ("Shape", "cast_for_readers"): shapes_cast_for_readers,
             ("Where", "branches_swapped"): branches_swapped, ("Where", "strings_gathered"): strings_gathered,
             ("Conv", "weights_folded"): constants_folded("Conv"), ("Reshape", "shape_folded"): constants_folded("Reshape"),
             ("Slice", "bounds_folded"): constants_folded("Slice"), ("TopK", "cast_bypassed"): topk_cast_bypassed,
             ("Concat", "forced_dims_fixed"): forced_dims_fixed,
             ("Cast", "int32_dims_widened"): int32_dims_widened, ("Slice", "huge_ends_maximal"): huge_ends_maximal,
             ("Expand", "codes_widened"): expand_codes_widened,
             ("Where", "constant_branch_broadcast"): constant_branch_broadcast,
             ("ConvInteger", "rank_4"): conv_integer_rank_4, ("TopK", "k_folded"): constants_folded("TopK"),
             ("Loop", "identity_written"): identity_written("Loop"), ("Scan", "identity_written"): identity_written("Scan"),
             ("Scan", "read_outputs_written"): identity_written("Scan", read=True),
             ("Pad", "negative_cropped"): negative_cropped, ("Reshape", "empty_shape_squeezed"): empty_shape_squeezed,
             ("MatMul", "float16_in_float32"): float16_in_float32, ("Shape", "folded_when_static"): folded_when_static,
             ("Reshape", "cast_shape_folded"): cast_shapes_folded, ("Mul", "int_products_in_float"): int_products_in_float,
             ("Less", "duplicates_merged"): duplicates_merged}


def rewrite_forms(model: onnx.ModelProto, table: dict, release: str, inferred=None) -> list[str]:
    """Rewrite in place the nodes of the forms ``table`` (``rewrite_forms``) names; one note per
    kind of rewrite done.  ``inferred``: ``model`` after shape inference (the ranks)."""
    notes = []
    for op, entry in sorted(table.items()):
        for form in entry["form"] if isinstance(entry["form"], list) else [entry["form"]]:
            notes += _REWRITES[(op, form)](model, release, inferred)
    return notes


def rewritten_copy(model: onnx.ModelProto, table: dict, release: str, notes: list | None = None) -> onnx.ModelProto:
    """A copy of ``model`` with the forms of ``table`` rewritten (``model`` itself is left as it
    is): what ``--plan`` and ``check`` look at to name only what convert leaves; the rewrites'
    notes go to ``notes`` when given (the plan says what convert would rewrite)."""
    from rewriter.graph.inferred import LazyInference

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    done = rewrite_forms(copy, table, release, LazyInference(copy)())
    if notes is not None:
        notes.extend(done)
    return copy
