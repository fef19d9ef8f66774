"""The one half-precision pipeline: what ``convert --dtype``, :func:`rewriter.convert_precision`
and :class:`rewriter.ConvertPrecisionPass` all run, so the same arguments give the same model.

In order: migrate to the opsets asked (``--opset`` / ``--target``: a :class:`TargetSpec`; for a
runtime, its opsets, IR version and kernels), optimize first when asked, measure magnitudes on
calibration inputs when asked (``--calibrate`` / ``--calibration-data``), rewrite to half (fitted
to ``max_error`` when given), and check the runtime's per-op restrictions on the result.
"""

from __future__ import annotations

import dataclasses

import onnx

from rewriter.errors import RewriterError
from rewriter.targets.spec import TargetSpec

__all__ = ["HalfOptions", "HalfResult", "convert_half"]


@dataclasses.dataclass(frozen=True)
class HalfOptions:
    """Every choice of a half-precision rewrite beside the type and the target.

    ``keep_op_types`` / ``keep_nodes``: op types and node names that stay float32 (a str is one
    name). ``optimize``: run the optimizer first. ``calibrate``: measure magnitudes on
    ``calibration_data`` (or on random inputs) and keep float32 what would overflow float16.
    ``max_error``: keep float32 the runs of nodes measured to take an output's relative L2 error
    beyond it. ``calibration_data``: a list of {graph input name: array}. ``input_shapes`` /
    ``input_values`` / ``seed``: the random inputs drawn when no ``calibration_data`` is given.
    ``keep_io_precision``: the first consumers of each float graph input compute in float32 from
    weights stored in half, so the inputs are not rounded to half (:mod:`.io_first`).
    """

    keep_io_types: bool = True
    keep_op_types: tuple | str = ()
    keep_nodes: tuple | str = ()
    optimize: bool = False
    calibrate: bool = False
    max_error: float | None = None
    calibration_data: list | None = None
    input_shapes: dict = dataclasses.field(default_factory=dict)
    input_values: dict = dataclasses.field(default_factory=dict)
    seed: int = 0
    keep_io_precision: bool = False


@dataclasses.dataclass
class HalfResult:
    """What the pipeline did: ``report`` (the :class:`rewriter.precision.PrecisionReport`), the
    migration's :class:`rewriter.convert.ConvertReport` (None when nothing was migrated), the
    summary lines of the steps before the rewrite, and the calibration ``samples`` used."""

    report: object
    migration: object = None
    lines: list = dataclasses.field(default_factory=list)
    samples: list | None = None


def convert_half(model: onnx.ModelProto, dtype: str, spec: TargetSpec | None = None,
                 options: HalfOptions = HalfOptions(), *, base_dir: str | None = None,
                 inferred=None) -> tuple[onnx.ModelProto, HalfResult]:
    """(the model rewritten to ``dtype``, what was done). RewriterError on a bad argument, an
    impossible migration or when the result would break ``spec``'s runtime's restrictions;
    :class:`rewriter.precision.fallback.CannotJudge` when ``max_error`` has nothing real to judge."""
    if options.keep_io_precision and not options.keep_io_types:
        raise RewriterError("keep_io_precision keeps the float32 inputs unrounded: it needs keep_io_types")
    done = HalfResult(None)
    source = model
    if spec is not None and not spec.empty:  # (an IR version alone pins nothing to convert to)
        from rewriter.convert import convert_for

        source, done.migration = convert_for(model, spec, base_dir=base_dir, inferred=inferred, half=dtype)
        done.lines += done.migration.summary_lines()
    if options.optimize:
        from rewriter.optimize import OptimizeOptions, optimize_proto

        source, optimized = optimize_proto(source, OptimizeOptions(), base_dir=base_dir)
        failed = getattr(optimized, "failed_passes", None)
        done.lines.append(f"optimized first: {optimized.nodes_before} -> {optimized.nodes_after} nodes"
                          + (f" (passes that failed and were left out: {', '.join(failed)})" if failed else ""))
    measured = None
    if options.calibrate or options.calibration_data is not None or options.max_error is not None:
        done.samples = _samples(source, options)
        if dtype == "float16" and (options.calibrate or options.calibration_data is not None):
            from rewriter.precision.calibrate import measure

            measured = measure(source, base_dir, samples=done.samples, random=options.calibration_data is None)
    from rewriter.precision.fallback import convert_fitted

    target = spec.runtime if spec is not None else None
    result, done.report = convert_fitted(
        source, dtype, max_error=options.max_error,
        calibration_data=done.samples if options.max_error is not None else None,
        keep_io_types=options.keep_io_types, base_dir=base_dir, keep_op_types=options.keep_op_types,
        keep_nodes=options.keep_nodes, target=target, measured=measured, keep_io_precision=options.keep_io_precision)
    if target is not None and target.rules:  # the half types must still be ones the runtime's ops take
        from rewriter.targets import restriction_violations

        broken = restriction_violations(result, target, base_dir=base_dir)
        if broken:
            raise RewriterError(f"cannot write {dtype} for {target.name}: {len(broken)} node(s) would break its "
                                "restrictions: " + "; ".join(v.line() for v in broken[:20]))
    from rewriter.graph.traversal import opset_version

    nothing = done.report.changes_nothing(opset_version(source.opset_import))
    if nothing:  # (a newer opset would give its nodes the half type: said, instead of an unchanged model)
        raise RewriterError(nothing)
    return result, done


def _samples(source: onnx.ModelProto, options: HalfOptions) -> list:
    """The calibration inputs: those given, else one set of random inputs (refused for
    ``max_error`` when every dynamic dim would take its default size: nothing real to judge)."""
    if options.calibration_data is not None:
        return list(options.calibration_data)
    from rewriter.verify.numerics.random_inputs import random_feeds

    if options.max_error is not None:
        from rewriter.precision.fallback import CannotJudge
        from rewriter.verify.numerics.degenerate import defaulted_dims, defaulted_text

        defaulted = defaulted_dims(source, dict(options.input_shapes), dict(options.input_values))
        if defaulted:
            raise CannotJudge(f"--max-error {options.max_error:g} cannot judge on random inputs: "
                              f"{defaulted_text(defaulted)}")
    return [random_feeds(source, input_shapes=dict(options.input_shapes), input_values=dict(options.input_values),
                         seed=options.seed)]
