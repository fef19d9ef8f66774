"""The optimize pipeline on an ``onnx_ir.Model``, and :class:`OptimizePass`, the whole of it as one pass."""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import onnx_ir as ir
from onnx_ir.passes.common import LiftConstantsToInitializersPass

from rewriter.optimize.optimize_report import OptimizeOptions, OptimizeReport
from rewriter.optimize.batched_gemm import BatchedMatMulAddToGemmPass
from rewriter.optimize.batchnorm_parameters import LiftBatchNormParametersPass
from rewriter.optimize.conv_affine import FoldChannelAffineIntoConvPass
from rewriter.optimize.constant_folding import FoldConstantsPass, hide_overridable, restore
from rewriter.optimize.input_defaults import freeze_ir_input_defaults
from rewriter.optimize.cse import CommonSubexpressionEliminationPass
from rewriter.optimize.dedupe import MergeEqualInitializersPass
from rewriter.optimize.fusions import FusionsPass
from rewriter.optimize.elementwise_reshapes import RemoveElementwiseReshapesPass
from rewriter.optimize.layout_before_reshape import RemoveLayoutOpsBeforeReshapePass
from rewriter.optimize.merge_slices import MergeSlicesPass
from rewriter.optimize.merge_unsqueezes import MergeUnsqueezesPass
from rewriter.optimize.metadata import DropToolMetadataPass, StripMetadataPass
from rewriter.optimize.neutral_constants import RemoveNeutralArithmeticPass
from rewriter.optimize.ir3_initializers import InitializersToConstantsPass
from rewriter.optimize.static_noops import RemoveStaticNoOpsPass
from rewriter.optimize.resize_slice import RemoveUpsampleSubsamplePass
from rewriter.optimize.shape_arithmetic import FoldShapeArithmeticPass
from rewriter.optimize.scopes import graphs_and_functions
from rewriter.optimize.unit_reshapes import FoldUnitReshapesIntoTransposePass
from rewriter.optimize.remove_unused import RemoveUnusedPass

__all__ = ["run_pipeline", "OptimizePass"]

logger = logging.getLogger(__name__)


def _all_nodes(model: ir.Model):
    for graph in graphs_and_functions(model):
        yield from graph


# Their warnings describe decisions the pipeline made on purpose (an output initializer not
# deduplicated, a node left unfolded); rewriter reports skips itself.
_QUIET = ("onnx_ir", "onnxscript")


@contextlib.contextmanager
def _quiet_libraries():
    loggers = [logging.getLogger(name) for name in _QUIET]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        if lg.getEffectiveLevel() < logging.ERROR and not logger.isEnabledFor(logging.DEBUG):
            lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def run_pipeline(model: ir.Model, options: OptimizeOptions, report: OptimizeReport,
                 keep: frozenset[str] = frozenset(), *, fresh=None) -> bool:
    """Optimize ``model`` in place; fills ``report``; returns whether anything changed.

    A pass that raises, or leaves a node reading a value nothing makes any more, is reported
    (``report.failed_passes``, and a warning logged) and its changes are undone: the pipeline
    starts again from the model as it came, without that pass. ``fresh()`` returns a new copy of
    ``model`` as it came (the optimizer rebuilds it from the ModelProto); without it, the model
    is cloned once before the passes run (tensors are shared, not copied).
    """
    if fresh is None:
        backup = model.clone()
        fresh = backup.clone
    excluded: set[str] = set()
    with _quiet_libraries():
        while True:
            try:
                return _run(model, options, report, keep, excluded)
            except PassFailed as failure:
                report.failed_passes.append((failure.name, failure.reason))
                logger.warning("the %s pass failed and is left out (its changes undone): %s",
                               failure.name, failure.reason)
                _replace_contents(model, fresh())
                _clear_counts(report)
                if failure.name in _ESSENTIAL:  # the result would be invalid without it: as it came
                    return False
                excluded.add(failure.name)


class PassFailed(Exception):
    """The pass ``name`` raised, or left the model invalid; ``reason`` says how."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name, self.reason = name, reason


# without it an IR < 4 model would keep the initializers the folds made, which it cannot hold
_ESSENTIAL = frozenset({"InitializersToConstantsPass"})
# what _run fills in the report, started again when the pipeline is
_COUNTS = ("folded", "skipped", "fused", "merged", "removed_nodes", "removed_initializers", "rounds")


def _clear_counts(report: OptimizeReport) -> None:
    blank = OptimizeReport()
    for name in _COUNTS:
        setattr(report, name, getattr(blank, name))


def _replace_contents(model: ir.Model, source: ir.Model) -> None:
    """``model`` (the caller's object: the pipeline works in place) becomes ``source``."""
    for name in type(model).__slots__:
        if name != "_functions":
            setattr(model, name, getattr(source, name))
    model.functions.clear()
    model.functions.update(source.functions)


def _dangling(model: ir.Model) -> str | None:
    """The first read of a value that no node, input or initializer of the model makes any
    more (a node removed while its output still had readers), said in words; None when every
    read is made."""
    scopes = list(graphs_and_functions(model))
    live = {g.graph if isinstance(g, ir.Function) else g for g in scopes}

    def missing(value: ir.Value) -> bool:
        if value.is_graph_input() or value.is_initializer():
            return False
        producer = value.producer()
        return producer is None or producer.graph not in live

    for graph in scopes:
        for node in graph:
            for value in node.inputs:
                if value is not None and missing(value):
                    return f"{node.op_type} node {node.name!r} reads {value.name!r}, which nothing makes"
        for value in graph.outputs:
            if missing(value):
                return f"the output {value.name!r} is made by nothing"
    return None


def _run(model: ir.Model, options: OptimizeOptions, report: OptimizeReport, keep: frozenset[str],
         excluded: set[str]) -> bool:
    original = list(_all_nodes(model))  # held, so that ids stay unique
    unnamed = {id(n) for n in original if not n.name}
    known = {id(n) for n in original}
    names = {n.name for n in original}
    passes = _Passes(
        fold=FoldConstantsPass(fold_limit=options.fold_limit, int_overflow=options.int_overflow),
        shapes=FoldShapeArithmeticPass(), fusions=FusionsPass(),
        # each counted as a fusion or simplification, run in this order after the fusions
        rewrites=(FoldChannelAffineIntoConvPass(), RemoveNeutralArithmeticPass(), RemoveStaticNoOpsPass(),
                  MergeSlicesPass(), MergeUnsqueezesPass(), RemoveUpsampleSubsamplePass(),
                  RemoveElementwiseReshapesPass(), FoldUnitReshapesIntoTransposePass(), BatchedMatMulAddToGemmPass(),
                  RemoveLayoutOpsBeforeReshapePass()),
        cse=CommonSubexpressionEliminationPass(),
        unused=RemoveUnusedPass(allow_removing_custom_ops=options.allow_removing_custom_ops, keep=keep))
    unused = passes.unused
    skipped: dict = {}
    # fused in the first round, not the next run
    modified = _Guarded(LiftBatchNormParametersPass(), excluded)(model).modified
    hidden = hide_overridable(model)  # no rule may read an overridable initializer as a constant
    try:
        modified |= _rounds(model, options, report, passes, skipped, excluded)
    finally:
        restore(hidden)
    finals: list = []
    if model.ir_version >= 4:  # initializers that are not inputs need IR 4
        finals += [LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
                   MergeEqualInitializersPass()]
    else:  # what folds and fusions made initializers become Constant nodes
        finals.append(InitializersToConstantsPass())
    finals += [unused, DropToolMetadataPass()]
    if options.strip_metadata:
        finals.append(StripMetadataPass())
    for p in finals:
        modified |= _Guarded(p, excluded)(model).modified
    report.removed_initializers += unused.removed_initializers
    # onnxscript's folder names every unnamed node it meets: a node that had no name keeps
    # none, and a node a rule created gets no invented name
    for node in _all_nodes(model):
        if node.name and (id(node) in unnamed or id(node) not in known and node.name not in names):
            node.name = ""
    report.skipped = list(skipped.values())
    return modified


@dataclasses.dataclass(frozen=True)
class _Passes:
    """The passes of one round, by what the report counts of them."""

    fold: FoldConstantsPass
    shapes: FoldShapeArithmeticPass
    fusions: FusionsPass
    rewrites: tuple
    cse: CommonSubexpressionEliminationPass
    unused: RemoveUnusedPass


def _rounds(model, options, report, passes: _Passes, skipped, excluded: set[str]) -> bool:
    """Run ``passes`` in rounds until a round changes nothing (at most ``options.iterations``),
    with onnx_ir's PassManager; what the report counts is taken from each pass as it ends."""
    fold, shapes = passes.fold, passes.shapes

    def round_started():
        report.rounds += 1

    def folded():
        report.folded.update(fold.stats.folded)
        for key, item in fold.stats.by_node.items():  # a node keeps the label it had first
            skipped.setdefault(key, item)

    def shapes_folded():
        if shapes.folded:
            report.folded["shape arithmetic"] += shapes.folded

    def round_ended():
        report.fused += passes.fusions.applied + shapes.reshapes + sum(p.count for p in passes.rewrites)
        report.merged += passes.cse.count
        report.removed_nodes += passes.unused.removed_nodes
        report.removed_initializers += passes.unused.removed_initializers

    def guarded(p):
        return _Guarded(p, excluded)

    rounds = ir.passes.PassManager(
        [_Then(None, round_started), _Then(guarded(fold), folded), _Then(guarded(shapes), shapes_folded),
         guarded(passes.fusions), *map(guarded, passes.rewrites), guarded(passes.cse),
         _Then(guarded(passes.unused), round_ended)],
        steps=max(1, options.iterations), early_stop=True)
    try:
        return rounds(model).modified
    except ir.passes.PassError as e:  # the failure itself, not the pass manager's wrappers of it
        cause: BaseException = e
        while isinstance(cause, ir.passes.PassError) and cause.__cause__ is not None:
            cause = cause.__cause__
        if cause is e:
            raise
        raise cause from None


class _Guarded(ir.passes.InPlacePass):
    """Runs ``inner`` unless its name is in ``excluded``; what it raises, and a model it says it
    modified where a read is no longer made (:func:`_dangling`), becomes :class:`PassFailed`."""

    def __init__(self, inner, excluded: set[str]):
        super().__init__()
        self.inner, self.excluded = inner, excluded
        self.name = type(inner).__name__

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if self.name in self.excluded:
            return ir.passes.PassResult(model, modified=False)
        try:
            modified = self.inner(model).modified
        except Exception as e:
            raise PassFailed(self.name, _reason(e)) from e
        problem = _dangling(model) if modified else None
        if problem is not None:
            raise PassFailed(self.name, f"it left the model invalid: {problem}")
        return ir.passes.PassResult(model, modified=modified)

    def __repr__(self) -> str:
        return self.name


def _reason(e: BaseException) -> str:
    """What went wrong, in the failure's own words (onnx_ir's PassError wrappers taken off)."""
    while isinstance(e, ir.passes.PassError) and e.__cause__ is not None:
        e = e.__cause__
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 500 else text[:497] + "..."


class _Then(ir.passes.InPlacePass):
    """Runs ``inner`` (nothing when None, and reports no change), then calls ``then()``."""

    def __init__(self, inner, then):
        super().__init__()
        self.inner, self.then = inner, then

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = self.inner(model).modified if self.inner is not None else False
        self.then()
        return ir.passes.PassResult(model, modified=modified)

    def __repr__(self) -> str:
        return repr(self.inner) if self.inner is not None else "round"


class OptimizePass(ir.passes.InPlacePass):
    """The whole optimize pipeline (after the ReduceProd fold) as one in-place onnx_ir pass.

    Training info is not modelled by onnx_ir; use :func:`rewriter.optimize_model` on a ModelProto
    to keep it. After a run, ``self.report`` holds the :class:`OptimizeReport`.
    """

    def __init__(self, options: OptimizeOptions | None = None, *, allow_invalid_input: bool = False, **kwargs):
        super().__init__()
        self.options = options or OptimizeOptions(**kwargs)
        self.allow_invalid_input = allow_invalid_input  # as rewriter.optimize_model's
        self.report = OptimizeReport()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from rewriter.io.base_dir import proto_of
        from rewriter.verify.inputs.validate import check_input

        check_input(proto_of(model)[0], allow_invalid=self.allow_invalid_input)  # as every entry point
        self.report = OptimizeReport()
        frozen = freeze_ir_input_defaults(model, self.options.freeze_input_defaults)
        modified = run_pipeline(model, self.options, self.report)
        return ir.passes.PassResult(model, modified=modified or bool(frozen))
