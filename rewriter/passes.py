"""rewriter's rewrites as ``onnx_ir`` passes, to compose with onnx_ir / onnxscript pipelines.

The work itself happens on ``onnx.ModelProto`` (see ``rewriter.convert``, ``rewriter.fold``
and ``rewriter.verify``): each pass crosses to it with :func:`rewriter.io.base_dir.proto_of`
(the proto, its external references tagged with their directory) and back through the bridge,
:func:`rewriter.optimize.bridge.to_ir` (each external tensor gets its directory again). The
optimizer's passes work on onnx_ir itself. This module imports onnx_ir, so the command line
never imports it.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.errors import RewriterError
from rewriter.fold import FOLD_INT_OVERFLOW_POLICIES, fold_model
from rewriter.io.base_dir import proto_of
from rewriter.verify.inputs.validate import blame_input, check_input
from rewriter.verify.shapes.check import verify_reduce_prod_shapes

from rewriter.optimize.bridge import result_to_ir
from rewriter.optimize.constant_folding import FoldConstantsPass
from rewriter.optimize.cse import CommonSubexpressionEliminationPass
from rewriter.optimize.fusions import FusionsPass
from rewriter.optimize.metadata import DropToolMetadataPass, StripMetadataPass
from rewriter.optimize.pipeline import OptimizePass
from rewriter.optimize.remove_unused import RemoveUnusedPass

__all__ = ["ConvertOpsetPass", "LowerOpsPass", "ConvertPrecisionPass", "FoldReduceProdPass", "VerifyReduceProdShapesPass", "VerifyShapesPass",
           "OptimizePass", "FoldConstantsPass", "FusionsPass", "CommonSubexpressionEliminationPass",
           "RemoveUnusedPass", "DropToolMetadataPass", "StripMetadataPass"]


def _checked(model: ir.Model, allow_invalid: bool, base_dir: str | None = None, freeze=None, shapes=None):
    """(proto, base_dir, frozen) of ``model``, checked as every entry point checks its input
    (:func:`rewriter.verify.inputs.validate.check_input`: ModelLoadError naming the node or tensor),
    with the graph inputs ``freeze`` names made constants (``freeze_input_defaults``; their names)
    and then the dims ``shapes`` (:func:`rewriter.entry.shape_args`' pair) fixed."""
    from rewriter.entry import fixed_shapes
    from rewriter.graph.input_defaults import freeze_in_place

    proto, base_dir = proto_of(model, base_dir)
    check_input(proto, allow_invalid=allow_invalid)
    frozen = freeze_in_place(proto, freeze)  # (proto_of made a new proto)
    return (fixed_shapes(proto, *shapes) if shapes else proto), base_dir, frozen


class ConvertOpsetPass(ir.passes.FunctionalPass):
    """Convert a model's default-domain opset to ``target_opset``, up or down: the pass form
    of :func:`rewriter.convert_opset`, with the same parameters.

    Every node in every scope (main graph, If/Loop/Scan bodies, model-local functions) is
    converted one schema step at a time; the conversion completes for every node or raises.
    Functional: the input model is not changed.

    Args:
        target_opset: the default-domain opset to reach, 1..``onnx.defs.onnx_opset_version()``
            or ``"latest"``; None keeps it (with ``ml_opset`` or ``target``).
        ml_opset: the ``ai.onnx.ml`` opset to reach (default: kept).
        ir_version: the IR version of the result (default: the lowest it needs going down).
        target: a runtime (``"onnxruntime==1.15"``, ``"tensorrt==10.16"``) or a profile path.
        input_shapes, fix_dims: dims fixed in the result, as ``--input-shape`` / ``--fix-dim``.

    Attributes:
        report: after a run, the :class:`rewriter.convert.ConvertReport` (what changed, per op).

    Raises:
        TypeError (when made): an argument of the wrong type, or nothing to reach.
        ModelLoadError (when called): the input is not a valid model (the node or tensor named;
            ``allow_invalid_input=True`` processes a model ``onnx.checker`` refuses).
        RewriterError (when called): the conversion is impossible (every blocking node named).

    Example:
        >>> result = ConvertOpsetPass(13)(ir.load("model.onnx"))  # doctest: +SKIP
        >>> result.model.opset_imports[""]
        13
        >>> for_old_ort = ConvertOpsetPass(target="onnxruntime==1.15")(ir.load("model.onnx"))  # doctest: +SKIP
    """

    def __init__(self, target_opset: int | str | None = None, *, ml_opset: int | None = None,
                 ir_version: int | None = None, target: str | None = None, allow_invalid_input: bool = False,
                 freeze_input_defaults=None, input_shapes: dict[str, list[int]] | None = None,
                 fix_dims: dict[str, int] | None = None) -> None:
        super().__init__()
        from rewriter.entry import convert_args, shape_args

        self.target_opset = convert_args(target_opset, ml_opset, ir_version, target)
        self.shapes = shape_args(input_shapes, fix_dims)
        self.ml_opset, self.ir_version, self.target = ml_opset, ir_version, target
        self.allow_invalid_input, self.freeze_input_defaults = allow_invalid_input, freeze_input_defaults
        self.report = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Convert ``model``; returns a new model and whether anything changed."""
        from rewriter.convert import convert_for
        from rewriter.entry import fixed_shapes
        from rewriter.graph.input_defaults import check_kept

        proto, base_dir, frozen = _checked(model, self.allow_invalid_input, freeze=self.freeze_input_defaults)
        before = proto.SerializeToString()
        proto = fixed_shapes(proto, *self.shapes)  # (after ``before``: fixed dims are a change)
        try:
            result, self.report = convert_for(proto, self.target_opset, ml_opset=self.ml_opset,
                                              ir_version=self.ir_version, runtime=self.target, base_dir=base_dir)
            check_kept(result, frozen)
        except RewriterError as e:
            blame_input(proto, e)
            raise
        proto = result
        modified = bool(frozen) or proto.SerializeToString() != before
        return ir.passes.PassResult(result_to_ir(proto, base_dir), modified=modified)


class ConvertPrecisionPass(ir.passes.FunctionalPass):
    """Rewrite a model's float32 computation to float16 or bfloat16: the pass form of
    :func:`rewriter.convert_precision`, with the same parameters and the same pipeline
    (:func:`rewriter.precision.pipeline.convert_half`), so it gives the same model.

    Attributes:
        report: after a run, the :class:`rewriter.precision.PrecisionReport`.
    """

    def __init__(self, dtype: str = "float16", *, keep_io_types: bool = True, keep_op_types=(), keep_nodes=(),
                 target=None, opset: int | str | None = None, optimize: bool = False, calibrate: bool = False,
                 max_error: float | None = None, calibration_data=None, allow_invalid_input: bool = False,
                 freeze_input_defaults=None, keep_io_precision: bool = False,
                 input_shapes: dict[str, list[int]] | None = None, fix_dims: dict[str, int] | None = None) -> None:
        super().__init__()
        from rewriter.entry import shape_args
        from rewriter.precision.pipeline import HalfOptions
        from rewriter.targets.spec import TargetSpec

        self.shapes = shape_args(input_shapes, fix_dims)
        self.dtype, self.allow_invalid_input = dtype, allow_invalid_input
        self.freeze_input_defaults = freeze_input_defaults
        self.spec = TargetSpec.parse(opset, target=target) if opset is not None or target is not None else None
        # (keep_op_types / keep_nodes as given: a str is one name, read by rewriter.precision.keep)
        self.options = HalfOptions(keep_io_types=keep_io_types, keep_op_types=keep_op_types, keep_nodes=keep_nodes,
                                   optimize=optimize, calibrate=calibrate, max_error=max_error,
                                   calibration_data=calibration_data, keep_io_precision=keep_io_precision,
                                   input_shapes=self.shapes[0])
        self.report = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Rewrite ``model``; returns a new model and whether any node now runs in half."""
        from rewriter.precision.pipeline import convert_half

        from rewriter.graph.input_defaults import check_kept

        proto, base_dir, frozen = _checked(model, self.allow_invalid_input, freeze=self.freeze_input_defaults,
                                           shapes=self.shapes)
        proto, done = convert_half(proto, self.dtype, self.spec, self.options, base_dir=base_dir)
        check_kept(proto, frozen)
        self.report = done.report
        modified = bool(self.report.half_nodes or self.report.applied.constants_converted
                        or self.report.applied.casts or done.migration is not None or frozen
                        or any(self.shapes))
        return ir.passes.PassResult(result_to_ir(proto, base_dir), modified=modified)


class LowerOpsPass(ir.passes.FunctionalPass):
    """Lower ops without a function body to standard ONNX: the pass form of
    :func:`rewriter.lower_ops`, with the same parameters. ``report``: after a run, the
    :class:`rewriter.convert.lowering.LoweringReport`."""

    def __init__(self, ops=None, *, opset: int | None = None, allow_invalid_input: bool = False,
                 freeze_input_defaults=None, input_shapes: dict[str, list[int]] | None = None,
                 fix_dims: dict[str, int] | None = None) -> None:
        super().__init__()
        from rewriter.convert.lowering import parse_ops
        from rewriter.entry import shape_args

        self.ops = parse_ops(ops) if isinstance(ops, str) else ops
        self.opset, self.allow_invalid_input, self.freeze_input_defaults = opset, allow_invalid_input, freeze_input_defaults
        self.shapes = shape_args(input_shapes, fix_dims)
        self.report = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Lower ``model``; returns a new model and whether any node was lowered."""
        from rewriter.convert.lower_ops import lower_ops

        proto, base_dir, frozen = _checked(model, self.allow_invalid_input, freeze=self.freeze_input_defaults,
                                           shapes=self.shapes)
        proto, self.report = lower_ops(proto, self.ops, opset=self.opset)
        return ir.passes.PassResult(result_to_ir(proto, base_dir), modified=self.report.changed or bool(frozen)
                                    or any(self.shapes))


class FoldReduceProdPass(ir.passes.FunctionalPass):
    """Replace every ReduceProd whose data (and axes) are constant with its exact value.

    The pass form of :func:`rewriter.fold_reduce_prod`: values are computed by the exact native
    kernel, in the main graph, subgraphs and model-local functions; they become initializers
    (Constant nodes inside functions); constants left unused are removed. ``modified`` is
    False when nothing was folded. Functional: the input model is not changed.

    Args:
        int_overflow: integer products that overflow: ``"skip"`` (default) leaves the node,
            ``"wrap"`` folds the value modulo 2^bits, ``"saturate"`` the clamped one.
        base_dir: the directory external data is relative to, when the model's external
            tensors do not say (default: taken from the model's ``ExternalTensor`` values).

    Attributes:
        report: after a run, the :class:`rewriter.fold.FoldReport` (folded, skipped and why).

    Raises:
        RewriterError: ``int_overflow`` is not a mode (at construction); a node's axes are
            invalid (when called).

    Example:
        >>> result = FoldReduceProdPass(int_overflow="wrap")(ir.load("model.onnx"))  # doctest: +SKIP
    """

    def __init__(self, int_overflow: str = "skip", base_dir: str | None = None, *,
                 allow_invalid_input: bool = False, freeze_input_defaults=None) -> None:
        super().__init__()
        self.allow_invalid_input, self.freeze_input_defaults = allow_invalid_input, freeze_input_defaults
        if int_overflow not in FOLD_INT_OVERFLOW_POLICIES:
            raise RewriterError(f"int_overflow must be one of {', '.join(FOLD_INT_OVERFLOW_POLICIES)}, "
                                f"got {int_overflow!r}")
        self.int_overflow = int_overflow
        self.base_dir = base_dir
        self.report = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Fold ``model``; returns a new model and whether anything was folded or removed."""
        proto, base_dir, frozen = _checked(model, self.allow_invalid_input, self.base_dir,
                                           freeze=self.freeze_input_defaults)
        proto, self.report = fold_model(proto, int_overflow=self.int_overflow, base_dir=base_dir, in_place=True)
        return ir.passes.PassResult(result_to_ir(proto, base_dir), modified=self.report.modified or bool(frozen))


class VerifyReduceProdShapesPass(ir.passes.PassBase):
    """Analysis pass: check every ReduceProd output's shape and ONNX strict shape inference.

    The pass form of :func:`rewriter.verify_reduce_prod_shapes`, to end a pipeline with: returns
    the model unchanged (``modified=False``) when every shape is consistent.

    Raises (when called):
        ModelLoadError: the input is not a valid model, as :func:`rewriter.verify_reduce_prod_shapes`
            says (``allow_invalid_input=True`` checks a model ``onnx.checker`` refuses).
        RewriterError: listing the problems found (up to five, and how many more).

    Example:
        >>> ir.passes.PassManager([FoldReduceProdPass(), VerifyReduceProdShapesPass()])(model)  # doctest: +SKIP
    """

    def __init__(self, *, allow_invalid_input: bool = False, freeze_input_defaults=None) -> None:
        super().__init__()
        self.allow_invalid_input, self.freeze_input_defaults = allow_invalid_input, freeze_input_defaults

    @property
    def in_place(self) -> bool:
        return True

    @property
    def changes_input(self) -> bool:
        return False

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        """Verify ``model``; returns it unchanged, or raises RewriterError naming the problems."""
        problems = verify_reduce_prod_shapes(_checked(model, self.allow_invalid_input,
                                                      freeze=self.freeze_input_defaults)[0])
        if problems:
            details = "; ".join(str(p) for p in problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise RewriterError(f"shape verification found {len(problems)} problem(s): {details}{more}")
        return ir.passes.PassResult(model, modified=False)


class VerifyShapesPass(VerifyReduceProdShapesPass):
    """Deprecated name of :class:`VerifyReduceProdShapesPass` (it checks the ReduceProd outputs'
    shapes, and ONNX strict inference)."""

    def __init__(self, *, allow_invalid_input: bool = False, freeze_input_defaults=None) -> None:
        import warnings

        warnings.warn("rewriter.VerifyShapesPass is rewriter.VerifyReduceProdShapesPass (it checks the "
                      "ReduceProd outputs' shapes); the old name will go", DeprecationWarning, stacklevel=2)
        super().__init__(allow_invalid_input=allow_invalid_input, freeze_input_defaults=freeze_input_defaults)
