"""Folding: ReduceProd nodes whose inputs are constant (also through ``Shape`` of static
shapes) replaced by their value, computed by ``rewriter.kernels``.

``fold_model`` folds a ModelProto; ``reduce_prod_value`` is the value itself under a fold policy
(:data:`FOLD_INT_OVERFLOW_POLICIES`, each computed by one kernel mode, :data:`KERNEL_MODE`), which
the optimizer's constant folder uses too; a ReduceProd this fold judged and left is marked
``SETTLED`` for it. ``INT_OVERFLOW_MODES`` is the policies' old name.
"""

from rewriter.fold.reduce_prod_fold import INT_OVERFLOW_MODES, FoldReport, fold_model
from rewriter.fold.value import FOLD_INT_OVERFLOW_POLICIES, KERNEL_MODE, SETTLED, NotFoldable, reduce_prod_value

__all__ = ["fold_model", "FoldReport", "FOLD_INT_OVERFLOW_POLICIES", "KERNEL_MODE", "NotFoldable",
           "reduce_prod_value", "SETTLED", "INT_OVERFLOW_MODES"]
