"""VerifyShapesPass: shape verification as an ``onnx_ir`` pass, to compose with other passes."""

from __future__ import annotations

import onnx_ir as ir

from rewriter.errors import RewriterError
from rewriter.shapes import verify_shapes

__all__ = ["VerifyShapesPass"]


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
