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
    plan = _plan(args, model, base_dir)
    if not found:  # what the op versions do not show: the forms the plan blocks or writes otherwise
        found = plan_findings(plan, runtime, model)
    result = {"target": runtime.name, "loads": not found, "blockers": found, "run_notes": notes}
    if found:
        result["convert"] = would(plan)
    return result


def plan_findings(plan, runtime, model) -> list[str]:
    """What ``convert --target`` plans for ``model`` beyond the op versions, as check's lines: the
    nodes it names (measured forms the release refuses or computes wrongly, which it cannot write
    otherwise), the ops it expands or decomposes (an op version the release runs only with constant
    inputs: OpenVINO's STFT-17), the forms it writes otherwise (OpenVINO's QuantizeLinear as integer
    arithmetic), and tract's anonymous input dims; not its notes on how to run the result."""
    from rewriter.targets import runtime_forms as forms

    report, error = plan
    if report is None:
        return [f"named by convert: {error}"]
    lines = [f"named by convert: {b.line()}" for b in report.blockers[:10]] + list(report.ir_blockers)
    if len(report.blockers) > 10:
        lines.append(f"... and {len(report.blockers) - 10} more node(s) named by convert (convert --plan lists each)")
    lines += _expansions(report, ("expanded by convert", "decomposed by convert",
                                  "expanded by convert (the runtime would inline them wrongly)"))
    lines += [f"form: {note}" for note in report.target_forms]
    if runtime.runtime in forms.NAMES_DIMS:
        import onnx

        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        lines += [f"form: {note}" for note in forms.name_anonymous_dims(copy)]
    return lines


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


def _plan(args, model, base_dir: str):
    """(the plan's ConvertReport, its model), or (None, the error's text) when convert refuses."""
    from rewriter.convert import convert_for
    from rewriter.errors import RewriterError

    try:
        result, report = convert_for(model, args.spec, base_dir=base_dir, plan_only=True)
    except RewriterError as e:
        return None, str(e)
    return report, result


def would(plan) -> dict:
    """What ``convert --target X`` would do (planned, nothing written): {"ok", "lines"}."""
    report, result = plan
    if report is None:
        return {"ok": False, "lines": [result]}
    if not report.ok:
        lines = [f"refuses it: {len(report.blockers) + len(report.ir_blockers)} thing(s) block it"]
        lines += [b.line() for b in report.blockers[:10]] + list(report.ir_blockers)
        if len(report.blockers) > 10:
            lines.append(f"... and {len(report.blockers) - 10} more (convert --plan lists each)")
        return {"ok": False, "lines": lines}
    lines = [f"opset {report.source_opset} -> {report.target_opset}"] if report.source_opset != report.target_opset \
        else []
    lines += _expansions(report, ("expands into their ONNX function bodies", "decomposes exactly",
                                  "expands (the runtime would inline them wrongly)"))
    lines += list(report.target_notes)
    return {"ok": True, "lines": lines or ["nothing to change beyond the opset and IR version"]}


def _expansions(report, words: tuple) -> list[str]:
    """One line per kind of expansion the plan makes (function bodies, decompositions, inlined for
    the runtime), each said with its entry of ``words``."""
    kinds = (report.expanded, report.decomposed, report.inlined_for_runtime)
    return [f"{what}: " + ", ".join(f"{op} x{n}" for op, n in sorted(counts.items()))
            for counts, what in zip(kinds, words) if counts]
