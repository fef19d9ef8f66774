"""rewriter: migrate ONNX models between opsets, optimize them exactly, verify shapes and numerics.

Every function accepts an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path to a model
file (external data is read from beside it) and returns a new model without changing its
argument: the same kind it was given, and an ``onnx.ModelProto`` for a path. The work is
done by the subpackages (``rewriter.convert``, ``rewriter.fold``, ``rewriter.verify``);
their imports are deferred so that ``import rewriter`` and the CLI start-up stay cheap.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, Union

from rewriter import entry
from rewriter.errors import ModelLoadError, RewriterError

if TYPE_CHECKING:  # the annotations only; importing onnx / onnx_ir here would slow `import rewriter`
    import numpy as np
    import onnx
    import onnx_ir

    from rewriter.verify.numerics import NumericsReport
    from rewriter.verify.shapes.shape_report import ShapeProblem

ModelLike = Union["onnx.ModelProto", "onnx_ir.Model", str, os.PathLike]
"""What every function accepts as a model: a ModelProto, an onnx_ir Model or a path to a model file."""


__all__ = [
    "RewriterError", "ModelLoadError", "convert_opset", "convert_precision", "fold_reduce_prod", "fold_constants",
    "optimize_model", "verify_reduce_prod_shapes", "verify_shapes", "verify_numerics", "reduce_prod", "lower_ops",
    "LowerOpsPass", "ConvertOpsetPass", "ConvertPrecisionPass", "FoldReduceProdPass", "VerifyReduceProdShapesPass",
    "VerifyShapesPass", "OptimizePass",
]

_LAZY = {
    "ConvertOpsetPass": "rewriter.passes",
    "ConvertPrecisionPass": "rewriter.passes",
    "FoldReduceProdPass": "rewriter.passes",
    "VerifyReduceProdShapesPass": "rewriter.passes",
    "VerifyShapesPass": "rewriter.passes",
    "OptimizePass": "rewriter.passes",
    "reduce_prod": "rewriter.kernels",
    "lower_ops": "rewriter.lowering",
    "LowerOpsPass": "rewriter.passes",
}


def convert_opset(model: ModelLike, target_opset: int | str | None = None, *, ml_opset: int | None = None,
                  ir_version: int | None = None, target: str | None = None, allow_invalid_input: bool = False,
                  freeze_input_defaults: bool | str | list[str] | None = None,
                  input_shapes: dict[str, list[int]] | None = None, fix_dims: dict[str, int] | None = None) -> Any:
    """Convert a model's default-domain opset to ``target_opset``, up or down.

    Every node is converted one schema step at a time in every scope (main graph,
    If/Loop/Scan bodies, model-local functions); the result passes the ONNX checker and
    strict shape inference. The IR version follows: going down it becomes the lowest the
    result needs; ``ir_version`` pins it (what the older IR cannot hold is rewritten where
    exact, else the conversion fails naming it).

    Args:
        model: an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path to a model file.
        target_opset: the default-domain opset to reach, 1..``onnx.defs.onnx_opset_version()``
            or ``"latest"``; None keeps it (to convert only ``ml_opset``, or for ``target``).
        ml_opset: the ``ai.onnx.ml`` opset to reach (default: kept).
        ir_version: the IR version of the result (default: chosen as above).
        target: a runtime, ``"onnxruntime==1.15"`` / ``"tensorrt==8.6"`` or a profile .json
            path: the opsets and IR version it implements are chosen (a model already within
            them keeps its opsets), an op it lacks is expanded into its function body, and
            its per-op restrictions (TensorRT: onnx-tensorrt's operators.md) are met by exact
            rewrites or refused, naming the node and the restriction.
        allow_invalid_input: process a model ``onnx.checker`` refuses (``--allow-invalid-input``);
            the result is still held to the checker.
        freeze_input_defaults: True, or graph input names: those inputs that have an initializer
            (a default a caller may override) become constants first, as ``--freeze-input-defaults``.
        input_shapes: graph input name -> sizes, fixed in the result as ``--input-shape`` fixes them
            (the input's symbols take these sizes wherever they appear); runtimes that need static
            dims (tract, TVM, LiteRT) take forms with them that they refuse otherwise.
        fix_dims: symbol -> size, fixed wherever it appears, as ``--fix-dim``.

    Returns:
        The converted model: the same kind as ``model`` (a ModelProto for a path), self-contained
        (``onnx.save`` and ONNX Runtime take it as it is).

    Raises:
        TypeError: ``model`` or ``target_opset`` is of the wrong type.
        ModelLoadError: the input is not a valid model (the message names the node or tensor,
            as the command line's does).
        RewriterError: the conversion is impossible (the message names every blocking
            node and why). Nothing is half-converted.

    Example:
        >>> import rewriter
        >>> m13 = rewriter.convert_opset("model.onnx", 13)  # doctest: +SKIP
        >>> for_old_ort = rewriter.convert_opset("model.onnx", target="onnxruntime==1.15")  # doctest: +SKIP
    """
    target_opset = entry.convert_args(target_opset, ml_opset, ir_version, target)
    shapes = entry.shape_args(input_shapes, fix_dims)
    from rewriter.convert import convert_for

    proto, kind, base_dir = entry.open_model(model, allow_invalid_input)
    proto, frozen = entry.freeze(proto, freeze_input_defaults)
    proto = entry.fixed_shapes(proto, *shapes)
    try:
        result = convert_for(proto, target_opset, ml_opset=ml_opset, ir_version=ir_version, runtime=target,
                             base_dir=base_dir)[0]
        from rewriter.graph.input_defaults import check_kept

        check_kept(result, frozen)
    except RewriterError as e:
        from rewriter.verify.inputs.validate import blame_input

        blame_input(proto, e, model if kind == "path" else "<model>")
        raise
    return entry.result_of(result, kind, base_dir)


def convert_precision(model: ModelLike, dtype: str = "float16", *, keep_io_types: bool = True,
                      keep_op_types: tuple[str, ...] | list[str] = (), keep_nodes: tuple[str, ...] | list[str] = (),
                      target: str | None = None, opset: int | str | None = None, optimize: bool = False,
                      calibrate: bool = False, max_error: float | None = None, calibration_data: list | None = None,
                      keep_io_precision: bool = False,
                      allow_invalid_input: bool = False, freeze_input_defaults: bool | str | list[str] | None = None,
                      input_shapes: dict[str, list[int]] | None = None, fix_dims: dict[str, int] | None = None) -> Any:
    """Rewrite a model's float32 computation to ``dtype`` ("float16" or "bfloat16").

    Initializers, Constant and ConstantOfShape values, Cast targets, random ops' dtypes and
    value_info change type in every graph and subgraph; what must stay float32 does (inputs a
    schema fixes to float, ops without a half type or, for ``target``, without a half kernel,
    constants beyond float16's range unless clamping is exact (masks before a Softmax), shape
    arithmetic, ``keep_op_types`` and ``keep_nodes``), with one Cast per value at the boundary.
    A call of a model-local function runs in half through a copy of its function specialized to
    the call. The result passes the ONNX checker.

    Args:
        model: an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path to a model file.
        dtype: "float16" or "bfloat16".
        keep_io_types: graph inputs and outputs keep float32 (Casts at the edge); False makes
            them ``dtype`` too.
        keep_op_types, keep_nodes: op types and node names that stay float32 (a str is one name).
        target: a runtime (``"onnxruntime==1.17"``, ...): the model is first converted to its opsets
            and IR version, as ``convert --dtype --target`` does; ops it has no half kernel for stay float32.
        opset: the default-domain opset to convert to first (``--opset`` with ``--dtype``).
        optimize: optimize first (``--optimize``).
        keep_io_precision: the first consumers of each float graph input compute in float32 from
            half weights, so the inputs are not rounded (``--keep-io-precision``).
        calibrate: measure magnitudes on ``calibration_data`` (default: one set of random inputs)
            and keep float32 what would overflow float16 (``--calibrate``).
        max_error: keep float32 the runs of nodes whose half precision is measured (in ONNX
            Runtime, on ``calibration_data``) to take a float output's relative L2 error beyond
            this, as ``convert --max-error``.
        calibration_data: for ``max_error`` and ``calibrate``: a list of {graph input name: array}
            (default: one set of random inputs, seed 0), as ``--calibration-data``.
        allow_invalid_input: process a model ``onnx.checker`` refuses (``--allow-invalid-input``).
        freeze_input_defaults: True, or graph input names: those inputs that have an initializer
            (a default a caller may override) become constants first, as ``--freeze-input-defaults``.
        input_shapes, fix_dims: dims fixed in the result, as for :func:`convert_opset`
            (``--input-shape``, ``--fix-dim``); the random inputs of ``calibrate`` / ``max_error``
            take those sizes.

    The CLI's ``convert --dtype``, this function and :class:`rewriter.ConvertPrecisionPass` run
    one pipeline (:func:`rewriter.precision.pipeline.convert_half`): the same arguments give the
    same model.

    Raises:
        ModelLoadError: the input is not a valid model (the node or tensor named).
        RewriterError: a bad argument, the result would not be a valid model, or ``max_error``
            cannot be met.
    """
    from rewriter.precision.pipeline import HalfOptions, convert_half
    from rewriter.targets.spec import TargetSpec

    shapes = entry.shape_args(input_shapes, fix_dims)
    proto, kind, base_dir = entry.open_model(model, allow_invalid_input)
    spec = TargetSpec.parse(opset, target=target) if opset is not None or target is not None else None
    options = HalfOptions(keep_io_types=keep_io_types, keep_op_types=keep_op_types, keep_nodes=keep_nodes,
                          optimize=optimize, calibrate=calibrate, max_error=max_error,
                          calibration_data=calibration_data, keep_io_precision=keep_io_precision,
                          input_shapes=shapes[0])
    proto, frozen = entry.freeze(proto, freeze_input_defaults)
    proto = entry.fixed_shapes(proto, *shapes)
    result, _ = convert_half(proto, dtype, spec, options, base_dir=base_dir)
    from rewriter.graph.input_defaults import check_kept

    check_kept(result, frozen)
    return entry.result_of(result, kind, base_dir)


def fold_reduce_prod(model: ModelLike, *, int_overflow: str = "skip", allow_invalid_input: bool = False,
                     freeze_input_defaults: bool | str | list[str] | None = None) -> Any:
    """Replace every ReduceProd whose inputs are constant with its exact value (what
    ``rewriter fold`` does; :func:`optimize_model` folds every other constant node too).

    Args:
        model: an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path to a model file.
        int_overflow: integer products that overflow: ``"skip"`` leaves the node (with a
            warning; runtimes disagree), ``"wrap"`` folds the value modulo 2^bits (NumPy,
            the ONNX reference), ``"saturate"`` the clamped one (ONNX Runtime's CPU kernel).
        allow_invalid_input: process a model ``onnx.checker`` refuses (``--allow-invalid-input``).
        freeze_input_defaults: True, or graph input names: those inputs that have an initializer
            (a default a caller may override) become constants first, as ``--freeze-input-defaults``.

    Returns:
        The folded model, the same kind as ``model`` (a ModelProto for a path); constants
        the folded nodes used and nothing else reads are removed.

    Raises:
        TypeError: ``model`` is of the wrong type.
        ModelLoadError: the input is not a valid model (a node's axes included; the node named).
        RewriterError: ``int_overflow`` is not one of the modes.

    Example:
        >>> folded = rewriter.fold_reduce_prod(model, int_overflow="wrap")  # doctest: +SKIP
    """
    from rewriter.fold import FOLD_INT_OVERFLOW_POLICIES, fold_model

    if int_overflow not in FOLD_INT_OVERFLOW_POLICIES:
        raise RewriterError(f"int_overflow must be one of {', '.join(FOLD_INT_OVERFLOW_POLICIES)}, "
                            f"got {int_overflow!r}")
    proto, kind, base_dir = entry.open_model(model, allow_invalid_input)
    proto, _ = entry.freeze(proto, freeze_input_defaults)
    return entry.result_of(fold_model(proto, int_overflow=int_overflow, base_dir=base_dir)[0], kind, base_dir)


def fold_constants(model: ModelLike, *, int_overflow: str = "skip", allow_invalid_input: bool = False) -> Any:
    """Deprecated name of :func:`fold_reduce_prod` (it folds ReduceProd only, unlike
    onnxscript's ``fold_constants``; :func:`optimize_model` folds every constant node)."""
    import warnings

    warnings.warn("rewriter.fold_constants is rewriter.fold_reduce_prod (it folds ReduceProd only); "
                  "the old name will go", DeprecationWarning, stacklevel=2)
    return fold_reduce_prod(model, int_overflow=int_overflow, allow_invalid_input=allow_invalid_input)


def optimize_model(model: ModelLike, *, fold_limit: int = 512 * 512 * 4, int_overflow: str = "skip",
             strip_metadata: bool = False, allow_removing_custom_ops: bool = False,
             allow_invalid_input: bool = False, freeze_input_defaults: bool | str | list[str] | None = None,
             input_shapes: dict[str, list[int]] | None = None, fix_dims: dict[str, int] | None = None) -> Any:
    """Shrink a model without changing what it computes or losing names and metadata.

    In the main graph, every subgraph and every model-local function: ReduceProd folded by
    the exact kernel, every other constant node folded (integers exactly, floats with ONNX
    Runtime's kernels), If on a constant condition inlined, fusions (BatchNormalization into
    Conv/Gemm, MatMul+Add into Gemm, Min/Max into Clip, no-op and chain rules), repeated nodes
    merged, unused nodes and initializers removed, Constant nodes turned into initializers.

    Args:
        model: an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path to a model file.
        fold_limit: bytes; a fold that would grow the model by more is skipped.
        int_overflow: integer results that overflow: ``"skip"`` leaves the node, ``"wrap"``
            folds the wrapped value, ``"saturate"`` clamps ReduceProd (as ONNX Runtime does).
        strip_metadata: drop doc strings and metadata (kept by default).
        allow_removing_custom_ops: also remove unused custom-domain nodes (kept by default).
        allow_invalid_input: process a model ``onnx.checker`` refuses (``--allow-invalid-input``).
        freeze_input_defaults: True, or graph input names: those inputs that have an initializer
            (a default a caller may override) become constants first, as ``--freeze-input-defaults``.
        input_shapes, fix_dims: dims fixed first, as for :func:`convert_opset` (``--input-shape``,
            ``--fix-dim``); shape computations they decide are then folded.

    Returns:
        The optimized model, the same kind as ``model`` (a ModelProto for a path).

    Raises:
        TypeError: ``model`` is of the wrong type.
        ModelLoadError: the input is not a valid model (the node or tensor named).
        RewriterError: ``int_overflow`` is not one of the modes.

    Example:
        >>> small = rewriter.optimize_model("model.onnx")  # doctest: +SKIP
    """
    from rewriter.fold import FOLD_INT_OVERFLOW_POLICIES
    from rewriter.optimize import OptimizeOptions, optimize_proto

    if int_overflow not in FOLD_INT_OVERFLOW_POLICIES:
        raise RewriterError(f"int_overflow must be one of {', '.join(FOLD_INT_OVERFLOW_POLICIES)}, "
                            f"got {int_overflow!r}")
    shapes = entry.shape_args(input_shapes, fix_dims)
    proto, kind, base_dir = entry.open_model(model, allow_invalid_input)
    proto = entry.fixed_shapes(proto, *shapes)
    options = OptimizeOptions(fold_limit=fold_limit, int_overflow=int_overflow, strip_metadata=strip_metadata,
                              allow_removing_custom_ops=allow_removing_custom_ops,
                              freeze_input_defaults=freeze_input_defaults)
    return entry.result_of(optimize_proto(proto, options, base_dir=base_dir)[0], kind, base_dir)


def verify_reduce_prod_shapes(model: ModelLike, *, allow_invalid_input: bool = False,
                              freeze_input_defaults: bool | str | list[str] | None = None) -> list[ShapeProblem]:
    """Check every ReduceProd output's shape against the rule, and ONNX strict shape inference.

    The shapes of other ops are checked only as far as ONNX's strict inference checks them
    (``rewriter check``'s report has one row per ReduceProd).

    Args:
        model: an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path to a model file.
        allow_invalid_input: check a model ``onnx.checker`` refuses (``--allow-invalid-input``).
        freeze_input_defaults: True, or graph input names: those inputs that have an initializer
            (a default a caller may override) become constants first, as ``--freeze-input-defaults``.

    Returns:
        A list of ``ShapeProblem`` (each names the node, where it is, and what is wrong);
        empty when every shape is consistent.

    Raises:
        TypeError: ``model`` is of the wrong type.
        ModelLoadError: the input is not a valid model (the node or tensor named).

    Example:
        >>> problems = rewriter.verify_reduce_prod_shapes("model.onnx")  # doctest: +SKIP
        >>> assert not problems, problems
    """
    from rewriter.verify.shapes.check import verify_reduce_prod_shapes as _verify

    proto, _, _ = entry.open_model(model, allow_invalid_input)
    return _verify(entry.freeze(proto, freeze_input_defaults)[0])


def verify_shapes(model: ModelLike, *, allow_invalid_input: bool = False) -> list[ShapeProblem]:
    """Deprecated name of :func:`verify_reduce_prod_shapes` (it checks the ReduceProd outputs'
    shapes, and ONNX strict inference; not every op's shapes by a rule of its own)."""
    import warnings

    warnings.warn("rewriter.verify_shapes is rewriter.verify_reduce_prod_shapes (it checks the ReduceProd "
                  "outputs' shapes); the old name will go", DeprecationWarning, stacklevel=2)
    return verify_reduce_prod_shapes(model, allow_invalid_input=allow_invalid_input)


def verify_numerics(original: ModelLike, rewritten: ModelLike, *, seed: int = 0, rtol: float | None = None,
                    atol: float | None = None, input_shapes: dict[str, list[int]] | None = None,
                    input_values: dict[str, Any] | None = None, allow_invalid_input: bool = False) -> NumericsReport:
    """Run two models on the same random inputs and compare every output.

    ONNX Runtime runs both when it can, ``onnx.reference`` otherwise. Floats compare with a
    per-type tolerance (``rtol``/``atol`` override it), integers and booleans exactly. Models
    with external data of any size run (their data is read where it lives).

    Args:
        original, rewritten: each an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path.
        seed: seed of the random inputs.
        rtol, atol: tolerances for every float output instead of the per-type defaults.
        input_shapes: graph input name -> dims, pinning dynamic dims (default: each symbol is 2).
        input_values: graph input name -> values (a list, or one number for a scalar) fed instead
            of random ones (a sample rate, a length, token ids), as ``--input-value`` does.
        allow_invalid_input: compare models ``onnx.checker`` refuses (``--allow-invalid-input``).

    ONNX Runtime runs in a child process: a crash there (random inputs can make a model divide
    an integer by zero) is reported as a reason, and ``onnx.reference`` is tried instead.

    Returns:
        A ``NumericsReport``: ``.ok``, one comparison per output, the engines used.

    Raises:
        TypeError: a model is of the wrong type.
        ModelLoadError: a model is not a valid model (which, and the node or tensor, named).
        RewriterError: the original model cannot be run on random inputs (no engine runs it,
            or a graph input gives a ReduceProd its axes: random axes are not valid ones).

    Example:
        >>> report = rewriter.verify_numerics("model.onnx", converted)  # doctest: +SKIP
        >>> report.ok
    """
    from rewriter.verify.numerics import verify_numerics as _verify

    a, _, base_a = entry.open_model(original, allow_invalid_input, "the original model")
    b, _, base_b = entry.open_model(rewritten, allow_invalid_input, "the rewritten model")
    return _verify(a, b, seed=seed, rtol=rtol, atol=atol, input_shapes=input_shapes, base_dirs=(base_a, base_b),
                   input_values=input_values)


def _version() -> str:
    """The installed distribution's version (importlib.metadata costs an import: asked lazily)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rewriter")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"


def __getattr__(name: str):
    if name == "__version__":
        value = globals()["__version__"] = _version()
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rewriter' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__ + ["__version__"])
