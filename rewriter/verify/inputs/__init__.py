"""Input validation: refuse a bad input model up front with one clear error naming the node,
before any work (``validate.py``: structure, schemas, references, the checker's complaint;
``reduce_prod.py``: every ReduceProd's axes and flags; ``utf8.py``: every string is UTF-8)."""

from rewriter.verify.inputs.validate import checker_complaint, validate_model

__all__ = ["validate_model", "checker_complaint"]
