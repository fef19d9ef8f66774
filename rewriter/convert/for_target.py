"""A conversion for a runtime target: its opsets, IR version and the ops it implements
(:mod:`rewriter.targets`) chosen for the model and carried, as one
:class:`rewriter.targets.spec.TargetSpec`, into :func:`rewriter.convert.planner.convert_model`."""

from __future__ import annotations

import dataclasses

import onnx

from rewriter.convert import ml_opsets as ml
from rewriter.convert.blockers import Blocker
from rewriter.convert.planner import ConversionBlocked, ConvertReport, convert_model
from rewriter.errors import RewriterError
from rewriter.graph import traversal
from rewriter.graph.names import named_after
from rewriter.graph.schemas import DEFAULT_DOMAINS
from rewriter.targets import ort_quirks
from rewriter.targets.spec import TargetSpec

__all__ = ["convert_for", "expand_over_constant", "for_model", "lower_for", "target_lacks"]


def for_model(model: onnx.ModelProto, spec: TargetSpec, inferred=None, half=None) -> TargetSpec:
    """``spec`` with the opsets its runtime needs for ``model`` filled in (those given are kept;
    without a runtime, ``spec`` itself). ``inferred``: the model's shape inference when the caller
    has it, as :func:`rewriter.graph.inferred.inferred_model` takes it; ``half``: the half type the
    result is rewritten to next, whose Casts the opset must take."""
    runtime = spec.runtime
    if runtime is None:
        return spec
    source = traversal.opset_version(model.opset_import)
    source_ml = ml.ml_opset(model.opset_import)
    opset, ml_opset = spec.opset, spec.ml_opset
    if opset is None and source is not None:
        opset = _implemented_opset(model, runtime, "", runtime.opset_for("", source), inferred,
                                   ("Cast",) if half else ())
    if ml_opset is None and source_ml is not None:
        ml_opset = _implemented_opset(model, runtime, ml.ML_DOMAIN, runtime.opset_for(ml.ML_DOMAIN, source_ml))
    return dataclasses.replace(spec, opset=opset, ml_opset=ml_opset)


def _implemented_opset(model: onnx.ModelProto, runtime, domain: str, start: int, inferred=None,
                       also=()) -> int:
    """The newest opset of ``domain`` from ``start`` down (else the oldest above it that the
    runtime loads) at which the runtime implements every op of the model in it, or the conversion
    can write it with ops it has (a function body, the project's decompositions: Einsum, DFT,
    STFT; the TreeEnsembleRegressor a TreeEnsemble becomes): ONNX Runtime 1.15 takes opset 19 but has no
    kernel for Cast-19 or Identity-19, so a model with a Cast goes to 18 for it; ONNX Runtime 1.20
    takes ai.onnx.ml 5 but has no TreeEnsemble-5 kernel. Nor an opset at which a float16 node
    without a float16 kernel needs Casts the runtime lacks (``ort_quirks.cast_fallback_lacking``:
    ONNX Runtime 1.15 refuses a float16 Relu at opset 19). ``also``: ops the result will hold
    besides the model's (the Casts of a half-precision rewrite that follows)."""
    from rewriter.convert import decompositions, registry
    from rewriter.convert.paths import has_function_body

    if runtime.ops is None and not runtime.unsupported and not runtime.missing:
        return start
    domains = DEFAULT_DOMAINS if domain == "" else (domain,)
    ops = {n.op_type for s in traversal.iter_scopes(model) for n in s.body.node if n.domain in domains} | set(also)
    low = runtime.min_opsets.get(domain, 1)

    def writable(op: str, v: int | None) -> bool:
        if domain == ml.ML_DOMAIN:
            return v is None and op in ml.REPLACED
        versions = registry.schema_versions(op)
        return bool(versions) and (has_function_body(op, v if v is not None else versions[0]) or
                                   decompositions.lookup(op) is not None)

    lacking_casts = ort_quirks.cast_fallback_lacking(model, runtime, inferred) if domain == "" else None

    def fine(opset: int) -> bool:
        if lacking_casts is not None and lacking_casts(opset):
            return False
        for op in ops:
            v = registry.schema_version_at_domain(op, opset, domain)
            if (v is None or runtime.lacks(domain, op, v)) and not writable(op, v):
                return False
        return True

    down = next((o for o in range(start, low - 1, -1) if fine(o)), None)
    if down is not None:
        return down
    # none at or below: the nearest newer opset the runtime takes where it has every op (LiteRT
    # runs TopK-24 with k fed, not TopK-11: a model at opset 16 goes up to 24 for it)
    high = runtime.opsets.get(domain) or start
    return next((o for o in range(start + 1, high + 1) if fine(o)), start)


def convert_for(model: onnx.ModelProto, target_opset: int | str | TargetSpec | None = None, *, ml_opset=None,
                ir_version=None, runtime=None, half: str | None = None, **kwargs) -> tuple[onnx.ModelProto, ConvertReport]:
    """:func:`convert_model` for a :class:`TargetSpec` (or the arguments :meth:`TargetSpec.parse`
    takes: ``runtime`` a :class:`rewriter.targets.Target`, ``RUNTIME==VERSION`` or a profile path),
    with the opsets, IR version and missing ops of its runtime.

    A runtime with per-op restrictions (TensorRT: onnx-tensorrt's operators.md) has them met on
    the converted model: exact rewrites where :mod:`rewriter.targets.restriction_rewrites` has
    one, and every node still breaking one blocks (``plan_only``: listed in the report).

    ``half``: the half type ("float16", "bfloat16") the result is rewritten to next (``convert
    --dtype``): the opset chosen for the runtime takes the Casts that rewrite inserts (ONNX Runtime
    1.15 has no Cast-19: such a model goes to opset 18 for it)."""
    if isinstance(target_opset, TargetSpec):
        if (ml_opset, ir_version, runtime) != (None, None, None):
            raise TypeError("give a TargetSpec or ml_opset / ir_version / runtime, not both")
        spec = target_opset
    else:
        spec = TargetSpec.parse(target_opset, ml_opset=ml_opset, ir_version=ir_version, target=runtime)
    if spec.empty:
        raise RewriterError("give a target opset (or 'latest'), an ML opset, or a runtime target")
    if spec.runtime is not None and spec.runtime.needs_constant:
        spec = dataclasses.replace(spec, runtime=expand_over_constant(spec.runtime))
    if spec.runtime is not None:  # ops the release's quantized_forms write out after the conversion
        from rewriter.convert.lowering.quant_written import written_out

        spec = dataclasses.replace(spec, runtime=written_out(spec.runtime))
    lowered, source = None, model
    if spec.runtime is not None:  # ops without a function body the runtime lacks: standard ONNX first
        model, lowered = lower_for(model, spec.runtime)
        if lowered is not None:
            kwargs.pop("inferred", None)  # (the input's inference is not the lowered model's)
    if spec.runtime is not None and target_lacks(spec.runtime, "", "Loop"):  # (Loops unrolled in turn)
        from rewriter.graph.loop_trips import with_trip_shapes

        shaped = with_trip_shapes(model)
        if shaped is not model:
            model = shaped
            kwargs.pop("inferred", None)
    spec = for_model(model, spec, kwargs.get("inferred"), half)
    try:
        result, report = _convert(model, spec, source, lowered, kwargs)
    except ConversionBlocked as e:  # (an expansion's nodes too: DynamicQuantizeLinear's QuantizeLinear)
        raise ConversionBlocked(credit_lowering(e.blockers, source), e.what) from None
    report.blockers = credit_lowering(report.blockers, source)
    return result, report


def credit_lowering(blockers: list, source: onnx.ModelProto) -> list:
    """``blockers`` with each node a lowering wrote (its name is not one of ``source``'s nodes)
    credited to the node of ``source`` it replaced (the lowering names its nodes after it):
    the refusal names a node the user has."""
    names = {n.name: n.op_type for s in traversal.iter_scopes(source) for n in s.body.node if n.name}
    for b in blockers:
        if not b.name or names.get(b.name) == b.op:
            continue
        owner = b.name if b.name in names else named_after(b.name, names)
        if owner == b.name:  # an expansion's node that took its op's name (DynamicQuantizeLinear's QuantizeLinear)
            b.reason += f" (a node the conversion of node '{owner}' ({names[owner]}) wrote)"
        elif owner is not None:
            b.reason += f" (a node the lowering of node '{owner}' ({names[owner]}) wrote)"
    return blockers


def _convert(model, spec, source, lowered, kwargs):
    target = spec.runtime
    if target is None or not target.rules:
        result, report = convert_model(model, spec, **kwargs)
        _whose_data(report, target, lowered)
        if target is not None:
            from rewriter.convert.lowering.quant_explicit import meet_quantized_forms

            meet_quantized_forms(result, report, target, kwargs.get("plan_only", False), kwargs.get("base_dir"))
            _measured_forms(source, result, report, target, kwargs.get("plan_only", False))
        return result, report
    try:
        result, report = convert_model(model, spec, **kwargs)
    except ConversionBlocked as e:  # name the nodes the restrictions block too, as found in the input
        more = _restriction_blockers(model, target, kwargs.get("base_dir"), {b.node for b in e.blockers})
        if not more:
            raise
        raise ConversionBlocked(e.blockers + more, e.what) from None
    _whose_data(report, target, lowered)
    _meet_restrictions(result, report, target, kwargs.get("base_dir"), kwargs.get("plan_only", False),
                       kwargs.get("strict_check", True))
    return result, report


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def expand_over_constant(target):
    """``target`` with the op versions it runs only with constant inputs (``needs_constant``)
    missing again where the conversion can write the op otherwise (a function body, the project's
    decomposition): the probe ran those forms with static shapes too, and OpenVINO 2026.4 refuses
    an STFT-17 with constant frame inputs but dynamic dims, which its decomposition runs."""
    from rewriter.convert import decompositions
    from rewriter.convert.paths import has_function_body

    from rewriter.convert.refused_forms import DECOMPOSED_WHEN_REFUSED  # (chosen per model there)

    table = target.needs_constant.get("", {})
    back = {op: vs for op, vs in table.items() if op not in DECOMPOSED_WHEN_REFUSED and (
            decompositions.lookup(op) is not None or any(has_function_body(op, v) for v in vs))}
    if not back or target.missing is None:
        return target
    missing = {**target.missing, "": {**target.missing.get("", {})}}
    for op, vs in back.items():
        missing[""][op] = missing[""].get(op, frozenset()) | vs
    rest = {**target.needs_constant, "": {op: vs for op, vs in table.items() if op not in back}}
    return dataclasses.replace(target, missing=missing, needs_constant=rest)


def _measured_forms(source, result, report, target, plan_only: bool) -> None:
    """What a measured release needs beyond the op versions (:mod:`rewriter.targets.runtime_forms`):
    named input dims (written in ``result``), forms it computes wrongly that another form of the same
    values avoids (``rewrite_forms``: rewritten in ``result``), inputs it needs constant (nodes of
    ``result``) and element types it refuses (nodes of ``source``, the model asked: blocked)."""
    from rewriter.targets import runtime_forms as forms
    from rewriter.targets import static_dims

    from rewriter.targets import measured_verdicts as verdicts

    if target.runtime in forms.NAMES_DIMS and not plan_only:
        report.rewrote_for_target(forms.name_anonymous_dims(result))
    if target.runtime in static_dims.CLEARS_FOREIGN_SYMBOLS and not plan_only:
        report.rewrote_for_target(static_dims.clear_declared_symbols(result))
    if target.rewrite_forms:
        from rewriter.graph.inferred import LazyInference
        from rewriter.targets.measured_rewrites import rewrite_forms, rewritten_copy

        if plan_only:  # the plan names what convert leaves: the rewrites run on a copy
            notes: list = []
            result = rewritten_copy(result, target.rewrite_forms, target.name, notes)
            report.rewrote_for_target(notes)
        else:
            report.rewrote_for_target(rewrite_forms(result, target.rewrite_forms, target.name, LazyInference(result)()))
    if target.form_verdicts:
        from rewriter.targets.reversal import reversed_slices
        from rewriter.targets.single_input import single_input_concats

        written = result if not plan_only else _copy(result)
        report.rewrote_for_target(single_input_concats(written, target.form_verdicts, target.name))
        report.rewrote_for_target(reversed_slices(written, target.form_verdicts, target.name))
    report.target_notes.extend(target.run_notes())
    from rewriter.targets.computed_shapes import computed_shapes_note

    report.target_notes.extend(computed_shapes_note(result, target.computed_shapes, target.name))
    report.target_notes.extend(forms.defaults_frozen_note(result, target.runtime, target.name))
    unmeasured = verdicts.unmeasured_present(result, target.unmeasured)
    if unmeasured:
        report.target_notes.append(f"op versions {target.name} was not measured in (no node test reaches them, "
                                   f"no one-node form was built): {', '.join(unmeasured)}")
    if not (target.needs_constant or target.types_refused or target.type_verdicts or target.form_verdicts
            or target.needs_static_dims or target.refused_forms):
        return
    from rewriter.graph.inferred import LazyInference

    found = forms.fed_blockers(result, target.needs_constant, target.name, target.runtime in forms.FREEZES_DEFAULTS)
    if target.needs_static_dims or target.refused_forms:
        found += static_dims.static_dims_blockers(result, target.needs_static_dims, target.name,
                                                  LazyInference(result)(), target.refused_forms)
    if target.types_refused:
        from rewriter.targets.string_labels import gathered_labels

        labels = gathered_labels(result, target.form_verdicts, LazyInference(result)())
        found += forms.type_blockers(source, target.types_refused, target.name, LazyInference(source)(), labels)
    if target.type_verdicts or target.form_verdicts:
        inferred = LazyInference(result)()
        found += verdicts.type_blockers(result, target.type_verdicts, target.name, inferred)
        found += verdicts.untaken_nan_blockers(result, target.form_verdicts, target.name, inferred)
        found += verdicts.double_inside_blockers(result, target.form_verdicts, target.name, inferred)
        found += verdicts.negative_steps_blockers(result, target.form_verdicts, target.name)
    blocked = [Blocker(f[0], f[1], "form", f[3], "a runtime that takes this form", name=f[4] if len(f) > 4 else "")
               for f in found]
    if plan_only:
        report.blockers.extend(blocked)
    elif blocked:
        raise ConversionBlocked(blocked, f"for {target.name}")


def _whose_data(report: ConvertReport, target, lowered=None) -> None:
    """A release the data does not know (ONNX Runtime 1.28) takes an older one's data: said first;
    then the ops lowered to standard ONNX for it, when some were."""
    if lowered is not None:
        ops = ", ".join(f"{o} x{n}" for (_, o), n in sorted(lowered.lowered.items()))
        report.target_notes.insert(0, f"lowered to standard ONNX for {target.name} (which lacks them): {ops}")
        report.warnings.extend(lowered.retyped)
    if target is not None and target.data_release and target.data_release != target.name:
        report.target_notes.insert(0, f"{target.name} uses the data of {target.data_release}")


_NO_FUNCTION_BODY = ("ai.onnx.ml", "com.microsoft")


def target_lacks(target, domain: str, op: str) -> bool:
    """Whether ``target`` lacks ``domain::op`` (a domain without function bodies) at every schema
    version it could take, so that only a lowering writes it (a version it lacks while it has
    another is the conversion's to reach). A runtime other than ONNX Runtime implements only the
    domains its data or profile names; ONNX Runtime implements com.microsoft."""
    if target.runtime != "onnxruntime" and domain not in target.opsets:
        return True
    from rewriter.graph.schemas import schema_versions

    top = target.opsets.get(domain)
    versions = [v for v in schema_versions(op, domain) if top is None or v <= top] or [None]
    return all(target.lacks(domain, op, v) for v in versions)


def lower_for(model: onnx.ModelProto, target):
    """(``model`` with every ``ai.onnx.ml`` / ``com.microsoft`` node ``target`` lacks and
    :mod:`rewriter.convert.lowering` can write in standard ONNX lowered, the LoweringReport), or
    (``model``, None) when there is none; the nodes it cannot lower are left for the conversion to
    refuse by name (RewriterError from the lowering when a chosen node cannot be written)."""
    from rewriter.convert.lowering import lowerable_ops
    from rewriter.graph.ort_onnx_domain import relabel

    if target.runtime != "onnxruntime":  # ONNX Runtime's contrib ops written in the ONNX domain
        model = relabel(model)  # (LayerNormalization-1, SimplifiedLayerNormalization) are com.microsoft's
    can = lowerable_ops()
    lacking = set()
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            key = (node.domain, node.op_type)
            if node.domain not in _NO_FUNCTION_BODY or key not in can or key in lacking:
                continue
            if target_lacks(target, node.domain, node.op_type):
                lacking.add(key)
    if not lacking:
        return model, None
    from rewriter.convert.lower_ops import lower_ops
    from rewriter.convert.lowering.avoid import DOUBLE, LOOP, avoiding
    from rewriter.convert.lowering.ml_encoders import string_equal_opset
    from rewriter.targets.measured_verdicts import refuses_double_inside

    avoided = ({LOOP} if target_lacks(target, "", "Loop") else set()) | (
        {DOUBLE} if refuses_double_inside(target.form_verdicts) else set())
    with avoiding(avoided):  # a lowering writes other forms then
        return lower_ops(model, lacking, opset=string_equal_opset(model, target, target_lacks(target, "", "Unique")))


def _restriction_blockers(model, target, base_dir, seen=frozenset(), inferred=None) -> list[Blocker]:
    from rewriter.targets import restriction_violations

    others = _releases_without
    return [Blocker(v.node, v.op, "restriction", f"{v.reason}: {target.data_release}'s operators.md says "
                    f"\"{v.restriction}\"", others(target, v.op, v.restriction), name=v.name, where=v.where)
            for v in restriction_violations(model, target, base_dir=base_dir, inferred=inferred)
            if v.node not in seen]


def _releases_without(target, op: str, text: str) -> str:
    """The releases of the target's runtime whose data does not state this restriction, in words."""
    from rewriter.targets import load_release, releases
    from rewriter.targets.release_tables import release_key

    if text.startswith("Supported Types: "):  # each release lists its own types: no release is free of it
        return f"an input of a type {target.data_release}'s operators.md lists for {op}"
    runtime = target.runtime
    free = [] if runtime is None else [
        r for r in releases(runtime)
        if not any(rule["text"] == text for rule in load_release(runtime, release_key(r)).rules.get(op, []))]
    return f"{runtime} {', '.join(free)} (whose operators.md does not state it)" if free else \
        "no release in the data: the node must change"


def _meet_restrictions(result, report, target, base_dir, plan_only: bool, strict: bool) -> None:
    """Rewrite what breaks the target's restrictions where exact, then block on what still does."""
    from rewriter.io import tensor_reader
    from rewriter.targets.restriction_rewrites import rewrite

    checked = sum(len(r) for r in target.rules.values())
    present = {n.op_type for s in traversal.iter_scopes(result) for n in s.body.node if n.domain in DEFAULT_DOMAINS}
    unchecked = sorted(op for op in target.unchecked if op in present)  # (those of the model's ops only)
    report.target_notes.append(
        f"restrictions of {target.data_release} (onnx-tensorrt operators.md): {checked} rule(s) on "
        f"{len(target.rules)} op(s) checked" + (f"; not checkable statically, not checked: {', '.join(unchecked)}"
                                                 if unchecked else ""))
    from rewriter.graph.inferred import LazyInference

    inferred = LazyInference(result)
    changes, replaced = rewrite(result, target.rules, read_tensor=tensor_reader(base_dir), inferred=inferred)
    if changes:
        from rewriter.graph import unused_values as unused

        unused.remove_unused(result, only=replaced)
        report.rewrote_for_target(changes)
        inferred = LazyInference(result)  # a rewrite may have made values (1D pooling as 2D)
    blocked = _restriction_blockers(result, target, base_dir, inferred=inferred)
    if plan_only:
        report.blockers.extend(blocked)
        return
    if blocked:
        raise ConversionBlocked(blocked, f"for {target.name}")
    if changes:
        from rewriter.io import check_model

        try:
            check_model(result, full_check=strict)
        except Exception as e:  # noqa: BLE001 - a rewrite that broke the model is this code's bug: say so
            raise RewriterError(f"the rewrites for {target.name}'s restrictions left an invalid model: "
                                f"{' '.join(str(e).split())}") from None
