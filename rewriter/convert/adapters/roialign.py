"""RoiAlign across 16, which added ``coordinate_transformation_mode`` with the default
"half_pixel" (a -0.5 pixel shift); RoiAlign-10 behaves as "output_half_pixel".

- up 10 -> 16: the old behaviour is written out: coordinate_transformation_mode="output_half_pixel".
- down 16 -> 10: "output_half_pixel" dropped; "half_pixel" (also when absent) refused.
"""

from __future__ import annotations

from rewriter.convert.adapters.feature_support import attr_value, check_types
from rewriter.graph.attributes import remove_attribute, set_attribute
from rewriter.convert.registry import register

__all__: list[str] = []


@register("RoiAlign", 10, 16, kind="meaning change")
def roi_align_10_16(node, ctx) -> None:
    set_attribute(node, "coordinate_transformation_mode", "output_half_pixel")
    ctx.record("RoiAlign output_half_pixel written out")


@register("RoiAlign", 16, 10, kind="meaning change")
def roi_align_16_10(node, ctx) -> None:
    check_types(node, ctx)
    mode = attr_value(node, ctx, "coordinate_transformation_mode", "half_pixel")
    if mode != "output_half_pixel":
        ctx.block(f"coordinate_transformation_mode={mode!r} (the default from opset 16) shifts the "
                  f"coordinates by -0.5 pixel, which RoiAlign below 16 does not")
    remove_attribute(node, "coordinate_transformation_mode")
