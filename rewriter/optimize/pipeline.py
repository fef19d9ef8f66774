"""The optimize pipeline on an ``onnx_ir.Model``, and :class:`OptimizePass`, the whole of it as one pass."""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import onnx_ir as ir
from onnx_ir.passes.common import LiftConstantsToInitializersPass

from rewriter.optimize.report import OptimizeOptions, OptimizeReport
from rewriter.optimize.batched_gemm import BatchedMatMulAddToGemmPass
from rewriter.optimize.batchnorm_parameters import LiftBatchNormParametersPass
from rewriter.optimize.conv_affine import FoldChannelAffineIntoConvPass
from rewriter.optimize.constant_folding import FoldConstantsPass, hide_overridable, restore
from rewriter.optimize.cse import CommonSubexpressionEliminationPass
from rewriter.optimize.dedupe import MergeEqualInitializersPass
from rewriter.optimize.fusions import FusionsPass
from rewriter.optimize.elementwise_reshapes import RemoveElementwiseReshapesPass
from rewriter.optimize.layout_before_reshape import RemoveLayoutOpsBeforeReshapePass
from rewriter.optimize.merge_slices import MergeSlicesPass
from rewriter.optimize.merge_unsqueezes import MergeUnsqueezesPass
from rewriter.optimize.metadata import DropToolMetadataPass, StripMetadataPass
from rewriter.optimize.neutral_constants import RemoveNeutralArithmeticPass
from rewriter.optimize.old_ir import InitializersToConstantsPass
from rewriter.optimize.static_noops import RemoveStaticNoOpsPass
from rewriter.optimize.resize_slice import RemoveUpsampleSubsamplePass
from rewriter.optimize.shape_arithmetic import FoldShapeArithmeticPass
from rewriter.optimize.scopes import graphs_and_functions
from rewriter.optimize.unit_reshapes import FoldUnitReshapesIntoTransposePass
from rewriter.optimize.unused import RemoveUnusedPass

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
                 keep: frozenset[str] = frozenset()) -> bool:
    """Optimize ``model`` in place; fills ``report``; returns whether anything changed."""
    with _quiet_libraries():
        return _run(model, options, report, keep)


def _run(model: ir.Model, options: OptimizeOptions, report: OptimizeReport, keep: frozenset[str]) -> bool:
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
    modified = LiftBatchNormParametersPass()(model).modified  # fused in the first round, not the next run
    hidden = hide_overridable(model)  # no rule may read an overridable initializer as a constant
    try:
        modified |= _rounds(model, options, report, passes, skipped)
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
        modified |= p(model).modified
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


def _rounds(model, options, report, passes: _Passes, skipped) -> bool:
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

    rounds = ir.passes.PassManager(
        [_Then(None, round_started), _Then(fold, folded), _Then(shapes, shapes_folded),
         passes.fusions, *passes.rewrites, passes.cse, _Then(passes.unused, round_ended)],
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

    def __init__(self, options: OptimizeOptions | None = None, **kwargs):
        super().__init__()
        self.options = options or OptimizeOptions(**kwargs)
        self.report = OptimizeReport()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.report = OptimizeReport()
        modified = run_pipeline(model, self.options, self.report)
        return ir.passes.PassResult(model, modified=modified)
