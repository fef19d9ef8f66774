"""What every rewriting command does around its rewrite: the verification before writing
(shapes always, numerics with --verify) and the headline's "from opset A to B" words."""

from __future__ import annotations

from rewriter.cli.runner import VerificationFailed, finish_rank_checks, one_line, warn

__all__ = ["verify_rewrite", "conversion_text", "REORDERED_SUMS_ATOL"]

# After a decomposition that reorders long float sums (rewriter.convert.decompositions.
# REORDERED_SUMS: a DFT as a MatMul), whose error grows with the output's scale (about
# n * eps * max|x|), --verify accepts differences up to this times the output's largest magnitude.
REORDERED_SUMS_ATOL = 1e-4


def conversion_text(report, args) -> str:
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


def verify_rewrite(original, rewritten, args) -> dict:
    """Shape-verify (and with --verify, numerically verify) a rewrite before it is written.

    Shape problems the input already had (and the result kept) are printed as warnings; one the rewrite
    introduced, or a numerical mismatch, raises VerificationFailed (exit 1, nothing written). A
    numerical check that checked nothing (a degenerate reference, every dynamic dim defaulted) is
    a warning, as an inherited shape problem is: not a pass, and not a finding (exit 0).
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
                                 rel_l2=getattr(args, "rel_l2", None),
                                 feeds=getattr(args.run, "verify_feeds", None),
                                 feeds_are="the first --calibration-data sample")
        done["numerics"] = report.to_dict()
        # the gate need not ask again
        args.run.result_ort_ok = not report.failed and report.backend_rewritten == "onnxruntime"
        if not getattr(args, "json", False) and not getattr(args, "quiet", False):
            for line in report.summary_lines():
                print(line)
        if not report.failed and report.not_verified:  # not a pass, not a finding: said, and written
            warn(args, f"numerical check not verified (written all the same): {report.not_verified_text()}")
        if report.failed:
            bad = [o.line() for o in report.outputs if o.mismatch] or [report.error]
            hint = ""
            if (getattr(args, "int_overflow", None) == "wrap" and "onnxruntime" in report.backend_rewritten
                    and any(o.reason == "integers differ" for o in report.outputs)):
                hint = ("; ONNX Runtime saturates integer overflow where --int-overflow wrap wrapped it: "
                        "--int-overflow saturate folds what ONNX Runtime computes")
            elif args.run.half_result and any(o.mismatch and o.floor is not None and o.floor * 2 > args.rel_l2
                                              for o in report.outputs):  # the input's rounding alone is the problem
                hint = ("; the inputs rounded to half alone move the float32 model by its floor: --keep-io-precision "
                        "computes the nodes reading them in float32")
            elif args.run.half_result and getattr(args, "max_error", None) is None:
                hint = ("; --max-error R (measured on --calibration-data) keeps float32 the nodes whose half "
                        "precision takes an output beyond R")
            raise VerificationFailed(f"numerical verification failed: {'; '.join(bad)}{hint}")
    return done
