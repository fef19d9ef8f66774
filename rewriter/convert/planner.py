"""Opset conversion: the project's adapters where it has them, other ops kept or delegated.

The conversion works on a copy of the model and fails as a whole: every node of an op the
registry (``rewriter.convert.registry``) has adapters for is converted first, one schema
step at a time (the cheap part, and where most impossible conversions are found); then the
other ops are planned by ``rewriter.convert.delegate`` (type-only steps kept as they are, the rest given to
``onnx.version_converter`` with the nodes already in target form held out of its reach);
then the result is validated with the ONNX checker and strict shape inference. The input
is never mutated.
"""

from __future__ import annotations

import collections
import dataclasses
import logging

import onnx

from rewriter.convert import delegate, registry
from rewriter.convert.context import NodeContext
from rewriter.convert.delegate import DEFAULT_DOMAINS, HOLD_DOMAIN
from rewriter.convert.state import ConversionState
from rewriter.errors import ConversionError, RewriterError
from rewriter.graph import traversal, unused
from rewriter.io import check_model

__all__ = ["convert_model", "ConvertReport"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ConvertReport:
    """What a conversion did."""

    source_opset: int
    target_opset: int
    own: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    changes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    delegated: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    type_only: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    version_converter_called: bool = False

    def summary_lines(self) -> list[str]:
        lines = [f"{op} nodes: {n}" for op, n in sorted(self.own.items())] or ["ReduceProd nodes: 0"]
        lines += [f"  {kind}: {n}" for kind, n in sorted(self.changes.items())]
        if self.type_only:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.type_only.items()))
            lines.append(f"other ops with type-only schema changes (kept as they are): {ops}")
        if self.delegated:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.delegated.items()))
            lines.append(f"other ops converted by onnx.version_converter: {ops}")
        else:
            lines.append("onnx.version_converter not needed")
        return lines


def _set_opset(opset_import, version: int) -> None:
    for entry in opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            entry.version = version


def convert_model(
    model: onnx.ModelProto, target_opset: int, *, base_dir: str | None = None,
    strict_check: bool = True,
) -> tuple[onnx.ModelProto, ConvertReport]:
    """Convert ``model`` to ``target_opset``; returns the new model and a report.

    The result passes the ONNX checker, and with ``strict_check`` (the default) strict
    shape inference too; the command line turns that off only when its own shape
    verification of the result (which includes strict inference) follows.

    Raises ConversionError naming the node when any part cannot be converted.
    """
    latest = onnx.defs.onnx_opset_version()
    if not 1 <= target_opset <= latest:
        raise RewriterError(f"target opset must be in 1..{latest}, got {target_opset}")
    source = traversal.opset_version(model.opset_import)
    if source is None:
        raise ConversionError("the model does not import the default ONNX domain: nothing to convert")
    result = onnx.ModelProto()
    result.CopyFrom(model)
    report = ConvertReport(source, target_opset)
    state = ConversionState(result, model, base_dir, report)

    own = [(n, scope) for scope in state.scopes for n in scope.body.node
           if n.domain in DEFAULT_DOMAINS and registry.has_adapters(n.op_type)]
    for node, scope in own:
        op_type = node.op_type
        report.own[op_type] += 1
        ctx = NodeContext(state, node, scope)
        # A node an adapter turned into another op (a ReduceProd that became an Identity) still
        # goes through the remaining steps of its original op: their type checks apply to it too.
        for adapter, _from, _to in registry.adapter_path(op_type, scope.opset or source, target_opset):
            adapter(node, ctx)
        state.held.append(node)
    if state.maybe_unused:  # axes constants that no node reads any more
        unused.remove_unused(result, only={name for name, _ in state.maybe_unused})

    # The target may need a newer IR version (initializers that are not graph inputs, which
    # the 13->18 adapter adds, need IR 4): set it before the version converter sees the model.
    imports = [onnx.helper.make_opsetid("", target_opset),
               *(o for o in result.opset_import if o.domain not in DEFAULT_DOMAINS)]
    result.ir_version = max(result.ir_version,
                            onnx.helper.find_min_ir_version_for(imports, ignore_unknown=True))
    in_graph, in_functions = delegate.plan_other_ops(state, target_opset)
    report.delegated = in_graph + in_functions
    if in_graph or in_functions:
        # Nodes already in target form go to a private domain the converter leaves alone.
        report.version_converter_called = True
        for node in state.held:
            node.domain = HOLD_DOMAIN
        if in_graph:
            delegate.convert_main_graph(result, target_opset)
        for fn in result.functions:
            if any(n.domain in DEFAULT_DOMAINS for n in fn.node):
                delegate.convert_function(result, fn, target_opset)
        for body in [result.graph, *result.functions]:
            delegate.release(body)
    for fn in result.functions:
        _set_opset(fn.opset_import, target_opset)
    _set_opset(result.opset_import, target_opset)
    _validate(result, model, strict_check)
    return result, report


def _validate(result: onnx.ModelProto, original: onnx.ModelProto, strict: bool) -> None:
    """The checker (with strict shape inference when ``strict``) must accept the result.

    When the input itself already fails strict inference, that problem is the input's, not
    the conversion's: the result then only has to pass the structural checker, and the
    shape verification around rewrites reports the inherited problem as a warning.
    """
    def error_of(model, full_check):
        try:
            check_model(model, full_check=full_check)
        except Exception as e:  # ValidationError, InferenceError, ...
            return " ".join(str(e).split())
        return None

    error = error_of(result, strict)
    if error is None:
        return
    if strict and error_of(original, True) is not None:
        error = error_of(result, False)
        if error is None:
            logger.warning("the input already fails strict shape inference; the result is checked "
                           "structurally only")
            return
    raise ConversionError(f"the converted model is not valid: {error}")
