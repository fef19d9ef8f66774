"""The commands: convert, fold, optimize, check (convert --dtype in :mod:`.precision_command`;
the verification around every rewrite in :mod:`.rewrite_checks`).

Each handler takes the parsed arguments (with the input model already loaded by
:func:`rewriter.cli.runner.preflight`) and returns an exit status.
"""

from __future__ import annotations

import time

from rewriter.cli import freeze_option, summary
from rewriter.cli.rewrite_checks import conversion_text, verify_rewrite
from rewriter.cli.runner import (EXIT_ERROR, EXIT_OK, EXIT_PROBLEM, UsageError, VerificationFailed,
                                 finish_rank_checks, input_layout, one_line, save_output, warn)
from rewriter.errors import RewriterError

__all__ = ["cmd_convert", "cmd_fold", "cmd_optimize", "cmd_check", "verify_rewrite"]


def _lower_first(args, model):
    """``convert --lower-ops``: (the model lowered, the lines saying what was), before any other work;
    alone, the conversion that follows keeps the lowered model's opsets."""
    import dataclasses

    from rewriter.convert.lower_ops import lower_ops
    from rewriter.convert.lowering import parse_ops
    from rewriter.graph import traversal
    from rewriter.targets.spec import TargetSpec

    result, report = lower_ops(model, parse_ops(args.lower_ops))
    if args.spec is None or args.spec.empty:
        args.spec = dataclasses.replace(args.spec or TargetSpec(), opset=traversal.opset_version(result.opset_import))
    ops = ", ".join(f"{o} x{n}" for (_, o), n in sorted(report.lowered.items())) or "nothing to lower"
    for line in report.retyped:  # (a graph output's type changed: ZipMap's maps as their tensor)
        warn(args, line)
    return result, [f"lowered to standard ONNX: {ops}", *report.notes]


def cmd_convert(args) -> int:
    import os

    from rewriter.convert import convert_for

    start = args.run.started or time.perf_counter()  # _run sets it before loading
    model, fixed = _fixed_shapes(args)
    static = _static_line(fixed)
    original, lowered = model, _lower_first(args, model) if getattr(args, "lower_ops", None) else None
    if lowered is not None:  # (verified against the original, the result computes what it does)
        model, static = lowered[0], static + lowered[1]
        args.run.input_inferred = None
    base_dir = os.path.dirname(os.path.abspath(args.model))
    if getattr(args, "plan", False):
        if args.output is not None or getattr(args, "verify", False):
            raise UsageError("--plan writes and verifies nothing: drop -o / --verify, or drop --plan to convert")
        return _plan(args, model, base_dir)
    if args.output is None:
        raise UsageError("convert needs -o OUT (or --plan to only see what it would do)")
    before = summary.model_stats(args.run.input_model, input_layout(args, args.run.input_model).files)
    if getattr(args, "dtype", None):
        from rewriter.cli.precision_command import convert_precision_command

        return convert_precision_command(args, model, base_dir, before, start)
    # with shape verification on, _verify_rewrite runs the strict inference on the result
    t0 = time.perf_counter()
    try:
        result, report = convert_for(model, args.spec, base_dir=base_dir, strict_check=args.no_verify,
                                     inferred=args.run.input_inferred)
    except RewriterError as e:  # with --allow-invalid-input: the input's problem, said as such
        complaint = args.run.input_complaint
        if complaint and complaint in str(e):
            raise RewriterError(f"{args.model}: the input is not a valid ONNX model (onnx.checker: {complaint}); "
                                "convert holds its result to the checker, so it cannot convert it") from None
        raise
    args.run.result_checked = True  # convert_model returns only what the ONNX checker accepts
    from rewriter.convert.lowering.quant_double import double_convs

    args.run.double_convs = double_convs(result, args.spec.runtime.name) if args.spec.runtime else None
    for line in report.warnings:
        warn(args, line)
    # ops decomposed with reordered float sums: --verify scales its tolerance to the output
    from rewriter.convert.decompositions import REORDERED_SUMS

    args.run.reordered_sums = sorted(set(report.decomposed) & REORDERED_SUMS)
    t1 = time.perf_counter()
    verification = verify_rewrite(original, result, args)
    t2 = time.perf_counter()
    written = save_output(args, original, result)
    elapsed = time.perf_counter() - start
    summary.report(args, f"{args.model}: {conversion_text(report, args)}, "
                   f"written to {args.output} in {elapsed:.2f}s", static + report.summary_lines(),
                   before, summary.model_stats(result, written), changes=summary.jsonable(report),
                   verification=verification,
                   timings={"convert_s": t1 - t0, "verify_s": t2 - t1, "total_s": elapsed})
    return EXIT_OK


def _fixed_shapes(args):
    """The input with the dims ``--input-shape`` / ``--fix-dim`` fix (a copy; the input itself
    when neither is given), and what was fixed (one line each)."""
    from rewriter.graph.static_shapes import fixed_copy

    model, lines = fixed_copy(args.run.input_model, dict(getattr(args, "input_shape", None) or []),
                              dict(getattr(args, "fix_dim", None) or []))
    if lines and args.run.input_inferred is not None:
        from rewriter.graph.inferred import LazyInference

        args.run.input_inferred = LazyInference(model)
    return model, lines


def _static_line(lines: list[str]) -> list[str]:
    """The summary line saying what ``--input-shape`` / ``--fix-dim`` fixed (none when nothing was)."""
    return [f"static shapes: {'; '.join(lines)}"] if lines else []


def _plan(args, model, base_dir) -> int:
    """--plan: what the conversion would do per op type, and every blocker; nothing written."""
    import json

    from rewriter.convert import convert_for

    finish_rank_checks(args)
    result, report = convert_for(model, args.spec, base_dir=base_dir, plan_only=True, inferred=args.run.input_inferred)
    if args.run.frozen_inputs and report.ok:
        try:  # an IR 3 result makes them graph inputs again
            from rewriter.graph.input_defaults import check_kept

            check_kept(result, args.run.frozen_inputs)
        except RewriterError as e:
            report.ir_blockers.append(str(e))
    status = EXIT_OK if report.ok else EXIT_ERROR
    frozen, unlocked = freeze_option.summary_line(args), None if report.ok else _unlocks(args, model, report)
    report.notes += [line for line in (frozen, unlocked and freeze_option.unlock_line(unlocked)) if line]
    if getattr(args, "json", False):
        print(json.dumps({"schema": "rewriter.plan/1", "command": "convert --plan", "model": args.model,
                          "exit_status": status, **report.to_dict(),
                          **({"input_defaults": unlocked} if unlocked else {}),
                          **({"frozen_input_defaults": args.run.frozen_inputs} if frozen else {})}, indent=2))
    else:
        blocked = len(report.blockers) + len(report.ir_blockers)
        verdict = "possible" if report.ok else f"impossible: {blocked} thing(s) block it" if report.ir_blockers \
            else f"impossible: {len(report.blockers)} node(s) block it"
        print(f"{args.model}: {conversion_text(report, args)}: {verdict}")
        for line in report.plan_lines():
            print(f"  {line}")
    return EXIT_OK if report.ok else EXIT_ERROR


def _unlocks(args, model, report=None) -> dict | None:
    """What --freeze-input-defaults would unlock in the conversion to ``args.spec`` when it is
    blocked (planned here when ``report`` is None), or None."""
    import os

    from rewriter.convert import convert_for
    from rewriter.graph.input_defaults import input_defaults

    if not input_defaults(model):
        return None
    base_dir = os.path.dirname(os.path.abspath(args.model))
    if report is None:
        report = convert_for(model, args.spec, base_dir=base_dir, plan_only=True)[1]
    return None if report.ok else freeze_option.unlock(model, args.spec, report, base_dir)


# ---------------------------------------------------------------- fold / optimize

def cmd_fold(args) -> int:
    """Fold constant ReduceProd nodes (and remove the constants they alone used), verify, save, report."""
    import os

    from rewriter.fold import fold_model

    start = args.run.started or time.perf_counter()  # _run sets it before loading
    model = args.run.input_model
    base_dir = os.path.dirname(os.path.abspath(args.model))
    before = summary.model_stats(model, input_layout(args, model).files)
    t0 = time.perf_counter()
    result, report = fold_model(model, int_overflow=getattr(args, "int_overflow", "skip"),
                                     base_dir=base_dir)
    t1 = time.perf_counter()
    verification = verify_rewrite(model, result, args)
    t2 = time.perf_counter()
    written = save_output(args, model, result)
    elapsed = time.perf_counter() - start
    after = summary.model_stats(result, written)
    details = report.summary_lines() + [
        f"size: {before.size} -> {after.size} bytes with external data (saved {before.size - after.size}); "
        f"constant data: {report.bytes_before} -> {report.bytes_after} bytes"]
    summary.report(args, f"{args.model}: folded {len(report.folded)} ReduceProd node(s), skipped "
                   f"{len(report.skipped)}" + (f", removed {len(report.removed)} unused item(s)" if report.removed else "")
                   + f"; written to {args.output} in {elapsed:.2f}s", details, before, after,
                   changes=summary.jsonable(report), verification=verification,
                   timings={"fold_s": t1 - t0, "verify_s": t2 - t1, "total_s": elapsed})
    return EXIT_OK


def cmd_optimize(args) -> int:
    """Optimize (rewriter.optimize: exact folds, fusions, CSE, unused removal), verify, save, report."""
    import os

    from rewriter.cli import runner, summary
    from rewriter.optimize import OptimizeOptions, optimize_proto

    start = args.run.started or time.perf_counter()  # _run sets it before loading
    model, fixed = _fixed_shapes(args)
    static = _static_line(fixed)
    before = summary.model_stats(args.run.input_model, input_layout(args, args.run.input_model).files)
    options = OptimizeOptions(fold_limit=args.fold_limit, int_overflow=args.int_overflow,
                              strip_metadata=args.strip_metadata,
                              allow_removing_custom_ops=args.allow_removing_custom_ops)
    t0 = time.perf_counter()
    result, report = optimize_proto(model, options, base_dir=os.path.dirname(os.path.abspath(args.model)))
    optimized = time.perf_counter()
    if not args.no_verify:
        _strict_inference_gate(model, result, args)
    verify_rewrite(model, result, args)
    verified = time.perf_counter()
    written = runner.save_output(args, model, result)
    elapsed = time.perf_counter() - start
    after = summary.model_stats(result, written)
    n0, n1 = report.nodes_before, report.nodes_after
    share = f" (-{100 * (n0 - n1) / n0:.1f}%)" if n0 and n1 < n0 else ""
    headline = f"{args.model}: optimized, {n0} -> {n1} nodes{share}; written to {args.output} in {elapsed:.2f}s"
    summary.report(args, headline, static + _optimize_details(report), before, after,
                   changes=report.to_dict(),
                   verification={"shapes": not args.no_verify, "numerics": bool(getattr(args, "verify", False))},
                   timings={"optimize_s": round(optimized - t0, 4), "verify_s": round(verified - optimized, 4),
                            "total_s": elapsed})
    return EXIT_OK


def _strict_inference_gate(model, result, args) -> None:
    """The result must pass strict, type-checking shape inference when the input does."""
    import onnx

    def strict(m):
        onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)

    try:
        strict(result)
    except Exception as e:  # InferenceError, ValidationError, ...
        try:
            strict(model)
        except Exception:  # the input already fails: verify_rewrite warns about it
            return
        raise VerificationFailed(f"the result fails strict shape inference: {one_line(str(e))}") from None
    args.run.result_strict_ok = True


def _optimize_details(report) -> list[str]:
    if report.kept_input:  # (what was not folded says why, graph inputs' defaults among it)
        return ["nothing got smaller and the rewritten file would have been bigger: written as it was read",
                *_not_folded(report)]
    rp, lines = report.reduce_prod, []
    if rp is not None:  # the model has ReduceProd nodes
        lines.append(f"folded {len(rp.folded)} ReduceProd node(s) with the exact kernel, skipped {len(rp.skipped)}")
        lines += rp.summary_lines()
    if report.folded:
        lines.append("folded constant node(s): " + ", ".join(f"{op} x{n}" for op, n in sorted(report.folded.items())))
    if report.fused:
        lines.append(f"fusion and simplification rules applied: {report.fused}")
    if report.merged:
        lines.append(f"repeated node(s) merged: {report.merged}")
    if report.removed_nodes or report.removed_initializers:
        lines.append(f"removed unused: {report.removed_nodes} node(s), {report.removed_initializers} initializer(s)")
    size = report.skipped_for_size
    if size:
        lines.append(f"folds skipped for size (--fold-limit): {len(size)}")
        lines += [f"  {label}: {reason}" for label, reason in size[:5]]
    return lines + _not_folded(report)


def _not_folded(report) -> list[str]:
    size = report.skipped_for_size
    others = [s for s in report.skipped if s not in size and "ReduceProd" not in s[0]]  # those: above
    lines = [f"not folded: {label}: {reason}" for label, reason in others[:10]]
    if len(others) > 10:
        lines.append(f"not folded: ... and {len(others) - 10} more")
    return lines


# ---------------------------------------------------------------- check / verification

def cmd_check(args) -> int:
    """One row per ReduceProd (or one JSON document, schema rewriter.check/1) and a verdict."""
    import json

    from rewriter.verify.shapes.shape_report import table_lines
    from rewriter.verify.shapes import check_report

    model, fixed = _fixed_shapes(args)
    report = check_report(model)
    target = None
    runtime = args.spec.runtime if getattr(args, "spec", None) is not None else None
    if runtime is not None:
        from rewriter.cli.check_target import target_check

        target = target_check(args, model)
        if not target["loads"]:
            target["input_defaults"] = _unlocks(args, model)
    _check_verdict(args, report, target)
    frozen = freeze_option.summary_line(args)
    if args.json:
        doc = report.to_dict(model=args.model)
        if target is not None:
            doc["target"] = target
        if frozen is not None:
            doc["frozen_input_defaults"] = list(args.run.frozen_inputs)
        if fixed:
            doc["static_shapes"] = fixed
        print(json.dumps(doc, indent=2))
    else:
        print(f"{args.model}:" + (f" {frozen}" if frozen else "") + "".join(f" ({line})" for line in _static_line(fixed)))
        for line in table_lines(report):
            print(line)
        if target is not None:
            if target["loads"]:
                print(f"{target['target']}: nothing stops it from loading the model as it is")
                for line in target["run_notes"]:
                    print(f"  {line}")
            else:
                print(f"{target['target']}: {len(target['blockers'])} thing(s) stop it from loading the model "
                      f"as it is or computing it right (rewriter convert MODEL --target {args.target} -o OUT "
                      f"converts for it):")
                for line in target["blockers"]:
                    print(f"  {line}")
                plan = target["convert"]
                print(f"convert --target {args.target} would " + ("do:" if plan["ok"] else "not help:"))
                for line in plan["lines"]:
                    print(f"  {line}")
                if target.get("input_defaults"):
                    found = target["input_defaults"]
                    print(f"  convert --target {args.target}: blocked by {found['blocked']} node(s); "
                          f"{freeze_option.unlock_line(found)}")
    return EXIT_OK if report.ok and (target is None or target["loads"]) else EXIT_PROBLEM


def _check_verdict(args, report, target) -> None:
    """Why check fails, in one line (a directory run's per-file line and its JSON ``error``)."""
    from rewriter.verify.shapes.shape_report import verdict

    found = [] if report.ok else [verdict(report) + (f": {one_line(str(report.problems[0]))}" if report.problems else "")]
    if target is not None and not target["loads"]:
        found.append(f"{target['target']} cannot load it as it is: {'; '.join(target['blockers'])}")
    args.run.verdict = "; ".join(found) or None
