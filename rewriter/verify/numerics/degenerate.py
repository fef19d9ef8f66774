"""When a numerical check checks nothing: a float reference output that is all zero, constant or
all NaN/infinity, and random inputs whose every dynamic dim took the default size.

A rewrite that keeps an all-zero output all zero (a ReLU of negatives, a detector's map that
random inputs never light up) or keeps every dynamic dim at 2 (a text line two pixels wide)
says nothing about the inputs the model will see: such a check is *not verified*, not a pass.
Only float outputs are judged (integers, booleans and strings are compared exactly, and an
integer output is often constant by design: a shape, a mask). NaN and infinities the reference
has among finite values are compared by place (see :mod:`.compare`); the finite values judge.
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.graph.static_shapes import ANONYMOUS
from rewriter.verify.numerics.random_inputs import SYMBOL_SIZE

__all__ = ["degenerate_reference", "defaulted_dims", "defaulted_text", "REAL_INPUTS_HINT"]

REAL_INPUTS_HINT = "give real inputs with --input-value NAME:VALUES, or --calibration-data NPZ with --dtype"


def degenerate_reference(array) -> str:
    """Why a float reference output checks nothing ("" when it does): no finite value, every
    finite value zero, or every finite value the same (two or more of them)."""
    a = np.asarray(array)
    if a.dtype.kind != "f" or a.size == 0:
        return ""
    values = a[np.isfinite(a)]
    where = "" if values.size == a.size else " where finite"
    if values.size == 0:
        return "the reference is all NaN or infinite"
    if not values.any():
        return f"the reference is all zeros{where}"
    if values.size > 1 and (values == values[0]).all():
        return f"the reference is constant ({values[0]:.6g} everywhere{where})"
    return ""


def defaulted_dims(model: onnx.ModelProto, input_shapes=None, input_values=None) -> str:
    """What random inputs defaulted, when the graph inputs have dynamic dims and none of them was
    given a size (by ``input_shapes`` or ``input_values`` for an input with a dynamic dim; the
    symbols a pinned shape binds are then given too): "x: 'batch', dim 2; z: 'batch'", else ""."""
    pinned, valued = dict(input_shapes or {}), dict(input_values or {})
    inits = {t.name for t in model.graph.initializer}
    found, given = [], False
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = [(i, d) for i, d in enumerate(vi.type.tensor_type.shape.dim)
                if d.WhichOneof("value") != "dim_value" or d.dim_value < 0]
        if not dims:
            continue
        if vi.name in pinned or vi.name in valued:
            given = True
            continue
        found.append(f"{vi.name}: " + ", ".join(
            repr(d.dim_param) if d.WhichOneof("value") == "dim_param" and d.dim_param not in ANONYMOUS
            else f"dim {i}" for i, d in dims))
    if given or not found:
        return ""
    return "; ".join(found)


def defaulted_text(found: str) -> str:
    """The sentence a report prints for :func:`defaulted_dims`' answer."""
    return (f"every dynamic input dim took the default size {SYMBOL_SIZE} ({found}): not a check of real sizes; "
            f"give them with --input-shape NAME:DIMS, or {REAL_INPUTS_HINT}")
