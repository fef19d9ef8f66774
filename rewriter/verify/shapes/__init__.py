"""Shape checks: every ReduceProd output's shape by the project's own rule (``rule.py``) against
ONNX's strict shape inference (``inference.py``) and the declared shapes; ``check.py`` runs them,
``report.py`` is what ``rewriter check`` prints.

``verify_reduce_prod_shapes`` (``rewriter.verify_reduce_prod_shapes`` in the public API) returns
the problems; ``check_report`` one row per ReduceProd too. ``verify_shapes`` and
``verify_shapes_with_ranks`` are the old names. Imported on first use, so that the converter,
which formats shapes with ``rule.format_shape``, does not load the checks.
"""

from __future__ import annotations

import importlib

__all__ = ["verify_reduce_prod_shapes", "verify_reduce_prod_shapes_with_ranks", "check_report", "CheckReport",
           "ReduceProdRow", "ShapeProblem", "JSON_SCHEMA", "verify_shapes", "verify_shapes_with_ranks"]


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("rewriter.verify.shapes.check"), name)


def __dir__():
    return sorted(__all__)
