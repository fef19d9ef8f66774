"""MeanVarianceNormalization across opset 13 (bfloat16), and its missing-default defect.

MVN-13's ONNX function body reads ``@axes``; onnx does not bind the schema default
(``[0, 2, 3]``) when the node has no ``axes`` attribute, so from opset 13 on such a node makes
``check_model(full_check=True)`` fail ("One and only one of the attributes 'value', 'value_*'
... Constant"). Writing the default out is the same node and a valid one: both steps do it.

- up 9 -> 13: nothing changes but the default axes written out.
- down 13 -> 9: bfloat16 is refused (types checked); the axes stay explicit (harmless at 9).
"""

from __future__ import annotations

from rewriter.convert.adapters.feature_support import check_types, no_ref
from rewriter.convert.attrs import get_attr, set_ints
from rewriter.convert.registry import register

__all__ = ["materialize_default_axes"]

_DEFAULT_AXES = [0, 2, 3]


def materialize_default_axes(node, ctx) -> None:
    """Write MVN's default axes on a node without them (see the module doc)."""
    no_ref(node, ctx, "axes")
    if get_attr(node, "axes") is None:
        set_ints(node, "axes", list(_DEFAULT_AXES))
        ctx.record("MeanVarianceNormalization default axes written out")


@register("MeanVarianceNormalization", 9, 13, kind="type-only")
def mvn_9_13(node, ctx) -> None:
    materialize_default_axes(node, ctx)


@register("MeanVarianceNormalization", 13, 9, kind="type-only")
def mvn_13_9(node, ctx) -> None:
    check_types(node, ctx)
    materialize_default_axes(node, ctx)
