"""Old import path of :mod:`rewriter.verify.shapes.rule` (the ReduceProd shape rule and dim helpers)."""

from rewriter.verify.shapes.rule import (
    DYNAMIC_AXES,
    REDUCE_PROD_VERSIONS,
    ShapeRuleError,
    reduce_prod_form,
    reduce_prod_output_shape,
    compatible,
    first_conflict,
    format_shape,
)

__all__ = ["DYNAMIC_AXES", "REDUCE_PROD_VERSIONS", "ShapeRuleError", "reduce_prod_form",
           "reduce_prod_output_shape", "compatible", "first_conflict", "format_shape"]
