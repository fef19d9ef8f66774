"""Op versions a release lacks that its ``quantized_forms`` write out (quant_explicit.py): LiteRT 2.6
(onnx2tf) has no QLinearConv / QLinearMatMul that computes as ONNX Runtime does (measured wrong, so
``missing``), and their "integer" form (ConvInteger / MatMulInteger + ONNX Runtime's requantization)
is written after the conversion, so the conversion keeps those nodes instead of refusing them; so is
OpenVINO's DynamicQuantizeLinear (measured wrong, its function body divides by a scale fed at run
time), written with exact residuals (quant_dynamic.py)."""

from __future__ import annotations

import dataclasses

__all__ = ["FLOAT_SUM_REFUSED", "WRITTEN", "float_sum_blockers", "meet_float_sums", "written_out"]

FLOAT_SUM_REFUSED = "float_sum_refused"  # QDQ: a QuantizeLinear after a float sum of dequantized codes

WRITTEN = {"QLinearConv": ("integer", "double"), "QLinearMatMul": ("integer",),  # op -> the forms that replace
           "ConvInteger": ("double",),  # every node (quant_double.py: TVM 0.27 has no QLinearConv / ConvInteger)
           "DynamicQuantizeLinear": ("exact_residual",)}  # quant_dynamic.py (OpenVINO divides otherwise)


def written_out(target):
    """``target`` with the versions of each op of :data:`WRITTEN` its ``quantized_forms`` write in
    that form no longer ``missing`` (``target`` itself when there is none: releases that implement
    the ops, tract 0.23 and OpenVINO, are unchanged)."""
    from rewriter.convert.lowering.quant_explicit import quantized_forms

    forms = quantized_forms(target).get("forms", {})
    table = (target.missing or {}).get("", {})
    ops = [op for op, written in WRITTEN.items() if forms.get(op, {}).get("form") in written and table.get(op)]
    if not ops:
        return target
    missing = {**target.missing, "": {op: vs for op, vs in table.items() if op not in ops}}
    return dataclasses.replace(target, missing=missing)


def float_sum_blockers(model, target) -> list[tuple]:
    """(node label, "QuantizeLinear", node name, reason) for every QuantizeLinear whose x is a QDQ
    group's float Conv / ConvTranspose / MatMul / Gemm of DequantizeLinear outputs when the release's
    ``quantized_forms`` say ``QDQ``: ``float_sum_refused`` (LiteRT 2.6: its float sum gives other codes
    than both of ONNX Runtime's results, and no fusion is written for it)."""
    from rewriter.convert.lowering.quant_explicit import quantized_forms
    from rewriter.convert.lowering.quant_table import REDUCTIONS
    from rewriter.graph import traversal

    entry = quantized_forms(target).get("forms", {}).get("QDQ", {})
    if entry.get("form") != FLOAT_SUM_REFUSED:
        return []
    found = []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            if node.op_type != "QuantizeLinear" or node.domain not in ("", "ai.onnx") or not node.input:
                continue
            kind, op, where = traversal.definition(node.input[0], scope)
            if kind != "node" or op.op_type not in REDUCTIONS or op.domain not in ("", "ai.onnx"):
                continue
            if any(traversal.definition(i, where)[0] == "node" and traversal.definition(i, where)[1].op_type
                   == "DequantizeLinear" for i in op.input if i):
                found.append((traversal.node_label(node, scope), node.op_type, node.name or None,
                              f"its x is a QDQ group's float {op.op_type} ('{op.name or node.input[0]}') of "
                              f"DequantizeLinear outputs, which {target.name} sums in float in its own order: "
                              f"other codes than both of ONNX Runtime's results (measured: {entry.get('measured', '')})"))
    return found


def meet_float_sums(result, report, target, plan_only: bool) -> None:
    """:func:`float_sum_blockers` of ``result`` listed in ``report`` (``plan_only``) or raised."""
    found = float_sum_blockers(result, target)
    if not found:
        return
    from rewriter.convert.blockers import Blocker
    from rewriter.convert.planner import ConversionBlocked

    blocked = [Blocker(label, op, "form", reason, "a runtime that computes it as ONNX Runtime does", name=name)
               for label, op, name, reason in found]
    if plan_only:
        report.blockers.extend(blocked)
    else:
        raise ConversionBlocked(blocked, f"for {target.name}")
