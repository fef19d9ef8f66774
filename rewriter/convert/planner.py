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

import logging

import onnx

from rewriter.convert import delegate, ml_opsets as ml
from rewriter.convert import ir_version as ir_versions
from rewriter.convert.delegate import HOLD_DOMAIN
from rewriter.convert.blockers import Blocker, Label
from rewriter.convert.conversion_report import MAX_LISTED, ConversionBlocked, ConvertReport, what as _what
from rewriter.convert.engine import Engine
from rewriter.convert.model_state import ConversionState
from rewriter.errors import ConversionError, RewriterError
from rewriter.graph import traversal, unused_values as unused
from rewriter.graph.input_defaults import explain, input_defaults
from rewriter.io import check_model
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.spec import TargetSpec
from rewriter.graph.names import fresh_name

__all__ = ["convert_model", "ConvertReport", "ConversionBlocked"]

logger = logging.getLogger(__name__)


def _set_opset(opset_import, version: int) -> None:
    for entry in opset_import:
        if is_default_domain(entry.domain):
            entry.version = version


def convert_model(
    model: onnx.ModelProto, to: int | TargetSpec | None, *, base_dir: str | None = None,
    strict_check: bool = True, plan_only: bool = False, inferred=None,
    ir_version: int | None = None, ml_opset: int | None = None,
) -> tuple[onnx.ModelProto, ConvertReport]:
    """Convert ``model`` to ``to``: an opset, or a :class:`rewriter.targets.spec.TargetSpec`
    (opsets, pinned IR version and runtime at once; then without ``ir_version``/``ml_opset``);
    returns the new model and a report.

    The result passes the ONNX checker, and with ``strict_check`` (the default) strict
    shape inference too; the command line turns that off only when its own shape
    verification of the result (which includes strict inference) follows.

    Every node is planned before anything is written: when some cannot be converted, a
    :class:`ConversionBlocked` (a ConversionError) lists every blocking node. With
    ``plan_only`` nothing raises for blockers: the report says what would happen (and the
    returned model is a partly converted scratch copy, not to be used). ``inferred``: ``model``
    after ONNX shape inference (``onnx.shape_inference.infer_shapes``) when the caller has it,
    or a :class:`rewriter.graph.inferred.LazyInference` (run only if some step needs types).

    The IR version (:mod:`rewriter.convert.ir_version`): going down, the lowest that the
    result needs; otherwise the input's, raised only as the result needs. ``ir_version`` pins
    it, the runtime's newest caps it; either rewrites what an older IR cannot hold where that
    is exact, and fails (before anything is written) naming what it cannot.

    ``ml_opset``: the ``ai.onnx.ml`` opset to reach (:mod:`rewriter.convert.ml_opsets`; default: kept).
    An op the runtime lacks (``TargetSpec.lacks``) is expanded into its function body like an op
    newer than the target, or blocks; a node the runtime would replace by its function body
    wrongly (ONNX Runtime 1.15 / 1.16, float16 LayerNormalization at 18: ``rewriter.targets.inlining``)
    is expanded here into the body for the target opset. An opset of None converts only the
    ``ai.onnx.ml`` domain.
    """
    if isinstance(to, TargetSpec):
        if ir_version is not None or ml_opset is not None:
            raise TypeError("give ir_version and ml_opset in the TargetSpec, not beside it")
        spec = to
    else:
        spec = TargetSpec(to, ml_opset, ir_version)
    source = traversal.opset_version(model.opset_import)
    source_ml = ml.ml_opset(model.opset_import)
    to_version, ml_to, cap, paired = _reachable(spec, source, source_ml)
    result = onnx.ModelProto()
    result.CopyFrom(model)
    report = ConvertReport(source, to_version)
    report.source_ml_opset, report.target_ml_opset = source_ml, ml_to if ml_to is not None else source_ml
    if paired is not None:
        report.notes.append(ml.paired_note(paired, source_ml, ml_to))
    state = ConversionState(result, model, base_dir, report, inferred)

    engine = Engine(state, to_version, spec.runtime)
    if source is not None:
        engine.run()
    if source_ml is not None and (ml_to is not None and ml_to != source_ml or spec.runtime is not None):
        engine.blockers += ml.convert_ml(result, report.target_ml_opset, report,
                                         spec.lacks if spec.runtime is not None else None)
    if spec.runtime is not None:
        engine.blockers += _foreign_blockers(result, spec.runtime, engine.blockers)
    scopes = _remove_unused(result, state, engine)
    defaults = input_defaults(model) if engine.blockers else ()
    for b in engine.blockers if defaults else ():  # a refusal an input's default caused says so
        b.reason = explain(b.reason, defaults)
    report.blockers = engine.blockers
    down = to_version < (source or 0) if source is not None else False
    down = down or (source_ml or 0) > (report.target_ml_opset or 0)
    if plan_only:
        if source is not None:
            _set_opset(result.opset_import, to_version)
        try:
            _choose_ir_version(result, model, spec.ir_version, cap, report, down=down)
        except ConversionError as e:
            report.ir_blockers.append(str(e))
        return result, report
    if engine.blockers:
        raise ConversionBlocked(engine.blockers, _what(source, to_version, source_ml, report.target_ml_opset))
    if source is not None:  # (a model of only the ai.onnx.ml domain has no default-domain steps)
        _finish_default_domain(result, engine, to_version, scopes, report)
    _choose_ir_version(result, model, spec.ir_version, cap, report, down=down)
    _validate(result, model, strict_check)
    return result, report


def _reachable(spec: TargetSpec, source, source_ml):
    """(default-domain opset, ML opset, IR cap, ML pairing) the conversion goes to; RewriterError
    (ConversionError) for what is out of range or asks nothing of this model."""
    latest = onnx.defs.onnx_opset_version()
    to_version, ml_to, cap = spec.opset, spec.ml_opset, spec.max_ir_version
    if to_version is None:
        to_version = source
        if ml_to is None:
            raise RewriterError("nothing to convert: give a target opset, an ML opset or both")
    if ml_to is not None:
        ml_latest = ml.latest()
        if not 1 <= ml_to <= ml_latest:
            raise RewriterError(f"the ai.onnx.ml opset must be in 1..{ml_latest}, got {ml_to}")
        if source_ml is None:
            raise ConversionError("the model does not import the ai.onnx.ml domain: no ML opset to convert")
    if to_version is not None and not 1 <= to_version <= latest:
        raise RewriterError(f"target opset must be in 1..{latest}, got {to_version}")
    for name, value in (("--ir-version", spec.ir_version), ("the target's IR version", cap)):
        if value is not None and not ir_versions.LOWEST <= value <= onnx.IR_VERSION:
            raise RewriterError(f"{name} must be in {ir_versions.LOWEST}..{onnx.IR_VERSION} (IR 1 and 2 have "
                                f"no opset imports; {onnx.IR_VERSION} is the newest this onnx knows), got {value}")
    paired = None  # a model importing only ai.onnx.ml, given an opset: what a runtime of that opset loads
    if source is None and ml_to is None and source_ml is not None and to_version is not None:
        paired = ml.paired_with(to_version)
        ml_to = min(source_ml, paired.ml_opset)
        cap = paired.ir_version if cap is None else min(cap, paired.ir_version)
    if source is None and ml_to is None:
        raise ConversionError("the model does not import the default ONNX domain: nothing to convert"
                              + (" (its ai.onnx.ml opset converts with --ml-opset)" if source_ml else ""))
    return to_version, ml_to, cap, paired


def _foreign_blockers(model: onnx.ModelProto, runtime, blocked) -> list[Blocker]:
    """The nodes of a domain the runtime has no data for (``com.microsoft``, ...) that the
    conversion keeps (a lowering, run before it, took those it can), as blockers; ``blocked``: those
    already blocked, not named twice."""
    from rewriter.targets.foreign_ops import foreign

    seen = {(b.name, b.where, b.op) for b in blocked}
    found = []
    for (domain, op), node, scope in foreign(model, runtime):
        label = Label(node, scope)
        if domain and (label.name, label.where, op) not in seen:
            found.append(Blocker(str(label), f"{domain}:{op}", "lower", f"{runtime.name} is not known to implement "
                                 f"{domain}:{op} and rewriter has no lowering of it to standard ONNX",
                                 "onnxruntime", name=label.name, where=label.where))
    return found


def _remove_unused(result, state, engine):
    """Remove the constants no node reads any more (a blocked node's go too, and its blocker
    unless another node still makes its outputs); returns the scopes walked at the start when
    they still describe the model (all top-level bodies, the main graph and functions, since a
    subgraph's node may have been replaced by a copy, and no expansion added any), else None."""
    scopes = state.scopes if len(state.scopes) == state.original_scope_count and \
        all(s.parent is None for s in state.scopes) else None
    if state.maybe_unused or state.added_values:
        unused.remove_unused(result, only={name for name, _ in state.maybe_unused} | set(state.added_values),
                             scopes=scopes)
        alive = {o for s in traversal.iter_scopes(result) for n in s.body.node for o in n.output} \
            if engine.blockers else set()
        engine.blockers = [b for b in engine.blockers if b.key is None or any(o in alive for o in b.key if o)]
    return scopes


def _finish_default_domain(result, engine, to_version: int, scopes, report: ConvertReport) -> None:
    """Delegate what onnx's converter does, give nodes unique names, set the opset imports."""
    # Before onnx's converter sees the model: it cannot parse IR 0 (unset) or 1, which the API
    # and --allow-invalid-input accept, so the IR becomes at least the target opset's; and it
    # reads initializers that are not graph inputs only from IR 4 (the constants adapters add).
    # The result's IR version is chosen again at the end (tests/convert/test_ir_before_delegation.py).
    imports = [onnx.helper.make_opsetid("", to_version),
               *(o for o in result.opset_import if not is_default_domain(o.domain))]
    result.ir_version = max(result.ir_version,
                            onnx.helper.find_min_ir_version_for(imports, ignore_unknown=True))
    if result.ir_version < 4 and any(  # initializers that are not graph inputs (added constants) need IR 4
            t.name not in {i.name for i in s.body.input} for s in traversal.iter_scopes(result)
            if not s.is_function for t in s.body.initializer):
        result.ir_version = 4
    if engine.delegated:
        report.version_converter_called = True
        _delegate(result, engine.delegated, to_version)
    _unique_node_names(result, None if engine.delegated else scopes)
    for fn in result.functions:
        _set_opset(fn.opset_import, to_version)
    _set_opset(result.opset_import, to_version)


def _choose_ir_version(result, model, pin, cap, report: ConvertReport, *, down: bool) -> None:
    """Set the result's IR version (see :func:`convert_model`), lowering it where needed.

    A feature the input already used above its own IR version (node metadata in an IR-8 file,
    which readers of IR 8 ignore) does not raise the result's: the lowest IR chosen counts
    each feature at most at the input's IR. Going down unpinned, metadata holds nothing (older
    readers skip it) and a note names what keeps the IR above the opset imports' (``going_down``)."""
    if not down and pin is None and cap is None and model.ir_version >= 4:
        # every feature counts at most at the input's IR (>= 4), which going up is kept: the
        # walk over every node for features would change nothing
        result.ir_version = max(model.ir_version, ir_versions.opset_ir(result.opset_import))
        return
    found = ir_versions.features(result)
    if down and pin is None and cap is None:  # the IR follows the opset, or the summary says what holds it
        opsets = ir_versions.opset_ir(result.opset_import)
        chosen, holding = ir_versions.going_down(found, opsets, model.ir_version)
        if holding:
            report.notes.append(ir_versions.kept_note(chosen, opsets, holding))
        result.ir_version = chosen
        return
    tolerated = max([ir_versions.opset_ir(result.opset_import),
                     *(ir_versions.counted(f, model.ir_version) for f in found)])
    natural = tolerated if down else max(model.ir_version, tolerated)
    chosen = pin if pin is not None else min(natural, cap) if cap is not None else natural
    if (pin is not None or cap is not None) and chosen < ir_versions.needed(result, found):
        report.ir_changes += ir_versions.lower(result, chosen)
    elif chosen < ir_versions.opset_ir(result.opset_import):
        report.ir_changes += ir_versions.lower(result, chosen)  # refuses, naming the opset imports
    result.ir_version = chosen


def _delegate(result: onnx.ModelProto, delegated: set, target: int) -> None:
    """Run onnx.version_converter on the bodies holding delegated nodes, every other
    default-domain node held out of its reach in a private domain."""
    scopes = list(traversal.iter_scopes(result))
    wanted = set(delegated)  # the outputs of each delegated node (value names are unique)
    holding = set()  # bodies whose nodes (or whose subgraphs' nodes) the converter must see
    for scope in scopes:
        for node in scope.body.node:
            if tuple(node.output) in wanted:
                s = scope
                while s is not None:
                    holding.add(id(s.body))
                    s = s.parent
    for scope in scopes:
        for node in scope.body.node:
            if not is_default_domain(node.domain) or tuple(node.output) in wanted:
                continue
            if any(id(g) in holding for g in traversal.subgraphs(node)):
                continue  # a control-flow node whose body needs the converter goes with it
            node.domain = HOLD_DOMAIN
    if id(result.graph) in holding:
        delegate.convert_main_graph(result, target)
    for fn in result.functions:
        if id(fn) in holding:
            delegate.convert_function(result, fn, target)
    for body in [result.graph, *result.functions]:
        delegate.release(body)


def _unique_node_names(model: onnx.ModelProto, scopes=None) -> None:
    """Give every node a name no other node of the model has (ONNX Runtime refuses duplicates);
    the first node to carry a name keeps it. ``scopes``: the model's, when the caller has them."""
    nodes = [n for s in (traversal.iter_scopes(model) if scopes is None else scopes) for n in s.body.node]
    names = [n.name for n in nodes]
    taken = set(names)
    taken.discard("")
    if len(taken) == len(names) - names.count(""):
        return  # already unique (the common case): one pass over the names
    seen: set[str] = set()
    for node in nodes:
        if not node.name:
            continue
        if node.name in seen:
            node.name = fresh_name(taken, node.name)  # (taken holds node.name: a suffix follows)
        seen.add(node.name)


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
