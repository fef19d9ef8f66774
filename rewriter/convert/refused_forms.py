"""Ops a runtime release has, but refuses in the form a model uses them, that the conversion then
writes by their exact decomposition (``rewriter.convert.decompositions``: RNN, GRU, LSTM, Scan
unrolled), chosen per model from the release's measured verdicts: tract 0.23 runs RNN / GRU / LSTM
only with their inputs after the first constant (``needs_constant``: a ``sequence_lens`` computed at
run time is refused), LiteRT 2.6 refuses a GRU whose ``sequence_lens`` is computed at run time
(onnx2tf: "requires constant input"; in its data, a ``type_verdicts`` refusal on int32, the case
that carries it). A model whose nodes of the op the release runs keeps them all (the choice is per
op and model: the engine asks ``lacks`` per op version)."""

from __future__ import annotations

__all__ = ["DECOMPOSED_WHEN_REFUSED", "lacks_for_model", "refused_ops"]

# the ops whose decomposition is taken when the release refuses the model's nodes of them
DECOMPOSED_WHEN_REFUSED = frozenset({"RNN", "GRU", "LSTM", "Scan"})


def refused_ops(model, runtime) -> frozenset:
    """The ops of :data:`DECOMPOSED_WHEN_REFUSED` some node of which ``runtime`` refuses as measured:
    an input after the first fed at run time where it needs them constant, a type its verdicts
    refuse (never for ONNX Runtime, which runs them all)."""
    if runtime.runtime == "onnxruntime":
        return frozenset()
    constant, types = _only(runtime.needs_constant), _only(runtime.type_verdicts)
    if not constant and not types:
        return frozenset()
    from rewriter.graph import traversal

    present = {n.op_type for s in traversal.iter_scopes(model) for n in s.body.node}
    if not present & {op for table in (constant, types) for ops in table.values() for op in ops}:
        return frozenset()
    from rewriter.graph.inferred import LazyInference
    from rewriter.targets.measured_verdicts import type_blockers
    from rewriter.targets.runtime_forms import FREEZES_DEFAULTS, fed_blockers

    found = fed_blockers(model, constant, runtime.name, runtime.runtime in FREEZES_DEFAULTS) if constant else []
    if types:
        found += type_blockers(model, types, runtime.name, LazyInference(model)())
    return frozenset(f[1] for f in found)


def _only(table: dict | None) -> dict:
    """``table`` (domain -> op -> ...) cut to the ops of :data:`DECOMPOSED_WHEN_REFUSED`."""
    cut = {domain: {op: v for op, v in ops.items() if op in DECOMPOSED_WHEN_REFUSED}
           for domain, ops in (table or {}).items()}
    return {domain: ops for domain, ops in cut.items() if ops}


def lacks_for_model(model, runtime):
    """``runtime.lacks``, also true for every version of an op :func:`refused_ops` finds in ``model``."""
    refused = refused_ops(model, runtime)
    if not refused:
        return runtime.lacks

    def lacks(domain: str, op: str, version) -> bool:
        return (op in refused and domain in ("", "ai.onnx")) or runtime.lacks(domain, op, version)

    return lacks
