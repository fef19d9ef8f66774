"""The one door to onnxscript's private constant folder (``onnxscript.optimizer._constant_folding``).

rewriter's constant folding subclasses onnxscript 0.7's ``FoldConstantsPass`` and overrides
private methods of it (per-node inference, the tensor for a folded value, should_fold), and
evaluates integer ops with its reference evaluator. Those are not public API: pyproject pins
``onnxscript>=0.7.2,<0.8`` for them, and tests/optimize checks the behaviour they carry (a
change in onnxscript shows as a failing fold test, not a silent difference). Every use goes
through the names below, so a new onnxscript release is adapted here.
"""

from __future__ import annotations

from onnxscript.optimizer import _constant_folding as _private

__all__ = ["BaseFoldConstantsPass", "DEFAULT_CONSTANT_FOLD_BLACKLIST", "Replacement", "numpy_value",
           "reference_evaluator"]

BaseFoldConstantsPass = _private.FoldConstantsPass
DEFAULT_CONSTANT_FOLD_BLACKLIST = _private.DEFAULT_CONSTANT_FOLD_BLACKLIST
Replacement = _private.Replacement
numpy_value = _private._get_numpy_value  # noqa: SLF001 - the folder's own reading of a value
reference_evaluator = _private._reference_evaluator  # noqa: SLF001 - onnx.reference, wrapped by onnxscript
