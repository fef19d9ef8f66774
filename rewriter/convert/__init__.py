"""Opset conversion: planner, adapter registry, node context, type-only rule, delegation to
onnx's converter where it is correct, and the adapters by op family (``adapters/``)."""

from rewriter.convert.for_target import convert_for
from rewriter.convert.planner import ConvertReport, convert_model

__all__ = ["convert_model", "convert_for", "ConvertReport"]
