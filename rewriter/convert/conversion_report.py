"""What a conversion did (or, for a plan, would do), and the error naming every node that blocks one."""

from __future__ import annotations

import collections
import dataclasses

from rewriter.convert.blockers import Blocker
from rewriter.errors import ConversionError

__all__ = ["ConvertReport", "ConversionBlocked", "what", "MAX_LISTED"]

MAX_LISTED = 20


class ConversionBlocked(ConversionError):
    """Some nodes cannot be converted; ``blockers`` lists every one."""

    def __init__(self, blockers: list[Blocker], what: str):
        self.blockers = blockers
        self.what = what
        shown = "; ".join(b.line() for b in blockers[:MAX_LISTED])
        more = f"; and {len(blockers) - MAX_LISTED} more" if len(blockers) > MAX_LISTED else ""
        hint = " (convert --plan lists each one on its own line)" if len(blockers) > 1 else ""
        super().__init__(f"cannot convert {what}: {len(blockers)} node(s) block it{hint}: {shown}{more}")


def what(source, target, source_ml, target_ml) -> str:
    """'from opset 18 to 16', with the ai.onnx.ml opsets when they change."""
    parts = [f"from opset {source} to {target}"] if source is not None else []
    if source_ml is not None and target_ml is not None and target_ml != source_ml:
        parts.append(f"{'and ' if parts else 'from '}ai.onnx.ml opset {source_ml} to {target_ml}")
    return " ".join(parts) or f"opset {target}"


@dataclasses.dataclass
class ConvertReport:
    """What a conversion did (or, for a plan, would do)."""

    source_opset: int
    target_opset: int
    own: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    changes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # what adapters did
    delegated: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    type_only: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    expanded: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    # op -> nodes replaced by an exact decomposition (ops without a function body)
    decomposed: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    # op -> half-type nodes expanded because the runtime targeted would inline their body wrongly
    inlined_for_runtime: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    steps: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # (op, how) -> steps
    # the steps of nodes the conversion made (function bodies, rewrites' nodes): (op, how) -> steps
    derived_steps: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    nodes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes seen
    blockers: list = dataclasses.field(default_factory=list)
    version_converter_called: bool = False
    ir_changes: list = dataclasses.field(default_factory=list)  # what lowering the IR version rewrote
    ir_blockers: list = dataclasses.field(default_factory=list)  # why the IR version cannot be reached
    source_ml_opset: int | None = None  # the ai.onnx.ml opsets, when the model imports the domain
    target_ml_opset: int | None = None
    # for a runtime target: whose data, what its per-op restrictions made the conversion rewrite
    target_notes: list = dataclasses.field(default_factory=list)
    # the target_notes that say a form was rewritten for what the release refuses or computes wrongly
    target_forms: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)  # what the conversion learned or chose, in words
    # what the user must know of the result: a graph output whose type changed (ZipMap's maps as a tensor)
    warnings: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.blockers and not self.ir_blockers

    def rewrote_for_target(self, notes) -> None:
        """Notes of forms rewritten for the target (what it refuses or computes wrongly as they were):
        among the target notes, and kept apart for ``check --target``."""
        notes = list(notes)
        self.target_notes.extend(notes)
        self.target_forms.extend(notes)

    def summary_lines(self) -> list[str]:
        lines = []
        if self.own:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.own.items()))
            lines.append(f"converted by rewriter's adapters: {ops}")
            lines += [f"  {kind}: {n}" for kind, n in sorted(self.changes.items())]
        for counts, label in (
                (self.expanded, "newer than the target, expanded into their ONNX function bodies"),
                (self.decomposed, "newer than the target, decomposed exactly into older ops"),
                (self.inlined_for_runtime, f"half-precision nodes expanded into their ONNX function bodies for "
                                           f"opset {self.target_opset}, which the runtime targeted would inline wrongly"),
                (self.type_only, "type-only schema changes (kept as they are)"),
                (self.delegated, "converted by onnx.version_converter (its adapter known correct)")):
            if counts:
                lines.append(f"{label}: " + ", ".join(f"{op} x{n}" for op, n in sorted(counts.items())))
        lines += [f"for the IR version: {change}" for change in self.ir_changes]
        lines += [f"for the target: {note}" for note in self.target_notes]
        lines += self.notes
        return lines or ["nothing to change"]

    def plan_rows(self) -> list[dict]:
        """Per op type: how many nodes, and how many steps were taken each way."""
        rows = []
        for op in sorted(self.nodes):
            how = {kind: n for (o, kind), n in self.steps.items() if o == op}
            rows.append({"op": op, "nodes": self.nodes[op], "steps": dict(sorted(how.items())),
                         "blocked": sum(1 for b in self.blockers if b.op == op)})
        return rows

    def derived_rows(self) -> list[dict]:
        """Per op type of the nodes the conversion made (expanded function bodies, nodes inserted
        by rewrites): how many steps were taken each way."""
        ops = sorted({op for op, _ in self.derived_steps})
        return [{"op": op, "steps": dict(sorted((kind, n) for (o, kind), n in self.derived_steps.items() if o == op))}
                for op in ops]

    def plan_lines(self) -> list[str]:
        """The plan as text: one line per op type of the model's nodes (their steps), one per op
        type of the nodes the conversion makes, then the blockers (up to MAX_LISTED)."""
        lines = []
        for row in self.plan_rows():
            how = ", ".join(f"{kind} x{n}" for kind, n in row["steps"].items()) or "unchanged"
            lines.append(f"{row['op']}: {row['nodes']} node(s): {how}")
        derived = self.derived_rows()
        if derived:
            lines.append("steps of the nodes the conversion makes (function bodies, rewrites):")
            for row in derived:
                lines.append(f"  {row['op']}: " + ", ".join(f"{kind} x{n}" for kind, n in row["steps"].items()))
        if self.blockers:
            lines.append(f"blocked by {len(self.blockers)} node(s):")
            lines += [f"  {b.line()}" for b in self.blockers[:MAX_LISTED]]
            if len(self.blockers) > MAX_LISTED:
                lines.append(f"  ... and {len(self.blockers) - MAX_LISTED} more")
        lines += [f"IR version: {change}" for change in self.ir_changes]
        lines += [f"blocked by the IR version: {why}" for why in self.ir_blockers]
        lines += [f"target: {note}" for note in self.target_notes]
        lines += self.notes
        lines += [f"warning: {w}" for w in self.warnings]
        return lines

    def to_dict(self) -> dict:
        return {"source_opset": self.source_opset, "target_opset": self.target_opset, "ok": self.ok,
                "ops": self.plan_rows(), "made_by_the_conversion": self.derived_rows(),
                "blockers": [b.to_dict() for b in self.blockers],
                "ir_blockers": list(self.ir_blockers), "ir_changes": list(self.ir_changes),
                "changes": dict(self.changes), "version_converter_called": self.version_converter_called,
                "target_notes": list(self.target_notes), "notes": list(self.notes), "warnings": list(self.warnings)}
