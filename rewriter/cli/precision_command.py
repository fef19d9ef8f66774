"""convert --dtype: the half-precision command (migrate first with --opset/--target, optimize
first with --optimize, calibrate with --calibrate/--calibration-data, then rewrite to half,
verify by relative L2 error, save, report)."""

from __future__ import annotations

import time

from rewriter.cli import summary
from rewriter.cli.rewrite_checks import conversion_text, verify_rewrite
from rewriter.cli.runner import EXIT_OK, VerificationFailed, save_output
from rewriter.errors import RewriterError

__all__ = ["convert_precision_command", "HALF_REL_L2"]


# --verify's default for a half-precision rewrite: relative L2 error per float output
HALF_REL_L2 = 1e-2


def convert_precision_command(args, model, base_dir, before, start) -> int:
    """convert --dtype: migrate first when --opset/--target is given, then rewrite to half."""
    t0 = time.perf_counter()
    lines, source, text = [], model, ""
    target = args.spec.runtime if args.spec is not None else None
    if args.spec is not None and not args.spec.empty:  # (--ir-version alone pins nothing to convert to)
        from rewriter.convert import convert_for

        source, report = convert_for(model, args.spec, base_dir=base_dir, inferred=args.run.input_inferred,
                                     half=args.dtype)
        lines += report.summary_lines()
        text = conversion_text(report, args) + ", "
    if args.optimize:
        from rewriter.optimize import OptimizeOptions, optimize_proto

        source, optimized = optimize_proto(source, OptimizeOptions(), base_dir=base_dir)
        lines.append(f"optimized first: {optimized.nodes_before} -> {optimized.nodes_after} nodes"
                     + (f" (passes that failed and were left out: {', '.join(optimized.failed_passes)})"
                        if getattr(optimized, "failed_passes", None) else ""))
    measured, samples = None, None
    if args.calibrate or args.calibration_data or args.max_error is not None:
        from rewriter.precision.calibrate import load_samples, measure
        from rewriter.verify.numerics.degenerate import defaulted_dims, defaulted_text
        from rewriter.verify.numerics.random_inputs import random_feeds

        defaulted = "" if args.calibration_data else defaulted_dims(source, dict(args.input_shape or []),
                                                                      dict(args.input_value or []))
        if defaulted and args.max_error is not None:  # the search would fit a model to inputs of no real size
            raise VerificationFailed(f"--max-error {args.max_error:g} cannot judge on random inputs: "
                                     f"{defaulted_text(defaulted)}; nothing was written")

        samples = load_samples(source, args.calibration_data) if args.calibration_data else [
            random_feeds(source, input_shapes=dict(args.input_shape or []), input_values=dict(args.input_value or []),
                         seed=args.seed or 0)]
        if args.dtype == "float16" and (args.calibrate or args.calibration_data):
            measured = measure(source, base_dir, samples=samples)

    from rewriter.precision.fallback import CannotJudge, convert_fitted

    try:
        result, report = convert_fitted(source, args.dtype, max_error=args.max_error,
                                        calibration_data=samples if args.max_error is not None else None,
                                        keep_io_types=args.keep_io_types, base_dir=base_dir,
                                        keep_op_types=args.keep_op_types or (), keep_nodes=args.keep_nodes or (),
                                        target=target, measured=measured)
    except CannotJudge as e:  # a reference that checks nothing: verification's exit 1, not bad input
        raise VerificationFailed(f"{e}; nothing was written") from None
    if target is not None and target.rules:  # the half types must still be ones the runtime's ops take
        from rewriter.targets import restriction_violations

        broken = restriction_violations(result, target, base_dir=base_dir)
        if broken:
            raise RewriterError(f"cannot write {args.dtype} for {target.name}: {len(broken)} node(s) would break its "
                                f"restrictions: " + "; ".join(v.line() for v in broken[:20]))
    args.run.result_checked = True  # convert_precision_proto returns only what the checker accepts
    args.run.half_result = args.dtype
    if args.calibration_data:  # --verify on real inputs: the first sample
        args.run.verify_feeds = samples[0]
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
    # (a model already in half, or quantized: said, not claimed as a conversion)
    if report.half_nodes:
        what = f"float32 -> {args.dtype}"
    elif report.applied.weights_stored_half:  # (a runtime without half kernels: float32 arithmetic)
        what = f"float32 -> {args.dtype} weights (no node runs in {args.dtype})"
    else:
        what = f"no node runs in {args.dtype}"
    summary.report(args, f"{args.model}: {text}{what}, written to {args.output} in {elapsed:.2f}s",
                   lines + report.summary_lines(), before, summary.model_stats(result, written),
                   changes={"precision": report.to_dict()}, verification=verification,
                   timings={"convert_s": t1 - t0, "verify_s": t2 - t1, "total_s": elapsed})
    return EXIT_OK
