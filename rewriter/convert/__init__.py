"""Opset conversion: the planner (``planner.py``: opset, IR version, ``ai.onnx.ml`` opset and
runtime targets via ``for_target.py``), the per-step engine (``engine.py``: adapter registry,
node context, type-only steps; ops the target lacks expanded into their function bodies or
exact decompositions, ``expansion.py`` and ``decompositions/``), delegation to onnx's
converter where its adapter is correct, and the adapters by op family (``adapters/``)."""

from rewriter.convert.for_target import convert_for
from rewriter.convert.planner import ConvertReport, convert_model

__all__ = ["convert_model", "convert_for", "ConvertReport"]
