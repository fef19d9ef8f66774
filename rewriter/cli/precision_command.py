"""convert --dtype: the half-precision command (migrate first with --opset/--target, optimize
first with --optimize, calibrate with --calibrate/--calibration-data, then rewrite to half,
verify by relative L2 error, save, report)."""

from __future__ import annotations

import time

from rewriter.cli import summary
from rewriter.cli.rewrite_checks import conversion_text, verify_rewrite
from rewriter.cli.runner import EXIT_OK, VerificationFailed, save_output, warn

__all__ = ["convert_precision_command", "HALF_REL_L2"]


# --verify's default for a half-precision rewrite: relative L2 error per float output
HALF_REL_L2 = 1e-2


def convert_precision_command(args, model, base_dir, before, start) -> int:
    """convert --dtype: migrate first when --opset/--target is given, then rewrite to half."""
    t0 = time.perf_counter()
    from rewriter.precision.calibrate import load_samples
    from rewriter.precision.fallback import CannotJudge
    from rewriter.precision.pipeline import HalfOptions, convert_half

    samples = None
    if args.calibration_data:  # read against the model the rewrite starts from (same inputs after migration)
        samples = load_samples(model, args.calibration_data)
    options = HalfOptions(keep_io_types=args.keep_io_types, keep_op_types=args.keep_op_types or (),
                          keep_nodes=args.keep_nodes or (), optimize=bool(args.optimize),
                          calibrate=bool(args.calibrate), max_error=args.max_error, calibration_data=samples,
                          input_shapes=dict(args.input_shape or []), input_values=dict(args.input_value or []),
                          seed=args.seed or 0, keep_io_precision=bool(getattr(args, "keep_io_precision", False)))
    try:
        result, done = convert_half(model, args.dtype, args.spec, options, base_dir=base_dir,
                                    inferred=args.run.input_inferred)
    except CannotJudge as e:  # a reference that checks nothing: verification's exit 1, not bad input
        raise VerificationFailed(f"{e}; nothing was written") from None
    report, lines = done.report, list(done.lines)
    text = conversion_text(done.migration, args) + ", " if done.migration is not None else ""
    for line in done.migration.warnings if done.migration is not None else ():  # (ZipMap's maps as a tensor)
        warn(args, line)
    samples = done.samples
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
