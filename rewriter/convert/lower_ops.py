"""``lower_ops``: ops without a function body (``ai.onnx.ml``) replaced by standard ONNX at a
chosen default-domain opset: the model is raised to the opset the lowerings write (>= 13) by the
converter, lowered (:mod:`rewriter.convert.lowering`), then converted to ``opset`` when that is
another one. Kept apart from the lowering package so that the planner may call the lowering
without an import cycle."""

from __future__ import annotations

import onnx

from rewriter.convert.declared_outputs import correct_declared_outputs
from rewriter.convert.lowering import MIN_OPSET, LoweringReport, lower_nodes, lowerable_ops
from rewriter.graph.ort_onnx_domain import relabel
from rewriter.convert.planner import convert_model
from rewriter.graph import traversal

__all__ = ["lower_ops"]


def _any_chosen(model: onnx.ModelProto, ops) -> bool:
    chosen = lowerable_ops() if ops is None else {("" if d == "ai.onnx" else d, o) for d, o in ops}
    return any((n.domain, n.op_type) in chosen for s in traversal.iter_scopes(model) for n in s.body.node)


def _drop_contradicted_value_info(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """``model`` without the value_info entries whose rank a Constant node's own value contradicts
    (onnxruntime-genai's builder declares rank 0 for 1-D constants; the new nodes' readers of
    such a value would fail strict shape inference on the wrong hint), in a copy, and how many."""
    wrong: dict[int, set] = {}  # scope's position in iter_scopes -> names
    for i, scope in enumerate(traversal.iter_scopes(model)):
        declared = {} if scope.is_function else {v.name: v.type.tensor_type for v in scope.body.value_info}
        for node in scope.body.node:
            t = declared.get(node.output[0]) if node.op_type == "Constant" and node.output else None
            value = next((a.t for a in node.attribute if a.name == "value"), None) if t is not None else None
            if value is not None and t.HasField("shape") and len(t.shape.dim) != len(value.dims):
                wrong.setdefault(i, set()).add(node.output[0])
    if not wrong:
        return model, 0
    result = onnx.ModelProto()
    result.CopyFrom(model)
    count = 0
    for i, scope in enumerate(traversal.iter_scopes(result)):
        if i in wrong:
            keep = [v for v in scope.body.value_info if v.name not in wrong[i]]
            count += len(scope.body.value_info) - len(keep)
            del scope.body.value_info[:]
            scope.body.value_info.extend(keep)
    return result, count


def lower_ops(model: onnx.ModelProto, ops=None, *, opset: int | None = None) -> tuple[onnx.ModelProto, LoweringReport]:
    """Replace every node of ``ops`` ((domain, op_type) pairs; None: every op that has a lowering)
    in every scope by standard ONNX ops computing what ONNX Runtime's kernel computes.

    The new nodes are written at ``max(the model's default-domain opset, 13)`` (the model is first
    converted up to 13 when it imports less); with ``opset`` given the result is at that opset
    (converted up before the lowering, or down after it, by the project's converter). Raises a
    RewriterError naming every node that cannot be lowered (or converted); the input is not changed
    and nothing is half-done. Returns the new model and a :class:`LoweringReport`.
    """
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int)):
        raise TypeError(f"opset must be an int or None, got {type(opset).__name__}")
    model = relabel(model, ops)  # ONNX Runtime's ONNX-domain contrib ops (LayerNormalization-1, ...)
    model, dropped = _drop_contradicted_value_info(model)
    current = traversal.opset_version(model.opset_import)
    if not _any_chosen(model, ops):
        result, report = lower_nodes(model, ops)
        return (convert_model(result, opset)[0] if opset is not None and opset != current else result), report
    write_at = max(MIN_OPSET, current or MIN_OPSET)
    if opset is not None and opset > write_at:
        write_at = opset
    work = model
    if current is not None and current < write_at:
        work = convert_model(model, write_at)[0]
    result, report = lower_nodes(work, ops, new_opset=write_at, final_opset=opset)
    report.retyped.extend(correct_declared_outputs(result, model))  # (before any conversion checks it)
    report.source_opset = current
    if dropped:
        report.notes.append(f"dropped {dropped} value_info entr{'y' if dropped == 1 else 'ies'} of the input whose "
                            "declared rank their Constant's value contradicts")
    report.opset = write_at
    if opset is not None and opset != write_at:
        result = convert_model(result, opset)[0]
        report.notes.append(f"written at opset {write_at}, then converted to {opset}")
    return result, report
