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

from rewriter.convert import delegate, ml_opsets as ml
from rewriter.convert import ir_version as ir_versions
from rewriter.convert.delegate import HOLD_DOMAIN
from rewriter.convert.engine import Blocker, Engine
from rewriter.convert.model_state import ConversionState
from rewriter.errors import ConversionError, RewriterError
from rewriter.graph import traversal, unused_values as unused
from rewriter.io import check_model
from rewriter.graph.schemas import is_default_domain

__all__ = ["convert_model", "ConvertReport", "ConversionBlocked"]

MAX_LISTED = 20


class ConversionBlocked(ConversionError):
    """Some nodes cannot be converted; ``blockers`` lists every one."""

    def __init__(self, blockers: list[Blocker], what: str):
        self.blockers = blockers
        self.what = what
        shown = "; ".join(b.line() for b in blockers[:MAX_LISTED])
        more = f"; and {len(blockers) - MAX_LISTED} more" if len(blockers) > MAX_LISTED else ""
        hint = " (convert --plan lists each one on its own line)" if len(blockers) > 1 else ""
        super().__init__(f"cannot convert {what}: {len(blockers)} node(s) block it{hint}: {shown}{more}")


def _what(source, target, source_ml, target_ml) -> str:
    """'from opset 18 to 16', with the ai.onnx.ml opsets when they change."""
    parts = [f"from opset {source} to {target}"] if source is not None else []
    if source_ml is not None and target_ml is not None and target_ml != source_ml:
        parts.append(f"{'and ' if parts else 'from '}ai.onnx.ml opset {source_ml} to {target_ml}")
    return " ".join(parts) or f"opset {target}"

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ConvertReport:
    """What a conversion did (or, for a plan, would do)."""

    source_opset: int
    target_opset: int
    own: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    changes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # what adapters did
    delegated: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    type_only: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    expanded: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes
    # op -> nodes replaced by an exact decomposition (ops without a function body)
    decomposed: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    # op -> half-type nodes expanded because the runtime targeted would inline their body wrongly
    inlined_for_runtime: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    steps: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # (op, how) -> steps
    # the steps of nodes the conversion made (function bodies, rewrites' nodes): (op, how) -> steps
    derived_steps: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    nodes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # op -> nodes seen
    blockers: list = dataclasses.field(default_factory=list)
    version_converter_called: bool = False
    ir_changes: list = dataclasses.field(default_factory=list)  # what lowering the IR version rewrote
    ir_blockers: list = dataclasses.field(default_factory=list)  # why the IR version cannot be reached
    source_ml_opset: int | None = None  # the ai.onnx.ml opsets, when the model imports the domain
    target_ml_opset: int | None = None
    # for a runtime target: whose data, what its per-op restrictions made the conversion rewrite
    target_notes: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)  # what the conversion learned or chose, in words

    @property
    def ok(self) -> bool:
        return not self.blockers and not self.ir_blockers

    def summary_lines(self) -> list[str]:
        lines = []
        if self.own:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.own.items()))
            lines.append(f"converted by rewriter's adapters: {ops}")
            lines += [f"  {kind}: {n}" for kind, n in sorted(self.changes.items())]
        if self.expanded:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.expanded.items()))
            lines.append(f"newer than the target, expanded into their ONNX function bodies: {ops}")
        if self.decomposed:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.decomposed.items()))
            lines.append(f"newer than the target, decomposed exactly into older ops: {ops}")
        if self.inlined_for_runtime:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.inlined_for_runtime.items()))
            lines.append(f"half-precision nodes expanded into their ONNX function bodies for opset {self.target_opset}, "
                         f"which the runtime targeted would inline wrongly: {ops}")
        if self.type_only:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.type_only.items()))
            lines.append(f"type-only schema changes (kept as they are): {ops}")
        if self.delegated:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.delegated.items()))
            lines.append(f"converted by onnx.version_converter (its adapter known correct): {ops}")
        lines += [f"for the IR version: {change}" for change in self.ir_changes]
        lines += [f"for the target: {note}" for note in self.target_notes]
        lines += self.notes
        return lines or ["nothing to change"]

    def plan_rows(self) -> list[dict]:
        """Per op type: how many nodes, and how many steps were taken each way."""
        rows = []
        for op in sorted(self.nodes):
            how = {kind: n for (o, kind), n in self.steps.items() if o == op}
            rows.append({"op": op, "nodes": self.nodes[op], "steps": dict(sorted(how.items())),
                         "blocked": sum(1 for b in self.blockers if b.op == op)})
        return rows

    def derived_rows(self) -> list[dict]:
        """Per op type of the nodes the conversion made (expanded function bodies, nodes inserted
        by rewrites): how many steps were taken each way."""
        ops = sorted({op for op, _ in self.derived_steps})
        return [{"op": op, "steps": dict(sorted((kind, n) for (o, kind), n in self.derived_steps.items() if o == op))}
                for op in ops]

    def plan_lines(self) -> list[str]:
        """The plan as text: one line per op type of the model's nodes (their steps), one per op
        type of the nodes the conversion makes, then the blockers (up to MAX_LISTED)."""
        lines = []
        for row in self.plan_rows():
            how = ", ".join(f"{kind} x{n}" for kind, n in row["steps"].items()) or "unchanged"
            lines.append(f"{row['op']}: {row['nodes']} node(s): {how}")
        derived = self.derived_rows()
        if derived:
            lines.append("steps of the nodes the conversion makes (function bodies, rewrites):")
            for row in derived:
                lines.append(f"  {row['op']}: " + ", ".join(f"{kind} x{n}" for kind, n in row["steps"].items()))
        if self.blockers:
            lines.append(f"blocked by {len(self.blockers)} node(s):")
            lines += [f"  {b.line()}" for b in self.blockers[:MAX_LISTED]]
            if len(self.blockers) > MAX_LISTED:
                lines.append(f"  ... and {len(self.blockers) - MAX_LISTED} more")
        lines += [f"IR version: {change}" for change in self.ir_changes]
        lines += [f"blocked by the IR version: {why}" for why in self.ir_blockers]
        lines += [f"target: {note}" for note in self.target_notes]
        lines += self.notes
        return lines

    def to_dict(self) -> dict:
        return {"source_opset": self.source_opset, "target_opset": self.target_opset, "ok": self.ok,
                "ops": self.plan_rows(), "made_by_the_conversion": self.derived_rows(),
                "blockers": [b.to_dict() for b in self.blockers],
                "ir_blockers": list(self.ir_blockers), "ir_changes": list(self.ir_changes),
                "changes": dict(self.changes), "version_converter_called": self.version_converter_called,
                "target_notes": list(self.target_notes), "notes": list(self.notes)}


def _set_opset(opset_import, version: int) -> None:
    for entry in opset_import:
        if is_default_domain(entry.domain):
            entry.version = version


def convert_model(
    model: onnx.ModelProto, target_opset: int, *, base_dir: str | None = None,
    strict_check: bool = True, plan_only: bool = False, inferred=None,
    ir_version: int | None = None, max_ir_version: int | None = None, ml_opset: int | None = None,
    lacks=None, inlining=None,
) -> tuple[onnx.ModelProto, ConvertReport]:
    """Convert ``model`` to ``target_opset``; returns the new model and a report.

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
    it, ``max_ir_version`` (a runtime's) caps it; either rewrites what an older IR cannot hold
    where that is exact, and fails (before anything is written) naming what it cannot.

    ``ml_opset``: the ``ai.onnx.ml`` opset to reach (:mod:`rewriter.convert.ml_opsets`; default: kept).
    ``lacks(domain, op, schema_version)``: whether the runtime targeted lacks an op (an op it
    lacks is expanded into its function body like an op newer than the target, or blocks).
    ``inlining(op, schema_version, opset)``: the element types (TensorProto) in which the runtime
    targeted replaces a node of the op by its function body wrongly at that opset (ONNX Runtime
    1.15 / 1.16, float16 LayerNormalization at 18: ``rewriter.targets.inlining``); such nodes are
    expanded here into the body for the target opset.
    ``target_opset`` None converts only the ``ai.onnx.ml`` domain.
    """
    latest = onnx.defs.onnx_opset_version()
    source = traversal.opset_version(model.opset_import)
    source_ml = ml.ml_opset(model.opset_import)
    if target_opset is None:
        target_opset = source
        if ml_opset is None:
            raise RewriterError("nothing to convert: give a target opset, an ML opset or both")
    if ml_opset is not None:
        ml_latest = ml.latest()
        if not 1 <= ml_opset <= ml_latest:
            raise RewriterError(f"the ai.onnx.ml opset must be in 1..{ml_latest}, got {ml_opset}")
        if source_ml is None:
            raise ConversionError("the model does not import the ai.onnx.ml domain: no ML opset to convert")
    if target_opset is not None and not 1 <= target_opset <= latest:
        raise RewriterError(f"target opset must be in 1..{latest}, got {target_opset}")
    for name, value in (("--ir-version", ir_version), ("the target's IR version", max_ir_version)):
        if value is not None and not ir_versions.LOWEST <= value <= onnx.IR_VERSION:
            raise RewriterError(f"{name} must be in {ir_versions.LOWEST}..{onnx.IR_VERSION} (IR 1 and 2 have "
                                f"no opset imports; {onnx.IR_VERSION} is the newest this onnx knows), got {value}")
    paired = None  # a model importing only ai.onnx.ml, given an opset: what a runtime of that opset loads
    if source is None and ml_opset is None and source_ml is not None and target_opset is not None:
        paired = ml.paired_with(target_opset)
        ml_opset = min(source_ml, paired.ml_opset)
        max_ir_version = paired.ir_version if max_ir_version is None else min(max_ir_version, paired.ir_version)
    if source is None and ml_opset is None:
        raise ConversionError("the model does not import the default ONNX domain: nothing to convert"
                              + (" (its ai.onnx.ml opset converts with --ml-opset)" if source_ml else ""))
    result = onnx.ModelProto()
    result.CopyFrom(model)
    report = ConvertReport(source, target_opset)
    report.source_ml_opset, report.target_ml_opset = source_ml, ml_opset if ml_opset is not None else source_ml
    if paired is not None:
        report.notes.append(ml.paired_note(paired, source_ml, ml_opset))
    state = ConversionState(result, model, base_dir, report, inferred)

    engine = Engine(state, target_opset, None if lacks is None else lambda op, v: lacks("", op, v), inlining)
    if source is not None:
        engine.run()
    if source_ml is not None and (ml_opset is not None and ml_opset != source_ml or lacks is not None):
        engine.blockers += ml.convert_ml(result, report.target_ml_opset, report, lacks)
    # the scopes walked at the start still describe the model when they are all top-level bodies
    # (the main graph and functions: a subgraph's node may have been replaced by a copy) and no
    # expansion added any
    scopes = state.scopes if len(state.scopes) == state.original_scope_count and \
        all(s.parent is None for s in state.scopes) else None
    if state.maybe_unused or state.added_values:  # constants no node reads any more (a blocked one goes too)
        unused.remove_unused(result, only={name for name, _ in state.maybe_unused} | set(state.added_values),
                             scopes=scopes)
        alive = {o for s in traversal.iter_scopes(result) for n in s.body.node for o in n.output} \
            if engine.blockers else set()
        # a blocker stays unless the node it came from was removed (its outputs nobody makes)
        engine.blockers = [b for b in engine.blockers if b.key is None or any(o in alive for o in b.key if o)]
    report.blockers = engine.blockers
    if plan_only:
        if source is not None:
            _set_opset(result.opset_import, target_opset)
        try:
            _choose_ir_version(result, model, ir_version, max_ir_version, report,
                               down=(target_opset or 0) < (source or 0) or
                               (source_ml or 0) > (report.target_ml_opset or 0))
        except ConversionError as e:
            report.ir_blockers.append(str(e))
        return result, report
    if engine.blockers:
        raise ConversionBlocked(engine.blockers, _what(source, target_opset, source_ml, report.target_ml_opset))
    if source is None:  # only the ai.onnx.ml domain
        _choose_ir_version(result, model, ir_version, max_ir_version, report,
                           down=report.target_ml_opset < source_ml)
        _validate(result, model, strict_check)
        return result, report

    # Before onnx's converter sees the model: it cannot parse IR 0 (unset) or 1, which the API
    # and --allow-invalid-input accept, so the IR becomes at least the target opset's; and it
    # reads initializers that are not graph inputs only from IR 4 (the constants adapters add).
    # The result's IR version is chosen again at the end (tests/convert/test_ir_before_delegation.py).
    imports = [onnx.helper.make_opsetid("", target_opset),
               *(o for o in result.opset_import if not is_default_domain(o.domain))]
    result.ir_version = max(result.ir_version,
                            onnx.helper.find_min_ir_version_for(imports, ignore_unknown=True))
    if result.ir_version < 4 and any(  # initializers that are not graph inputs (added constants) need IR 4
            t.name not in {i.name for i in s.body.input} for s in traversal.iter_scopes(result)
            if not s.is_function for t in s.body.initializer):
        result.ir_version = 4
    if engine.delegated:
        report.version_converter_called = True
        _delegate(result, engine.delegated, target_opset)
    _unique_node_names(result, None if engine.delegated else scopes)
    for fn in result.functions:
        _set_opset(fn.opset_import, target_opset)
    _set_opset(result.opset_import, target_opset)
    _choose_ir_version(result, model, ir_version, max_ir_version, report,
                       down=target_opset < source or (source_ml or 0) > (report.target_ml_opset or 0))
    _validate(result, model, strict_check)
    return result, report


def _choose_ir_version(result, model, pin, cap, report: ConvertReport, *, down: bool) -> None:
    """Set the result's IR version (see :func:`convert_model`), lowering it where needed.

    A feature the input already used above its own IR version (node metadata in an IR-8 file,
    which readers of IR 8 ignore) does not raise the result's: the lowest IR chosen counts
    each feature at most at the input's IR. Only a pin or a runtime's cap rewrites them."""
    if not down and pin is None and cap is None and model.ir_version >= 4:
        # every feature counts at most at the input's IR (>= 4), which going up is kept: the
        # walk over every node for features would change nothing
        result.ir_version = max(model.ir_version, ir_versions.opset_ir(result.opset_import))
        return
    found = ir_versions.features(result)
    tolerated = max([ir_versions.opset_ir(result.opset_import),
                     *(min(f.ir_version, max(model.ir_version, 4 if "graph inputs" in (f.rewrite or "") else 0))
                       for f in found)])
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
            base, i = node.name, 1
            while f"{base}_{i}" in taken:
                i += 1
            node.name = f"{base}_{i}"
            taken.add(node.name)
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
