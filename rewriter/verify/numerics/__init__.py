"""Numerics: run the original and the rewritten model on the same random inputs and compare
every output (``compare.py``); the inputs (``random_inputs.py``); ONNX Runtime in a forked child,
so that a native crash is a reason, not the end of the process (``isolated.py``); the report
(``report.py``) and when a check checks nothing (``degenerate.py``)."""

from rewriter.verify.numerics.compare import TOLERANCES, NumericsReport, OutputComparison, verify_numerics
from rewriter.verify.numerics.random_inputs import SYMBOL_SIZE, axes_from_inputs, random_inputs

__all__ = ["verify_numerics", "NumericsReport", "OutputComparison", "TOLERANCES", "random_inputs",
           "axes_from_inputs", "SYMBOL_SIZE"]
