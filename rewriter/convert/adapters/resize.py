"""Upsample (1, 7, 9; deprecated at 10) and Resize (10, 11, 13, 18, 19).

Upsample
- 1 <-> 7: ``height_scale``/``width_scale`` (4-D NCHW) became ``scales`` [1, 1, h, w]; mode
  'bilinear' became 'linear'. Up rewrites them; down needs scales of 4 values with the first
  two 1.
- 7 <-> 9: ``scales`` moved to an input. Up: constant float input; down: a constant input
  becomes the attribute, a computed one blocks.
- 9 -> 10: Upsample is deprecated (invalid) from 10: it becomes Resize-10, the same operation.
  (Resize-10 going below 10 is the engine's "op newer than the target" case: refused, Resize
  has no function body.)
Resize
- 10 <-> 11: Resize-11 added ``roi``, ``sizes`` and the coordinate/nearest/cubic attributes.
  Resize-10 maps coordinates as 'asymmetric'; in 'nearest' mode runtimes agree with
  nearest_mode 'floor' only when no axis is scaled down. Up: an empty roi goes in, the
  attributes are written out ('asymmetric', 'floor'); nearest with a computed or downscaling
  scales blocks. Down: only 'asymmetric' nearest (floor, upscaling constant scales) or linear,
  without sizes, exclude_outside, cubic; roi, extrapolation_value and cubic_coeff_a (unused
  then) go.
- 11 <-> 13: roi and scales became optional, 'tf_half_pixel_for_nn' went, bfloat16 came.
  Up: 'tf_half_pixel_for_nn' blocks. Down: an absent roi / scales becomes an empty constant.
- 13 <-> 18: ``antialias``, ``axes``, ``keep_aspect_ratio_policy`` added. Up: nothing. Down:
  antialias=0 and 'stretch' go, others block; axes go: roi/scales/sizes given for a subset
  (or another order) of the dims are written out for every dim, the other dims kept as they
  are (scale 1, their own size, roi 0..1): constant inputs as constants (rank known; static
  dims for sizes), computed ones by a ScatterElements at run time (into ones, Shape(X),
  zeros/ones; negative axes need the rank known). A computed roi that the mode does not read
  goes.
- 18 <-> 19: 'half_pixel_symmetric' added. Up: nothing; down: it blocks.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from rewriter.convert.adapters.feature_support import attr_value, drop_default, record_type
from rewriter.convert.adapters.moves import (check_types, constant_input, input_name, set_input, trim_inputs,
                                             value_of)
from rewriter.graph.attributes import attribute, remove_attribute, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


# ---------------------------------------------------------------- Upsample

@register("Upsample", 1, 7, kind="attribute<->input")
def upsample_1_7(node, ctx) -> None:
    h, w = attr_value(node, ctx, "height_scale", None), attr_value(node, ctx, "width_scale", None)
    if h is None or w is None:
        ctx.block("Upsample-1 without its required height_scale/width_scale")
    remove_attribute(node, "height_scale")
    remove_attribute(node, "width_scale")
    set_attribute(node, "scales", [1.0, 1.0, float(h), float(w)])
    if attr_value(node, ctx, "mode", "nearest") == "bilinear":
        set_attribute(node, "mode", "linear")
    ctx.record("Upsample height/width_scale -> scales")


@register("Upsample", 7, 1, kind="attribute<->input")
def upsample_7_1(node, ctx) -> None:
    scales = attr_value(node, ctx, "scales", None)
    if scales is None or len(scales) != 4 or scales[0] != 1 or scales[1] != 1:
        ctx.block(f"scales {scales}: Upsample-1 scales only the last two dims of a 4-D tensor")
    remove_attribute(node, "scales")
    set_attribute(node, "height_scale", float(scales[2]))
    set_attribute(node, "width_scale", float(scales[3]))
    if attr_value(node, ctx, "mode", "nearest") == "linear":
        set_attribute(node, "mode", "bilinear")
    check_types(node, ctx)
    ctx.record("Upsample scales -> height/width_scale")


@register("Upsample", 7, 9, kind="attribute<->input")
def upsample_7_9(node, ctx) -> None:
    scales = attr_value(node, ctx, "scales", None)
    if scales is None:
        ctx.block("Upsample-7 without its required scales attribute")
    remove_attribute(node, "scales")
    set_input(node, 1, ctx.add_constant("upsample_scales", np.array(scales, dtype=np.float32)))
    ctx.record("Upsample scales attribute -> input")


@register("Upsample", 9, 7, kind="attribute<->input")
def upsample_9_7(node, ctx) -> None:
    if not input_name(node, 1):
        ctx.block("Upsample without its scales input")
    scales = constant_input(node, ctx, 1, "scales", 9)
    ctx.maybe_unused(node.input[1])
    trim_inputs(node, 1)
    set_attribute(node, "scales", [float(s) for s in scales.reshape(-1)])
    ctx.record("Upsample scales input -> attribute")


@register("Upsample", 9, 10, kind="rewrite")
def upsample_9_10(node, ctx) -> None:
    """Upsample is deprecated from opset 10 (a model using it there is invalid): it becomes
    Resize-10, the same operation under its new name (same inputs, modes and output size)."""
    node.op_type = "Resize"
    ctx.record("Upsample -> Resize")


@register("Upsample", 10, 9, kind="type-only")
def upsample_10_9(node, ctx) -> None:
    """Upsample-10 (deprecated) is Upsample-9."""


# ---------------------------------------------------------------- Resize 10 <-> 11

def _scales_for_nearest(node, ctx, index: int) -> None:
    """Nearest mode at 10: the constant scales must not scale any axis down."""
    name = input_name(node, index)
    scales = value_of(ctx, name) if name else None
    if scales is None:
        ctx.block(f"nearest mode with scales '{name}' not a constant: Resize-10's nearest rounding agrees "
                  f"with Resize-11's only when no axis is scaled down")
    if (np.asarray(scales) < 1).any():
        ctx.block(f"nearest mode with scales {np.asarray(scales).tolist()} < 1: runtimes round Resize-10's "
                  f"downscaling differently from every Resize-11 nearest_mode")


@register("Resize", 10, 11, kind="attribute<->input")
def resize_10_11(node, ctx) -> None:
    mode = attr_value(node, ctx, "mode", "nearest")
    if mode == "nearest":
        _scales_for_nearest(node, ctx, 1)
        set_attribute(node, "nearest_mode", "floor")
    set_attribute(node, "coordinate_transformation_mode", "asymmetric")
    scales = node.input[1]
    node.input[1] = ctx.add_constant("resize_roi", np.array([], dtype=np.float32))
    set_input(node, 2, scales)
    ctx.record("Resize-10 -> Resize-11 (asymmetric)")


@register("Resize", 11, 10, kind="attribute<->input")
def resize_11_10(node, ctx) -> None:
    mode = attr_value(node, ctx, "mode", "nearest")
    ctm = attr_value(node, ctx, "coordinate_transformation_mode", "half_pixel")
    if mode not in ("nearest", "linear"):
        ctx.block(f"mode '{mode}' exists only from opset 11")
    if ctm != "asymmetric":
        ctx.block(f"coordinate_transformation_mode '{ctm}': Resize-10 maps coordinates as 'asymmetric' "
                  f"(the attribute exists from opset 11)")
    if attr_value(node, ctx, "exclude_outside", 0):
        ctx.block("exclude_outside=1 exists only from opset 11")
    if input_name(node, 3):
        ctx.block(f"sizes input '{node.input[3]}' exists only from opset 11")
    if mode == "nearest":
        nearest = attr_value(node, ctx, "nearest_mode", "round_prefer_floor")
        if nearest != "floor":
            ctx.block(f"nearest_mode '{nearest}': Resize-10 rounds down (the attribute exists from opset 11)")
        _scales_for_nearest(node, ctx, 2)
    for attr in ("coordinate_transformation_mode", "nearest_mode", "exclude_outside", "cubic_coeff_a",
                 "extrapolation_value"):
        remove_attribute(node, attr)
    roi = input_name(node, 1)
    if roi:
        ctx.maybe_unused(roi)
    scales = input_name(node, 2)
    del node.input[1:]
    node.input.append(scales)
    check_types(node, ctx)
    ctx.record("Resize-11 -> Resize-10")


# ---------------------------------------------------------------- Resize 11 <-> 13

@register("Resize", 11, 13, kind="meaning change")
def resize_11_13(node, ctx) -> None:
    ctm = attr_value(node, ctx, "coordinate_transformation_mode", "half_pixel")
    if ctm == "tf_half_pixel_for_nn":
        ctx.block("coordinate_transformation_mode 'tf_half_pixel_for_nn' does not exist from opset 13 on")


@register("Resize", 13, 11, kind="attribute<->input")
def resize_13_11(node, ctx) -> None:
    if not input_name(node, 1):
        set_input(node, 1, ctx.add_constant("resize_roi", np.array([], dtype=np.float32)))
    if not input_name(node, 2):
        set_input(node, 2, ctx.add_constant("resize_scales", np.array([], dtype=np.float32)))
    check_types(node, ctx)


# ---------------------------------------------------------------- Resize 13 <-> 18 <-> 19

@register("Resize", 13, 18, kind="new feature")
def resize_13_18(node, ctx) -> None:
    """Resize-18 without the new attributes is Resize-13."""


@register("Resize", 18, 13, kind="new feature")
def resize_18_13(node, ctx) -> None:
    drop_default(node, ctx, "antialias", 0, 18)
    # a policy other than 'stretch' changes the sizes themselves: it blocks here, constant or not
    drop_default(node, ctx, "keep_aspect_ratio_policy", "stretch", 18)
    axes = attribute(node, "axes")
    if axes is None:
        return
    values = attr_value(node, ctx, "axes")
    x = node.input[0]
    rank = ctx.rank(x)
    inputs = {what: _axes_input(node, ctx, index) for index, what in _AXES_INPUTS}
    if rank is None:
        if any(a < 0 for a in values):
            ctx.block(f"negative axes {values} with the rank of '{x}' unknown: the dims they name are known "
                      f"only at run time (axes exist from opset 18)")
    elif any(not -rank <= a < rank for a in values):
        ctx.block(f"axes {values} out of range for the rank {rank} of '{x}' (axes exist from opset 18)")
    else:
        values = [a % rank for a in values]
    if len(set(values)) != len(values):
        ctx.block(f"axes {values} repeat a dim")
    if rank is not None and values == list(range(rank)):
        remove_attribute(node, "axes")
        ctx.record("Resize axes written out for every dim")
        return
    if "computed" in (inputs["scales"], inputs["sizes"]) and "" not in (inputs["scales"], inputs["sizes"]):
        # both given: the spec wants one of them empty, which a computed one shows only at run time
        ctx.block(f"scales '{node.input[2]}' and sizes '{node.input[3]}' both given with one computed: "
                  f"which one is empty is known only at run time (axes exist from opset 18)")
    remove_attribute(node, "axes")
    if rank is None:  # constants too are written out over every dim at run time
        inputs = {w: "computed" if kind else kind for w, kind in inputs.items()}
    elif inputs["sizes"] == "constant":
        shape = ctx.shape(x)
        if shape is None or any(shape[d] is None for d in range(rank) if d not in values):
            inputs["sizes"] = "computed"  # the other dims' sizes are known at run time only
    if "constant" in inputs.values():
        _full_axes(node, ctx, values, rank, [w for w, kind in inputs.items() if kind == "constant"])
        ctx.record("Resize axes written out for every dim")
    computed = [w for w, kind in inputs.items() if kind == "computed"]
    if computed:
        _full_axes_at_run_time(node, ctx, values, rank, computed)
        ctx.record("Resize axes: computed roi/scales/sizes scattered over every dim")


_AXES_INPUTS = ((1, "roi"), (2, "scales"), (3, "sizes"))


def _axes_input(node, ctx, index: int) -> str:
    """How input ``index`` (roi, scales, sizes) is given: "" (absent or known empty: nothing to
    write out), "constant" or "computed"."""
    name = input_name(node, index)
    if not name:
        return ""
    value = value_of(ctx, name)
    if value is not None:
        return "constant" if np.asarray(value).size else ""
    return "" if ctx.shape(name) == [0] else "computed"


def _full_axes(node, ctx, axes: list[int], rank: int, which: list[str]) -> None:
    """Constant roi/scales/sizes (``which``) given for ``axes`` only become the same for every
    dim (the others are not resized: scale 1, their own size, roi 0..1): static dims for sizes."""
    n = len(axes)
    for index, what in _AXES_INPUTS:
        if what not in which:
            continue
        name = input_name(node, index)
        value = constant_input(node, ctx, index, what, 18).reshape(-1)
        if what == "roi":
            full = np.array([0] * rank + [1] * rank, dtype=value.dtype)
            for i, a in enumerate(axes):
                full[a], full[rank + a] = value[i], value[n + i]
        elif what == "scales":
            full = np.ones(rank, dtype=value.dtype)
            full[axes] = value
        else:
            shape = ctx.shape(node.input[0])
            others = [d for d in range(rank) if d not in axes]
            if shape is None or any(shape[d] is None for d in others):
                ctx.block(f"sizes for axes {axes} with dims {others} of '{node.input[0]}' not static "
                          f"(axes exist from opset 18)")
            full = np.array([shape[d] if shape[d] is not None else 0 for d in range(rank)], dtype=value.dtype)
            full[axes] = value
        ctx.maybe_unused(name)
        node.input[index] = ctx.add_constant(f"resize_{what}", full)


def _full_axes_at_run_time(node, ctx, axes: list[int], rank: int | None, which: list[str]) -> None:
    """Computed roi/scales/sizes (``which``) given for ``axes`` (normalized, or all >= 0 when
    ``rank`` is None) are scattered at run time into what the other dims keep: their own size
    (Shape of X), scale 1, roi 0..1 (ones/zeros: constants when the rank is known, else
    ConstantOfShape of the rank, Shape(Shape(X)))."""
    x = node.input[0]
    made: dict[str, str] = {}

    def shape_x() -> str:  # Shape(X), made once
        if "shape" not in made:
            made["shape"] = ctx.insert_before("Shape", [x]).output[0]
            record_type(ctx, made["shape"], TensorProto.INT64, [rank])
        return made["shape"]

    def rank_1d() -> str:  # [rank of X], made once
        if "rank" not in made:
            made["rank"] = ctx.insert_before("Shape", [shape_x()]).output[0]
            record_type(ctx, made["rank"], TensorProto.INT64, [1])
        return made["rank"]

    def filled(value: float, elem_type: int) -> str:  # [rank] of value
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
        if rank is not None:
            return ctx.add_constant("resize_fill", np.full(rank, value, dtype=dtype))
        out = ctx.insert_before("ConstantOfShape", [rank_1d()],
                                value=onnx.helper.make_tensor("value", elem_type, [1], [value])).output[0]
        record_type(ctx, out, elem_type, [None])
        return out

    axes_name = ctx.ints_constant("resize_axes", tuple(axes))
    for index, what in _AXES_INPUTS:
        if what not in which:
            continue
        name = node.input[index]
        if what == "roi":
            ctm = attr_value(node, ctx, "coordinate_transformation_mode", "half_pixel")
            if ctm != "tf_crop_and_resize":  # the roi is read only then: it goes (optional from 13)
                ctx.maybe_unused(name)
                node.input[index] = ""
                continue
            elem_type = ctx.elem_type(name)
            if not elem_type:
                ctx.block(f"roi input '{name}' computed and of unknown type: the roi of the other dims "
                          f"(0..1) is built in its type (axes exist from opset 18)")
            if rank is not None:
                data = ctx.add_constant("resize_roi_fill", np.array(
                    [0] * rank + [1] * rank, dtype=onnx.helper.tensor_dtype_to_np_dtype(elem_type)))
                indices = ctx.ints_constant("resize_roi_axes", tuple(axes + [a + rank for a in axes]))
            else:
                data = ctx.insert_before("Concat", [filled(0, elem_type), filled(1, elem_type)], axis=0).output[0]
                ends = ctx.insert_before("Add", [axes_name, rank_1d()]).output[0]  # the ends' indices
                indices = ctx.insert_before("Concat", [axes_name, ends], axis=0).output[0]
                record_type(ctx, data, elem_type, [None])
                record_type(ctx, ends, TensorProto.INT64, [len(axes)])
                record_type(ctx, indices, TensorProto.INT64, [2 * len(axes)])
            dims = [None if rank is None else 2 * rank]
        elif what == "scales":
            elem_type, indices, dims = TensorProto.FLOAT, axes_name, [rank]
            data = filled(1, elem_type)
        else:
            elem_type, indices, dims, data = TensorProto.INT64, axes_name, [rank], shape_x()
        full = ctx.insert_before("ScatterElements", [data, indices, name], axis=0).output[0]
        record_type(ctx, full, elem_type, dims)
        node.input[index] = full
    trim_inputs(node)


@register("Resize", 18, 19, kind="meaning change")
def resize_18_19(node, ctx) -> None:
    """Resize-19 only added 'half_pixel_symmetric'."""


@register("Resize", 19, 18, kind="meaning change")
def resize_19_18(node, ctx) -> None:
    ctm = attr_value(node, ctx, "coordinate_transformation_mode", "half_pixel")
    if ctm == "half_pixel_symmetric":
        ctx.block("coordinate_transformation_mode 'half_pixel_symmetric' exists only from opset 19")
