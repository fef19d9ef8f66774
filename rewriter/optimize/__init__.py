"""Whole-model optimization: fold constants exactly, fuse, merge repeats, drop what is unused.

``optimize_proto(proto)`` runs, on a ModelProto loaded by :func:`rewriter.io.load_model`
(weights stay lazy references; a tensor is read only when a fold uses it):

1. rewriter's exact ReduceProd fold (:func:`rewriter.fold.fold_model`), the one place that decides
   every ReduceProd whose inputs are constant in the input: folded, or left (an overflow under
   ``int_overflow="skip"``) and marked ``rewriter.fold.SETTLED`` in its ``Node.meta`` for the
   folder of step 3 to leave too. A ReduceProd whose inputs become constant only through other
   folds is folded in step 3, by the same computation (:func:`rewriter.fold.reduce_prod_value`);
2. BatchNormalization/Conv/Gemm parameters given by Constant nodes become initializers
   (``batchnorm_parameters``), so the fusions see them in the first round;
3. then, as onnx_ir passes, repeated until a round changes nothing (at most ``iterations``):
   ``FoldConstantsPass`` (onnxscript's folder with rewriter's evaluation policy),
   ``FoldShapeArithmeticPass`` (shape chains on symbolic shapes), ``FusionsPass`` (onnxscript's
   rewrite rules, each tried at its root op only), and rewriter's own node passes (all
   ``NodeRewritePass``: per-channel Add/Mul into a Conv, neutral arithmetic, identity Reshape/
   Dropout, Slice and Unsqueeze chains, nearest-upsample Slices, Reshape pairs around
   element-wise ops, unit Reshapes around a Transpose, batched MatMul+Add into Gemm), then
   ``CommonSubexpressionEliminationPass`` and ``RemoveUnusedPass`` (``pipeline.py`` has the order).
   A pass that fails (raises, or leaves a node reading a value nothing makes) is named in
   ``report.failed_passes`` and a logged warning, and the passes start again from the model as
   it came without it: its changes are undone and the others still optimize the model;
4. Constant nodes become initializers (graphs, not functions), equal small initializers are
   merged, onnxscript's bookkeeping metadata is dropped (everything else is kept unless
   ``strip_metadata``).

Every pass is an ``onnx_ir.passes`` pass usable alone or in an ``onnx_ir.passes.PassManager``;
:class:`OptimizePass` is the whole pipeline as one pass.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter

import onnx

from rewriter.errors import RewriterError
from rewriter.graph import traversal
from rewriter.graph.unused_values import training_reads
from rewriter.optimize.optimize_report import OptimizeOptions, OptimizeReport
from rewriter.graph.schemas import is_default_domain

__all__ = ["optimize_proto", "OptimizeReport", "OptimizeOptions", "count_ops", "initializer_count"]


def count_ops(model: onnx.ModelProto) -> Counter:
    """Nodes per op type (``domain:op`` outside the default domain) in every scope."""
    counts: Counter = Counter()
    for body in (model.graph, *model.functions):
        for node in traversal.all_nodes(body):
            op = node.op_type if is_default_domain(node.domain) else f"{node.domain}:{node.op_type}"
            counts[op] += 1
    return counts


def initializer_count(model: onnx.ModelProto) -> int:
    """Initializers of the main graph and of every subgraph (in functions too)."""
    def graphs(body):
        for node in body.node:
            for g in traversal.subgraphs(node):
                yield g
                yield from graphs(g)

    found = [model.graph, *graphs(model.graph)]
    for fn in model.functions:
        found.extend(graphs(fn))
    return sum(len(g.initializer) for g in found)


def _mark_settled(model, fold_report) -> None:
    """Mark (``rewriter.fold.SETTLED`` in ``Node.meta``) each ReduceProd the exact fold judged with
    constant inputs and left, so the pipeline's folder does not judge it again."""
    import onnx_ir as ir

    from rewriter.fold import SETTLED

    settled = {(s.function, s.output): s.reason for s in fold_report.skipped if s.settled}
    if not settled:
        return
    bodies = [(None, model.graph), *model.functions.items()]
    for key, body in bodies:
        for node in ir.traversal.RecursiveGraphIterator(body):
            if node.op_type == "ReduceProd" and node.outputs:
                reason = settled.get((key, node.outputs[0].name))
                if reason is not None:
                    node.meta[SETTLED] = reason


@contextlib.contextmanager
def _library_failures():
    """A library pass or onnx_ir's serializer failing on this model: an error naming the
    failure, not a traceback."""
    try:
        yield
    except RewriterError:
        raise
    except Exception as e:
        cause = " ".join(str(e).split()) or type(e).__name__
        if e.__cause__ is not None:
            cause += f": {' '.join(str(e.__cause__).split())}"
        raise RewriterError(f"optimize failed: {cause}") from e


def optimize_proto(model: onnx.ModelProto, options: OptimizeOptions | None = None, *,
                   base_dir: str | None = None) -> tuple[onnx.ModelProto, OptimizeReport]:
    """Optimize a copy of ``model``; returns (the optimized ModelProto, an OptimizeReport).

    ``base_dir``: where external data lives when the model was not loaded by rewriter.io.
    """
    from rewriter.optimize import bridge
    from rewriter.optimize.pipeline import run_pipeline

    options = options or OptimizeOptions()
    if options.freeze_input_defaults is not None:
        from rewriter.graph.input_defaults import freeze_input_defaults

        model, _ = freeze_input_defaults(model, options.freeze_input_defaults)
    report = OptimizeReport(ops_before=count_ops(model), initializers_before=initializer_count(model))
    t0 = time.perf_counter()
    folded = model
    if report.ops_before.get("ReduceProd"):  # rewriter's exact fold (and its imports) only when needed
        from rewriter import fold

        folded, report.reduce_prod = fold.fold_model(model, int_overflow=options.int_overflow, base_dir=base_dir)
    t1 = time.perf_counter()

    def fresh():  # the model as it came to the passes: one failing is started again without it
        ir_model, carry = bridge.to_ir(folded, base_dir)
        if report.reduce_prod is not None:
            _mark_settled(ir_model, report.reduce_prod)
        return ir_model, carry

    ir_model, carry = fresh()
    t2 = time.perf_counter()
    with _library_failures():
        run_pipeline(ir_model, options, report, keep=frozenset(training_reads(carry.training_info)),
                     fresh=lambda: fresh()[0])
    t3 = time.perf_counter()
    with _library_failures():
        result = bridge.to_proto(ir_model, carry)
    t4 = time.perf_counter()
    report.ops_after, report.initializers_after = count_ops(result), initializer_count(result)
    if report.nodes_after >= report.nodes_before and result.ByteSize() > model.ByteSize():
        # nothing got smaller and the file would grow (ResNet-18's Flatten written as a Reshape,
        # and its shape): the model as it came, never a bigger copy of it
        result = onnx.ModelProto()
        result.CopyFrom(model)
        report.ops_after, report.initializers_after = report.ops_before, report.initializers_before
        report.kept_input = True
    report.seconds = {"reduce_prod": t1 - t0, "to_ir": t2 - t1, "passes": t3 - t2, "to_proto": t4 - t3}
    return result, report
