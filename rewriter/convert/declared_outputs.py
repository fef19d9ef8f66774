"""Graph outputs whose declared dims a lowering shows to be false.

A lowered op (``ai.onnx.ml``, ``com.microsoft``) is inferred where the op it replaced was not:
onnxmltools' LightGBM converters declare the label output ``[1]`` whatever the batch, and once the
TreeEnsembleClassifier is standard ONNX over a static input (``--input-shape X:5,4``), strict
inference gives ``[5]``, which is what ONNX Runtime returns for the input model too. Inference of
the input does not reach that output (the op has no shape inference), so the declaration was
never checked; the result's can, and fails only on the declaration. Such a declared dim is
written as the inferred one, and the lowering says so (a warning among
:attr:`LoweringReport.retyped`, which `convert --target` and `convert --lower-ops` print).

A dim the input's own inference gives is left as it is: a conflict there is the conversion's
(or the input's own, which the checks report), not a declaration nobody could check.
"""

from __future__ import annotations

import onnx

from rewriter.convert.lowering.contrib_types import dims_of

__all__ = ["correct_declared_outputs"]


def _passes_strict(model: onnx.ModelProto) -> bool:
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception:  # noqa: BLE001 - InferenceError, ValidationError
        return False
    return True


def _dims(value: onnx.ValueInfoProto) -> list | None:
    """The static dims of ``value`` (None for a symbolic or unknown one), None when the rank is unknown."""
    dims = dims_of(value.type)[1]
    return None if dims is None else [d if isinstance(d, int) else None for d in dims]


def _text(dims: list) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _inferred_outputs(model: onnx.ModelProto, strict: bool) -> list | None:
    """The dims inference gives each graph output of ``model`` when the declarations are left out
    (None: strict inference fails without them too)."""
    free = onnx.ModelProto()
    free.CopyFrom(model)
    for out in free.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(free, strict_mode=strict)
    except Exception:  # noqa: BLE001 - InferenceError, ValidationError
        return None
    return [_dims(out) for out in inferred.graph.output]


def correct_declared_outputs(result: onnx.ModelProto, source: onnx.ModelProto) -> list[str]:
    """Rewrite (in place) the static dims of ``result``'s graph outputs that contradict what strict
    inference of ``result`` gives for them, where inference of ``source`` gives no static dim (its
    declaration was never checked) and ``result`` fails strict inference for those declarations
    only; one warning line per output changed."""
    if _passes_strict(result):
        return []
    dims_after = _inferred_outputs(result, strict=True)
    dims_before = _inferred_outputs(source, strict=False)
    if dims_after is None or dims_before is None or len(dims_before) != len(dims_after):
        return []
    changes, lines = [], []
    for out, dims, before in zip(result.graph.output, dims_after, dims_before):
        declared = _dims(out)
        if declared is None or dims is None or len(declared) != len(dims):
            continue
        unchecked = [None] * len(dims) if before is None or len(before) != len(dims) else before
        wrong = [k for k, d in enumerate(declared) if d and dims[k] and d != dims[k] and not unchecked[k]]
        if wrong:
            changes.append((out, wrong, dims))
            lines.append(f"graph output '{out.name}' is declared {_text(declared)} but the lowered model computes "
                         f"{_text(dims)} (inference of the input does not reach it, so its declaration was "
                         f"never checked): written as {_text(dims)}")
    for out, wrong, dims in changes:
        for k in wrong:
            out.type.tensor_type.shape.dim[k].dim_value = dims[k]
    return lines
