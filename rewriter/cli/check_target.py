"""``check --target X``: what stops X from loading the model as it is (the IR version and opsets,
the ops its data says it lacks or computes wrongly, its per-op restrictions, the ops of domains it
has no data for), the forms it was measured to refuse or compute wrongly that ``convert --target
X`` writes otherwise, and what ``convert --target X`` would do about it, planned without writing."""

from __future__ import annotations

import os

__all__ = ["target_check"]


def target_check(args, model) -> dict:
    """The ``target`` part of check's report: {"target", "loads", "blockers", "run_notes", "convert"}."""
    from rewriter.convert.lowering import lowerable_ops
    from rewriter.targets import blockers
    from rewriter.targets.foreign_ops import foreign_lines

    runtime = args.spec.runtime
    base_dir = os.path.dirname(os.path.abspath(args.model))
    found = blockers(model, runtime, base_dir=base_dir) + foreign_lines(model, runtime, lowerable_ops())
    found += measured_form_lines(model, runtime)
    from rewriter.targets.computed_shapes import computed_shapes_note

    notes = runtime.run_notes() + computed_shapes_note(model, runtime.computed_shapes, runtime.name)
    result = {"target": runtime.name, "loads": not found, "blockers": found, "run_notes": notes}
    if found:
        result["convert"] = would(args, model, base_dir)
    return result


def measured_form_lines(model, runtime) -> list[str]:
    """The forms of ``model`` that the release refuses or computes wrongly as written, measured, and
    that ``convert --target`` writes otherwise (the data's ``rewrite_forms``): the rewrites' own
    notes, from a copy rewritten here."""
    if not runtime.rewrite_forms:
        return []
    import onnx

    from rewriter.graph.inferred import LazyInference
    from rewriter.targets.measured_rewrites import rewrite_forms

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    notes = rewrite_forms(copy, runtime.rewrite_forms, runtime.name, LazyInference(copy)())
    return [f"form: {note}" for note in notes]


def would(args, model, base_dir: str) -> dict:
    """What ``convert --target X`` would do (planned, nothing written): {"ok", "lines"}."""
    from rewriter.convert import convert_for
    from rewriter.errors import RewriterError

    try:
        report = convert_for(model, args.spec, base_dir=base_dir, plan_only=True)[1]
    except RewriterError as e:
        return {"ok": False, "lines": [str(e)]}
    if not report.ok:
        lines = [f"refuses it: {len(report.blockers) + len(report.ir_blockers)} thing(s) block it"]
        lines += [b.line() for b in report.blockers[:10]] + list(report.ir_blockers)
        if len(report.blockers) > 10:
            lines.append(f"... and {len(report.blockers) - 10} more (convert --plan lists each)")
        return {"ok": False, "lines": lines}
    lines = [f"opset {report.source_opset} -> {report.target_opset}"] if report.source_opset != report.target_opset \
        else []
    for counts, what in ((report.expanded, "expands into their ONNX function bodies"),
                         (report.decomposed, "decomposes exactly"),
                         (report.inlined_for_runtime, "expands (the runtime would inline them wrongly)")):
        if counts:
            lines.append(f"{what}: " + ", ".join(f"{op} x{n}" for op, n in sorted(counts.items())))
    lines += list(report.target_notes)
    return {"ok": True, "lines": lines or ["nothing to change beyond the opset and IR version"]}
