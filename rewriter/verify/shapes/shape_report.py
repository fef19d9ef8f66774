"""What the shape check reports: problems, one row per ReduceProd, and the whole report
(as a table for people and as JSON for CI, both from the same data).

JSON schema ``rewriter.check/1``::

    {"schema": "rewriter.check/1", "model": str | null, "ok": bool,
     "reduce_prod_count": int, "problem_count": int,
     "nodes": [{"node", "location", "opset_form", "dtype", "input_shape", "axes",
                "keepdims", "noop_with_empty_axes", "expected", "inferred", "declared",
                "output", "status"}],
     "problems": [{"node", "op_type", "location", "output", "kind", "expected",
                   "inferred", "declared", "reason"}]}

A shape is a list of dims (int; str for a symbolic dim; null for an unknown one) or null
when the rank is unknown. ``axes`` is a list, null when absent (all dims) or "dynamic".
``status`` is "ok" or "problem"; ``kind`` is one of "declared", "inferred",
"invalid-axes", "inference-error".
"""

from __future__ import annotations

import dataclasses
import re

from rewriter.verify.shapes.rule import format_shape

__all__ = ["JSON_SCHEMA", "ShapeProblem", "ReduceProdRow", "CheckReport", "table_lines", "verdict"]

JSON_SCHEMA = "rewriter.check/1"


@dataclasses.dataclass(frozen=True)
class ShapeProblem:
    """One inconsistency: which node, where, the three shapes and why they disagree."""

    node: str  # the node's name ('' when unnamed)
    op_type: str
    location: str
    expected: tuple | None  # from the project's rule
    inferred: tuple | None  # from ONNX shape inference
    declared: tuple | None  # from a graph output or value_info
    reason: str
    output: str = ""  # the node's output the problem is about
    kind: str = ""  # declared | inferred | invalid-axes | inference-error

    @property
    def label(self) -> str:
        if not self.node and not self.op_type:
            return self.location
        who = f"node '{self.node}' ({self.op_type})" if self.node else f"unnamed {self.op_type} node"
        if self.output and not self.node:
            who += f" producing '{self.output}'"
        return f"{who} in {self.location}"

    def key(self) -> tuple:
        """Identity across a rewrite, to tell pre-existing problems from new ones.

        Positions of unnamed nodes ('#3') are left out: a rewrite that removes or adds
        nodes shifts them.
        """
        location = re.sub(r" #\d+", "", self.location)
        detail = self.reason if self.kind == "inference-error" and not self.output else ""
        return (location, self.node, self.output, self.kind, detail)

    def __str__(self) -> str:
        return f"{self.label}: {self.reason}"

    def to_dict(self) -> dict:
        return {"node": self.node, "op_type": self.op_type, "location": self.location,
                "output": self.output, "kind": self.kind, "expected": _jshape(self.expected),
                "inferred": _jshape(self.inferred), "declared": _jshape(self.declared),
                "reason": self.reason}


@dataclasses.dataclass
class ReduceProdRow:
    """What ``rewriter check`` shows for one ReduceProd (per call site inside functions)."""

    node: str
    location: str
    opset_form: int | None
    dtype: str | None
    input_shape: tuple | None
    axes: list | None | str  # list when constant, None when absent, "dynamic" otherwise
    keepdims: int
    noop_with_empty_axes: int | None  # None below version 18
    expected: tuple | None
    inferred: tuple | None
    declared: tuple | None
    output: str
    status: str = "ok"  # ok | problem

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("input_shape", "expected", "inferred", "declared"):
            d[k] = _jshape(d[k])
        return d


@dataclasses.dataclass
class CheckReport:
    rows: list[ReduceProdRow]
    problems: list[ShapeProblem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self, model: str | None = None) -> dict:
        return {"schema": JSON_SCHEMA, "model": model, "ok": self.ok, "reduce_prod_count": len(self.rows),
                "problem_count": len(self.problems), "nodes": [r.to_dict() for r in self.rows],
                "problems": [p.to_dict() for p in self.problems]}


def _jshape(shape):
    return None if shape is None else list(shape)


_COLUMNS = ("node", "location", "form", "dtype", "input", "axes", "keepdims", "noop",
            "expected", "inferred", "declared", "status")


def _axes_text(axes) -> str:
    if axes is None:
        return "all"
    if isinstance(axes, str):
        return axes
    return "[" + ",".join(str(a) for a in axes) + "]"


def _row_cells(r: ReduceProdRow) -> tuple[str, ...]:
    return (r.node, r.location, "?" if r.opset_form is None else str(r.opset_form),
            r.dtype or "?", format_shape(r.input_shape), _axes_text(r.axes), str(r.keepdims),
            "-" if r.noop_with_empty_axes is None else str(r.noop_with_empty_axes),
            format_shape(r.expected), format_shape(r.inferred),
            "-" if r.declared is None else format_shape(r.declared), r.status)


def table_lines(report: CheckReport) -> list[str]:
    """The report as an aligned text table, its problems, then a one-line verdict."""
    lines = []
    if report.rows:
        cells = [_COLUMNS] + [_row_cells(r) for r in report.rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(_COLUMNS))]
        for c in cells:
            lines.append("  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip())
    else:
        lines.append("no ReduceProd node")
    for p in report.problems:
        lines.append(f"problem: {p}")
    lines.append(verdict(report))
    return lines


def verdict(report: CheckReport) -> str:
    n = len(report.rows)
    if report.ok:
        return f"OK: {n} ReduceProd node(s) checked, no shape problem"
    return f"FAILED: {len(report.problems)} shape problem(s) ({n} ReduceProd node(s) checked)"
