"""A conversion for a runtime target: its opsets, IR version and the ops it implements
(:mod:`rewriter.targets`) turned into :func:`rewriter.convert.planner.convert_model`'s
arguments."""

from __future__ import annotations

import onnx

from rewriter.convert import ml
from rewriter.convert.planner import ConvertReport, convert_model
from rewriter.errors import RewriterError
from rewriter.graph import traversal

__all__ = ["convert_for", "resolve"]


def resolve(model: onnx.ModelProto, target_opset, ml_opset, ir_version, target):
    """(target opset, ML opset, pinned IR, IR cap, lacks, the Target) for ``model``."""
    if target is None:
        if target_opset is None and ml_opset is None:
            raise RewriterError("give a target opset (or 'latest'), an ML opset, or a runtime target")
        return target_opset, ml_opset, ir_version, None, None, None
    from rewriter.targets import Target, parse_target

    runtime = target if isinstance(target, Target) else parse_target(target)
    source = traversal.opset_version(model.opset_import)
    source_ml = ml.ml_opset(model.opset_import)
    if target_opset is None and source is not None:
        target_opset = _implemented_opset(model, runtime, "", runtime.opset_for("", source))
    if ml_opset is None and source_ml is not None:
        ml_opset = _implemented_opset(model, runtime, ml.ML_DOMAIN, runtime.opset_for(ml.ML_DOMAIN, source_ml))
    return target_opset, ml_opset, ir_version, runtime.ir_version, runtime.lacks, runtime


def _implemented_opset(model: onnx.ModelProto, runtime, domain: str, start: int) -> int:
    """The newest opset of ``domain`` from ``start`` down at which the runtime implements every
    op of the model in it, or the conversion can write it with ops it has (a function body; the
    TreeEnsembleRegressor a TreeEnsemble becomes): ONNX Runtime 1.15 takes opset 19 but has no
    kernel for Cast-19 or Identity-19, so a model with a Cast goes to 18 for it; ONNX Runtime 1.20
    takes ai.onnx.ml 5 but has no TreeEnsemble-5 kernel."""
    from rewriter.convert import registry
    from rewriter.convert.paths import has_function_body

    if runtime.ops is None and not runtime.unsupported and not runtime.missing:
        return start
    domains = ("", "ai.onnx") if domain == "" else (domain,)
    ops = {n.op_type for s in traversal.iter_scopes(model) for n in s.body.node if n.domain in domains}
    low = runtime.min_opsets.get(domain, 1)

    def writable(op: str, v: int | None) -> bool:
        if domain == ml.ML_DOMAIN:
            return v is None and op in ml.REPLACED
        versions = registry.schema_versions(op)
        return bool(versions) and has_function_body(op, v if v is not None else versions[0])

    def fine(opset: int) -> bool:
        for op in ops:
            v = registry.schema_version_at_domain(op, opset, domain)
            if (v is None or runtime.lacks(domain, op, v)) and not writable(op, v):
                return False
        return True

    return next((o for o in range(start, low - 1, -1) if fine(o)), start)


def convert_for(model: onnx.ModelProto, target_opset=None, *, ml_opset=None, ir_version=None, runtime=None,
                **kwargs) -> tuple[onnx.ModelProto, ConvertReport]:
    """:func:`convert_model` with the opsets, IR version and missing ops of ``runtime`` (a
    :class:`rewriter.targets.Target`, ``RUNTIME==VERSION`` or a profile path) when given."""
    opset, ml_target, pin, cap, lacks, _ = resolve(model, target_opset, ml_opset, ir_version, runtime)
    return convert_model(model, opset, ml_opset=ml_target, ir_version=pin, max_ir_version=cap, lacks=lacks,
                         **kwargs)
