"""Op versions a release lacks that its ``quantized_forms`` write out (quant_explicit.py): LiteRT 2.6
(onnx2tf) has no QLinearConv / QLinearMatMul that computes as ONNX Runtime does (measured wrong, so
``missing``), and their "integer" form (ConvInteger / MatMulInteger + ONNX Runtime's requantization)
is written after the conversion, so the conversion keeps those nodes instead of refusing them; so is
OpenVINO's DynamicQuantizeLinear (measured wrong, its function body divides by a scale fed at run
time), written with exact residuals (quant_dynamic.py)."""

from __future__ import annotations

import dataclasses

__all__ = ["WRITTEN", "written_out"]

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
