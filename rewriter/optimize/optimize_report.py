"""The options and the report of an optimization."""

from __future__ import annotations

import dataclasses
from collections import Counter

__all__ = ["OptimizeOptions", "OptimizeReport"]


@dataclasses.dataclass
class OptimizeOptions:
    """The knobs of :func:`optimize_proto` (the CLI's flags)."""

    fold_limit: int = 512 * 512 * 4
    int_overflow: str = "skip"
    strip_metadata: bool = False
    allow_removing_custom_ops: bool = False
    iterations: int = 4
    # graph inputs whose initializer becomes a constant first: True for all, or their names
    # (rewriter.graph.input_defaults); None: none
    freeze_input_defaults: object = None


@dataclasses.dataclass
class OptimizeReport:
    """What an optimization did."""

    ops_before: Counter = dataclasses.field(default_factory=Counter)
    ops_after: Counter = dataclasses.field(default_factory=Counter)
    initializers_before: int = 0
    initializers_after: int = 0
    reduce_prod: object = None  # the rewriter.fold.FoldReport of step 1 (None: no ReduceProd in the model)
    folded: Counter = dataclasses.field(default_factory=Counter)  # op type -> nodes folded in step 2
    skipped: list = dataclasses.field(default_factory=list)  # (node label, reason)
    fused: int = 0
    merged: int = 0
    removed_nodes: int = 0
    removed_initializers: int = 0
    rounds: int = 0
    seconds: dict = dataclasses.field(default_factory=dict)
    kept_input: bool = False  # nothing got smaller and the result would have grown: the input as it came
    failed_passes: list = dataclasses.field(default_factory=list)  # (pass name, what went wrong): left out

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
            "kept_input": self.kept_input,
            "failed_passes": [{"pass": n, "error": e} for n, e in self.failed_passes],
        }
