"""The public lowering of ops without a function body (``ai.onnx.ml``, and ``com.microsoft`` where
a lowering exists) to standard ONNX: :func:`lower_ops`, what ``convert --lower-ops`` does, and
what ``convert --target`` does by itself for the ops a runtime lacks (docs/lowering.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rewriter import entry

if TYPE_CHECKING:
    from rewriter import ModelLike

__all__ = ["lower_ops"]


def lower_ops(model: ModelLike, ops: str | set | None = None, *, opset: int | None = None,
              allow_invalid_input: bool = False, freeze_input_defaults: bool | str | list[str] | None = None,
              input_shapes: dict[str, list[int]] | None = None, fix_dims: dict[str, int] | None = None) -> Any:
    """Replace the nodes of ``ops`` by standard ONNX ops that compute what ONNX Runtime's kernel
    computes (bit for bit where docs/lowering.md says so, else within its stated tolerance), in
    every scope.

    Args:
        model: an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path to a model file.
        ops: None or ``"all"``: every op that has a lowering; a ``--lower-ops`` string (``"ai.onnx.ml"``,
            ``"ai.onnx.ml::Scaler,TreeEnsembleClassifier"``); or a set of (domain, op_type) pairs.
        opset: the default-domain opset of the result (default: the model's, at least 13, the
            opset the lowerings are written at).
        allow_invalid_input, freeze_input_defaults, input_shapes, fix_dims: as for
            :func:`rewriter.convert_opset` (dims fixed first: a lowering that reads a dim then writes
            it as a constant, as ``convert --lower-ops ... --input-shape`` does).

    Returns:
        The lowered model, the same kind as ``model`` (a ModelProto for a path), self-contained.

    Raises:
        ModelLoadError: the input is not a valid model.
        RewriterError: a node chosen cannot be lowered (every such node named, and why; nothing is
            changed), or ``ops`` names no op that has a lowering.
    """
    from rewriter.convert.lower_ops import lower_ops as lower
    from rewriter.convert.lowering import parse_ops

    chosen = parse_ops(ops) if isinstance(ops, str) else ops
    shapes = entry.shape_args(input_shapes, fix_dims)
    proto, kind, base_dir = entry.open_model(model, allow_invalid_input)
    proto, _ = entry.freeze(proto, freeze_input_defaults)
    proto = entry.fixed_shapes(proto, *shapes)
    return entry.result_of(lower(proto, chosen, opset=opset)[0], kind, base_dir)
