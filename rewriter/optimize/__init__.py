"""Whole-model optimization: fold constants exactly, fuse, merge repeats, drop what is unused.

``optimize_model(proto)`` runs, on a ModelProto loaded by :func:`rewriter.io.load_model`
(weights stay lazy references; a tensor is read only when a fold uses it):

1. rewriter's exact ReduceProd fold (:func:`rewriter.fold.fold_model`);
2. then, as onnx_ir passes, repeated until nothing changes (at most ``iterations`` rounds):
   :class:`FoldConstantsPass` (onnxscript's folder with rewriter's evaluation policy),
   :class:`FusionsPass` (onnxscript's rewrite rules), :class:`CommonSubexpressionEliminationPass`,
   :class:`RemoveUnusedPass`;
3. Constant nodes become initializers (graphs, not functions), equal small initializers are
   merged, onnxscript's bookkeeping metadata is dropped (everything else is kept unless
   ``strip_metadata``).

Every pass is an ``onnx_ir.passes`` pass usable alone or in an ``onnx_ir.passes.PassManager``;
:class:`OptimizePass` is the whole pipeline as one pass.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

import onnx

from rewriter.graph import traversal

__all__ = ["optimize_model", "OptimizeReport", "OptimizeOptions", "count_ops", "initializer_count"]


@dataclasses.dataclass
class OptimizeOptions:
    """The knobs of :func:`optimize_model` (the CLI's flags)."""

    fold_limit: int = 512 * 512 * 4
    int_overflow: str = "skip"
    strip_metadata: bool = False
    allow_removing_custom_ops: bool = False
    iterations: int = 4


@dataclasses.dataclass
class OptimizeReport:
    """What an optimization did."""

    ops_before: Counter = dataclasses.field(default_factory=Counter)
    ops_after: Counter = dataclasses.field(default_factory=Counter)
    initializers_before: int = 0
    initializers_after: int = 0
    reduce_prod: object = None  # the rewriter.fold.FoldReport of step 1
    folded: Counter = dataclasses.field(default_factory=Counter)  # op type -> nodes folded in step 2
    skipped: list = dataclasses.field(default_factory=list)  # (node label, reason)
    fused: int = 0
    merged: int = 0
    removed_nodes: int = 0
    removed_initializers: int = 0
    rounds: int = 0
    seconds: dict = dataclasses.field(default_factory=dict)

    @property
    def nodes_before(self) -> int:
        return sum(self.ops_before.values())

    @property
    def nodes_after(self) -> int:
        return sum(self.ops_after.values())

    @property
    def skipped_for_size(self) -> list:
        return [s for s in self.skipped if "fold limit" in s[1]]

    def to_dict(self) -> dict:
        rp = self.reduce_prod
        return {
            "nodes_before": self.nodes_before, "nodes_after": self.nodes_after,
            "ops_before": dict(sorted(self.ops_before.items())),
            "ops_after": dict(sorted(self.ops_after.items())),
            "initializers_before": self.initializers_before, "initializers_after": self.initializers_after,
            "reduce_prod_folded": len(rp.folded) if rp else 0,
            "reduce_prod_skipped": [{"node": s.label, "reason": s.reason} for s in rp.skipped] if rp else [],
            "folded": dict(sorted(self.folded.items())),
            "skipped": [{"node": n, "reason": r} for n, r in self.skipped],
            "skipped_for_size": len(self.skipped_for_size),
            "fused": self.fused, "merged": self.merged,
            "removed_nodes": self.removed_nodes, "removed_initializers": self.removed_initializers,
            "rounds": self.rounds, "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }


def count_ops(model: onnx.ModelProto) -> Counter:
    """Nodes per op type (``domain:op`` outside the default domain) in every scope."""
    counts: Counter = Counter()
    for body in (model.graph, *model.functions):
        for node in traversal.all_nodes(body):
            op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
            counts[op] += 1
    return counts


def initializer_count(model: onnx.ModelProto) -> int:
    return sum(len(s.body.initializer) for s in traversal.iter_scopes(model) if not s.is_function)


def optimize_model(model: onnx.ModelProto, options: OptimizeOptions | None = None, *,
                   base_dir: str | None = None) -> tuple[onnx.ModelProto, OptimizeReport]:
    """Optimize a copy of ``model``; returns (the optimized ModelProto, an OptimizeReport).

    ``base_dir``: where external data lives when the model was not loaded by rewriter.io.
    """
    from rewriter import fold
    from rewriter.optimize import bridge
    from rewriter.optimize.pipeline import run_pipeline

    options = options or OptimizeOptions()
    report = OptimizeReport(ops_before=count_ops(model), initializers_before=initializer_count(model))
    t0 = time.perf_counter()
    folded, report.reduce_prod = fold.fold_model(model, int_overflow=options.int_overflow, base_dir=base_dir)
    t1 = time.perf_counter()
    ir_model, carry = bridge.to_ir(folded, base_dir)
    t2 = time.perf_counter()
    run_pipeline(ir_model, options, report, keep=frozenset(bridge.training_reads(carry)))
    t3 = time.perf_counter()
    result = bridge.to_proto(ir_model, carry)
    t4 = time.perf_counter()
    report.ops_after, report.initializers_after = count_ops(result), initializer_count(result)
    report.seconds = {"reduce_prod": t1 - t0, "to_ir": t2 - t1, "passes": t3 - t2, "to_proto": t4 - t3}
    return result, report
