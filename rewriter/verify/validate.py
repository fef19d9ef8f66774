"""Old import path of :mod:`rewriter.verify.inputs.validate` (input validation)."""

from rewriter.verify.inputs.validate import checker_complaint, validate_model

__all__ = ["validate_model", "checker_complaint"]
