"""Folding: ReduceProd nodes whose inputs are constant (also through ``Shape`` of static
shapes) replaced by their value, computed by ``rewriter.kernels``."""

from rewriter.fold.reduce_prod import INT_OVERFLOW_MODES, FoldReport, fold_model

__all__ = ["fold_model", "FoldReport", "INT_OVERFLOW_MODES"]
