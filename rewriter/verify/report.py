"""Old import path of :mod:`rewriter.verify.shapes.report` (what the shape check reports)."""

from rewriter.verify.shapes.report import (
    JSON_SCHEMA,
    ShapeProblem,
    ReduceProdRow,
    CheckReport,
    table_lines,
    verdict,
)

__all__ = ["JSON_SCHEMA", "ShapeProblem", "ReduceProdRow", "CheckReport", "table_lines", "verdict"]
