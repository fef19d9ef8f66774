"""``lower_ops``: ops without a function body (``ai.onnx.ml``) replaced by standard ONNX at a
chosen default-domain opset: the model is raised to the opset the lowerings write (>= 13) by the
converter, lowered (:mod:`rewriter.convert.lowering`), then converted to ``opset`` when that is
another one. Kept apart from the lowering package so that the planner may call the lowering
without an import cycle."""

from __future__ import annotations

import onnx

from rewriter.convert.lowering import MIN_OPSET, LoweringReport, lower_nodes, lowerable_ops
from rewriter.graph.ort_onnx_domain import relabel
from rewriter.convert.planner import convert_model
from rewriter.graph import traversal

__all__ = ["lower_ops"]


def _any_chosen(model: onnx.ModelProto, ops) -> bool:
    chosen = lowerable_ops() if ops is None else {("" if d == "ai.onnx" else d, o) for d, o in ops}
    return any((n.domain, n.op_type) in chosen for s in traversal.iter_scopes(model) for n in s.body.node)


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
    report.source_opset = current
    report.opset = write_at
    if opset is not None and opset != write_at:
        result = convert_model(result, opset)[0]
        report.notes.append(f"written at opset {write_at}, then converted to {opset}")
    return result, report
