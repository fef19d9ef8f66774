"""rewriter's rewrites as ``onnx_ir`` passes, to compose with onnx_ir / onnxscript pipelines.

The work itself happens on ``onnx.ModelProto`` (see ``rewriter.convert``, ``rewriter.fold``
and ``rewriter.verify``): each pass converts at its boundary. This module imports onnx_ir,
so the command line never imports it.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.convert import convert_model
from rewriter.errors import RewriterError
from rewriter.fold import INT_OVERFLOW_MODES, fold_model
from rewriter.verify.shapes import verify_shapes

from rewriter.optimize.constant_folding import FoldConstantsPass
from rewriter.optimize.cse import CommonSubexpressionEliminationPass
from rewriter.optimize.fusions import FusionsPass
from rewriter.optimize.metadata import DropToolMetadataPass, StripMetadataPass
from rewriter.optimize.pipeline import OptimizePass
from rewriter.optimize.unused import RemoveUnusedPass

__all__ = ["ConvertOpsetPass", "FoldReduceProdPass", "VerifyShapesPass", "OptimizePass", "FoldConstantsPass",
           "FusionsPass", "CommonSubexpressionEliminationPass", "RemoveUnusedPass", "DropToolMetadataPass",
           "StripMetadataPass"]


class ConvertOpsetPass(ir.passes.FunctionalPass):
    """Convert a model's default-domain opset (see :func:`rewriter.convert.convert_model`).

    After a run, ``self.report`` holds the :class:`rewriter.convert.ConvertReport`.
    """

    def __init__(self, target_opset: int):
        super().__init__()
        self.target_opset = target_opset
        self.report = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        proto, self.report = convert_model(ir.to_proto(model), self.target_opset,
                                           base_dir=_base_dir(model))
        modified = self.report.source_opset != self.report.target_opset or bool(self.report.changes)
        return ir.passes.PassResult(ir.from_proto(proto), modified=modified)


class FoldReduceProdPass(ir.passes.FunctionalPass):
    """Fold constant ReduceProd nodes (see :func:`rewriter.fold.fold_model`).

    After a run, ``self.report`` holds the :class:`rewriter.fold.FoldReport`.
    """

    def __init__(self, int_overflow: str = "skip", base_dir: str | None = None):
        super().__init__()
        if int_overflow not in INT_OVERFLOW_MODES:
            raise RewriterError(f"int_overflow must be one of {', '.join(INT_OVERFLOW_MODES)}, "
                                f"got {int_overflow!r}")
        self.int_overflow = int_overflow
        self.base_dir = base_dir
        self.report = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        proto, self.report = fold_model(ir.serde.serialize_model(model), int_overflow=self.int_overflow,
                                        base_dir=self.base_dir or _base_dir(model), in_place=True)
        return ir.passes.PassResult(ir.serde.deserialize_model(proto), modified=self.report.modified)


class VerifyShapesPass(ir.passes.PassBase):
    """Analysis pass: raises RewriterError listing the problems, else returns the model
    unchanged (``modified=False``). See :func:`rewriter.verify_shapes`."""

    @property
    def in_place(self) -> bool:
        return True

    @property
    def changes_input(self) -> bool:
        return False

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        problems = verify_shapes(model)
        if problems:
            details = "; ".join(str(p) for p in problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise RewriterError(f"shape verification found {len(problems)} problem(s): {details}{more}")
        return ir.passes.PassResult(model, modified=False)


def _base_dir(model: ir.Model) -> str | None:
    """Where the model's external tensor data lives, if it has any."""
    return next((v.const_value.base_dir for v in model.graph.initializers.values()
                 if isinstance(v.const_value, ir.ExternalTensor)), None)
