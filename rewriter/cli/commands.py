"""The commands: convert, fold, optimize, check; and the verification around every rewrite.

Each handler takes the parsed arguments (with the input model already loaded by
:func:`rewriter.cli.runner.preflight`) and returns an exit status.
"""

from __future__ import annotations

import time

from rewriter.cli import summary
from rewriter.cli.runner import (EXIT_ERROR, EXIT_OK, EXIT_PROBLEM, UsageError, VerificationFailed,
                                 finish_rank_checks, input_layout, one_line, save_output, warn)
from rewriter.errors import RewriterError

# After a decomposition that reorders long float sums (rewriter.convert.decompositions.
# REORDERED_SUMS: a DFT as a MatMul), whose error grows with the output's scale (about
# n * eps * max|x|), --verify accepts differences up to this times the output's largest magnitude.
REORDERED_SUMS_ATOL = 1e-4

__all__ = ["cmd_convert", "cmd_fold", "cmd_optimize", "cmd_check", "verify_rewrite"]


def cmd_convert(args) -> int:
    import os

    from rewriter.convert import convert_for

    start = args.run.started or time.perf_counter()  # _run sets it before loading
    model, static = _fixed_shapes(args)
    base_dir = os.path.dirname(os.path.abspath(args.model))
    if getattr(args, "plan", False):
        if args.output is not None or getattr(args, "verify", False):
            raise UsageError("--plan writes and verifies nothing: drop -o / --verify, or drop --plan to convert")
        return _plan(args, model, base_dir)
    if args.output is None:
        raise UsageError("convert needs -o OUT (or --plan to only see what it would do)")
    before = summary.model_stats(args.run.input_model, input_layout(args, args.run.input_model).files)
    if getattr(args, "dtype", None):
        return _convert_precision(args, model, base_dir, before, start)
    # with shape verification on, _verify_rewrite runs the strict inference on the result
    t0 = time.perf_counter()
    try:
        result, report = convert_for(model, args.opset, ml_opset=args.ml_opset, ir_version=args.ir_version,
                                     runtime=args.target, base_dir=base_dir, strict_check=args.no_verify,
                                     inferred=args.run.input_inferred)
    except RewriterError as e:  # with --allow-invalid-input: the input's problem, said as such
        complaint = args.run.input_complaint
        if complaint and complaint in str(e):
            raise RewriterError(f"{args.model}: the input is not a valid ONNX model (onnx.checker: {complaint}); "
                                "convert holds its result to the checker, so it cannot convert it") from None
        raise
    args.run.result_checked = True  # convert_model returns only what the ONNX checker accepts
    # ops decomposed with reordered float sums: --verify scales its tolerance to the output
    from rewriter.convert.decompositions import REORDERED_SUMS

    args.run.reordered_sums = sorted(set(report.decomposed) & REORDERED_SUMS)
    t1 = time.perf_counter()
    verification = verify_rewrite(model, result, args)
    t2 = time.perf_counter()
    written = save_output(args, model, result)
    elapsed = time.perf_counter() - start
    summary.report(args, f"{args.model}: {_conversion(report, args)}, "
                   f"written to {args.output} in {elapsed:.2f}s", static + report.summary_lines(),
                   before, summary.model_stats(result, written), changes=summary.jsonable(report),
                   verification=verification,
                   timings={"convert_s": t1 - t0, "verify_s": t2 - t1, "total_s": elapsed})
    return EXIT_OK


# --verify's default for a half-precision rewrite: relative L2 error per float output
HALF_REL_L2 = 1e-2


def _convert_precision(args, model, base_dir, before, start) -> int:
    """convert --dtype: migrate first when --opset/--target is given, then rewrite to half."""
    from rewriter.precision import convert_precision_proto
    from rewriter.targets import parse_target

    t0 = time.perf_counter()
    lines, source, text = [], model, ""
    target = parse_target(args.target) if args.target else None
    if args.target or args.opset is not None or args.ml_opset is not None:
        from rewriter.convert import convert_for

        source, report = convert_for(model, args.opset, ml_opset=args.ml_opset, ir_version=args.ir_version,
                                     runtime=target, base_dir=base_dir, inferred=args.run.input_inferred,
                                     half=args.dtype)
        lines += report.summary_lines()
        text = _conversion(report, args) + ", "
    if args.optimize:
        from rewriter.optimize import OptimizeOptions, optimize_proto

        source, optimized = optimize_proto(source, OptimizeOptions(), base_dir=base_dir)
        lines.append(f"optimized first: {optimized.nodes_before} -> {optimized.nodes_after} nodes"
                     + (f" (passes that failed and were left out: {', '.join(optimized.failed_passes)})"
                        if getattr(optimized, "failed_passes", None) else ""))
    measured = None
    if args.calibrate or args.calibration_data:
        from rewriter.precision.calibrate import load_samples, measure

        samples = load_samples(source, args.calibration_data) if args.calibration_data else None
        measured = measure(source, base_dir, input_shapes=dict(args.input_shape or []),
                           input_values=dict(args.input_value or []), seed=args.seed or 0, samples=samples)
    result, report = convert_precision_proto(source, args.dtype, keep_io_types=args.keep_io_types,
                                             keep_op_types=args.keep_op_types or (), keep_nodes=args.keep_nodes or (),
                                             target=target, base_dir=base_dir, measured=measured)
    if target is not None and target.rules:  # the half types must still be ones the runtime's ops take
        from rewriter.targets import restriction_violations

        broken = restriction_violations(result, target, base_dir=base_dir)
        if broken:
            raise RewriterError(f"cannot write {args.dtype} for {target.name}: {len(broken)} node(s) would break its "
                                f"restrictions: " + "; ".join(v.line() for v in broken[:20]))
    args.run.result_checked = True  # convert_precision_proto returns only what the checker accepts
    args.run.reordered_sums = []
    t1 = time.perf_counter()
    if getattr(args, "verify", False) and args.rtol is None:
        args.rel_l2 = HALF_REL_L2
    elif getattr(args, "verify", False):
        args.rel_l2 = args.rtol
    verification = verify_rewrite(model, result, args)
    t2 = time.perf_counter()
    written = save_output(args, model, result)
    elapsed = time.perf_counter() - start
    summary.report(args, f"{args.model}: {text}float32 -> {args.dtype}, written to {args.output} in {elapsed:.2f}s",
                   lines + report.summary_lines(), before, summary.model_stats(result, written),
                   changes={"precision": report.to_dict()}, verification=verification,
                   timings={"convert_s": t1 - t0, "verify_s": t2 - t1, "total_s": elapsed})
    return EXIT_OK


def _fixed_shapes(args):
    """The input with the dims ``--input-shape`` / ``--fix-dim`` fix (a copy; the input itself
    when neither is given), and what was fixed (summary lines)."""
    shapes, dims = dict(getattr(args, "input_shape", None) or []), dict(getattr(args, "fix_dim", None) or [])
    if not shapes and not dims:
        return args.run.input_model, []
    import onnx

    from rewriter.graph.static_shapes import fix_shapes

    model = onnx.ModelProto()
    model.CopyFrom(args.run.input_model)
    lines = fix_shapes(model, shapes, dims)
    if args.run.input_inferred is not None:
        from rewriter.graph.inferred import LazyInference

        args.run.input_inferred = LazyInference(model)
    args.run.static_model = model
    return model, [f"static shapes: {'; '.join(lines)}"]


def _conversion(report, args) -> str:
    """'opset 13 -> 18', with the ai.onnx.ml opsets when they change and the runtime targeted."""
    text = f"opset {report.source_opset} -> {report.target_opset}" if report.source_opset is not None else ""
    if report.source_ml_opset is not None and report.target_ml_opset != report.source_ml_opset:
        text += f"{', ' if text else ''}ai.onnx.ml {report.source_ml_opset} -> {report.target_ml_opset}"
    if report.source_opset is None and report.target_opset is not None and getattr(args, "opset", None) is not None:
        # a model importing only ai.onnx.ml, for a runtime of the opset asked for
        text = (text or f"ai.onnx.ml {report.source_ml_opset} kept") + f" for opset {report.target_opset}"
    if getattr(args, "target", None):
        text += f" for {args.target}"
    return text or "nothing to convert"


def _plan(args, model, base_dir) -> int:
    """--plan: what the conversion would do per op type, and every blocker; nothing written."""
    import json

    from rewriter.convert import convert_for

    finish_rank_checks(args)
    _, report = convert_for(model, args.opset, ml_opset=args.ml_opset, ir_version=args.ir_version,
                            runtime=args.target, base_dir=base_dir, plan_only=True,
                            inferred=args.run.input_inferred)
    status = EXIT_OK if report.ok else EXIT_ERROR
    if getattr(args, "json", False):
        print(json.dumps({"schema": "rewriter.plan/1", "command": "convert --plan", "model": args.model,
                          "exit_status": status, **report.to_dict()}, indent=2))
    else:
        blocked = len(report.blockers) + len(report.ir_blockers)
        verdict = "possible" if report.ok else f"impossible: {blocked} thing(s) block it" if report.ir_blockers \
            else f"impossible: {len(report.blockers)} node(s) block it"
        print(f"{args.model}: {_conversion(report, args)}: {verdict}")
        for line in report.plan_lines():
            print(f"  {line}")
    return EXIT_OK if report.ok else EXIT_ERROR


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
    model, static = _fixed_shapes(args)
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
    if report.kept_input:
        return ["nothing got smaller and the rewritten file would have been bigger: written as it was read"]
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
    others = [s for s in report.skipped if s not in size and "ReduceProd" not in s[0]]  # those: above
    lines += [f"not folded: {label}: {reason}" for label, reason in others[:10]]
    if len(others) > 10:
        lines.append(f"not folded: ... and {len(others) - 10} more")
    return lines


# ---------------------------------------------------------------- check / verification

def cmd_check(args) -> int:
    """One row per ReduceProd (or one JSON document, schema rewriter.check/1) and a verdict."""
    import json

    from rewriter.verify.shapes.shape_report import table_lines
    from rewriter.verify.shapes import check_report

    report = check_report(args.run.input_model)
    target = None
    if getattr(args, "target", None):
        from rewriter.targets import blockers, parse_target

        import os

        runtime = parse_target(args.target)
        found = blockers(args.run.input_model, runtime, base_dir=os.path.dirname(os.path.abspath(args.model)))
        target = {"target": runtime.name, "loads": True, "blockers": found}
        target["loads"] = not target["blockers"]
    if args.json:
        doc = report.to_dict(model=args.model)
        if target is not None:
            doc["target"] = target
        print(json.dumps(doc, indent=2))
    else:
        print(f"{args.model}:")
        for line in table_lines(report):
            print(line)
        if target is not None:
            if target["loads"]:
                print(f"{target['target']}: nothing stops it from loading the model as it is")
            else:
                print(f"{target['target']}: {len(target['blockers'])} thing(s) stop it from loading the model "
                      f"as it is (rewriter convert MODEL --target {args.target} -o OUT converts for it):")
                for line in target["blockers"]:
                    print(f"  {line}")
    return EXIT_OK if report.ok and (target is None or target["loads"]) else EXIT_PROBLEM


def verify_rewrite(original, rewritten, args) -> dict:
    """Shape-verify (and with --verify, numerically verify) a rewrite before it is written.

    Shape problems the input already had (and the result kept) are printed as warnings; one the rewrite
    introduced, or a numerical mismatch, raises VerificationFailed (exit 1, nothing written).
    The input is only verified when the result has a problem (to tell old from new): a
    clean result costs one shape inference, not two.

    Returns what was verified, for ``--json``: ``{"shapes": {...} | None, "numerics": {...} | None}``.
    """
    import os

    done: dict = {"shapes": None, "numerics": None}
    if not getattr(args, "no_verify", False):
        from rewriter.verify.shapes import verify_shapes, verify_shapes_with_ranks

        after, rank_of = verify_shapes_with_ranks(rewritten)
        finish_rank_checks(args, rank_of)  # the input's own problems first: exit 2, not 1
        before = verify_shapes(original) if after else []
        known = {p.key() for p in before}
        inherited = [p for p in after if p.key() in known]
        for p in inherited:
            warn(args, f"shape problem already in the input: {one_line(str(p))}")
        new = [p for p in after if p.key() not in known]
        done["shapes"] = {"ok": not new, "problems_in_input": [one_line(str(p)) for p in inherited],
                          "problems_introduced": [one_line(str(p)) for p in new]}
        if new:
            shown = "; ".join(one_line(str(p)) for p in new[:3])
            more = f" (and {len(new) - 3} more)" if len(new) > 3 else ""
            hint = ""
            if before and all(p.kind == "inference-error" for p in new):  # maybe the input's problem, moved
                hint = (f" (the input has shape problems too, which may have taken this form: "
                        f"{one_line(str(before[0]))})")
            raise VerificationFailed(f"the rewrite introduced {len(new)} shape problem(s): {shown}{more}{hint}")
        # verify_shapes ran ONNX's strict inference: the final gate's full check need not repeat it
        args.run.result_strict_ok = not any(getattr(p, "kind", "") == "inference-error" for p in after)
    else:
        finish_rank_checks(args)
    if getattr(args, "verify", False):
        from rewriter.verify.numerics import verify_numerics

        base = os.path.dirname(os.path.abspath(args.model))
        report = verify_numerics(original, rewritten, seed=getattr(args, "seed", None) or 0,
                                 rtol=getattr(args, "rtol", None), atol=getattr(args, "atol", None),
                                 input_shapes=dict(getattr(args, "input_shape", None) or []),
                                 input_values=dict(getattr(args, "input_value", None) or []),
                                 base_dirs=(base, base),
                                 scale_atol=REORDERED_SUMS_ATOL if args.run.reordered_sums
                                 and getattr(args, "atol", None) is None else 0.0,
                                 rel_l2=getattr(args, "rel_l2", None))
        done["numerics"] = report.to_dict()
        args.run.result_ort_ok = report.ok and report.backend_rewritten == "onnxruntime"  # the gate need not ask again
        if not getattr(args, "json", False) and not getattr(args, "quiet", False):
            for line in report.summary_lines():
                print(line)
        if not report.ok:
            bad = [o.line() for o in report.outputs if not o.ok] or [report.error]
            hint = ""
            if (getattr(args, "int_overflow", None) == "wrap" and "onnxruntime" in report.backend_rewritten
                    and any(o.reason == "integers differ" for o in report.outputs)):
                hint = ("; ONNX Runtime saturates integer overflow where --int-overflow wrap wrapped it: "
                        "--int-overflow saturate folds what ONNX Runtime computes")
            raise VerificationFailed(f"numerical verification failed: {'; '.join(bad)}{hint}")
    return done
