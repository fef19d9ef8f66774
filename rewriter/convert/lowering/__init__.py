"""Ops without a function body lowered to standard ONNX (DESIGN.md §2b, issue 42): each chosen node
of ``ai.onnx.ml`` is replaced by default-domain nodes that compute what ONNX Runtime's kernel
computes, bit for bit where the arithmetic allows and within a stated tolerance otherwise
(``docs/lowering.md``), in every scope, or the model is refused naming every node that cannot be.

:func:`lower_nodes` works at the model's own default-domain opset (>= 13; a model without the
domain gets opset 13); :func:`rewriter.convert.lower_ops.lower_ops` first raises a lower opset and
can convert the result to another one. The lowerings live beside this module, one family each.
"""

from __future__ import annotations

import logging

import onnx

from rewriter.convert.lowering import (  # noqa: F401  (each registers its lowerings)
    ml_encoders, ml_linear, ml_simple, ml_svm, ml_svm_kernel, ml_tree_classifier, ml_tree_ops, ml_zipmap)
from rewriter.convert.lowering import (  # noqa: F401  (com.microsoft: each registers its lowerings)
    contrib_act, contrib_attention, contrib_gqa, contrib_llm, contrib_norm, contrib_qattention, contrib_qembed,
    contrib_quant, contrib_quant_gemm, contrib_quant_pool)
from rewriter.graph.ort_onnx_domain import relabel
from rewriter.convert.lowering.emit import MIN_OPSET
from rewriter.convert.lowering.registry import LOWERINGS, ML
from rewriter.convert.lowering.types import function_types, model_types
from rewriter.convert.lowering.walk import LoweringBlocked, LoweringReport, lower_scopes
from rewriter.errors import RewriterError
from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain

__all__ = ["lower_nodes", "lowerable_ops", "parse_ops", "LoweringReport", "LoweringBlocked", "MIN_OPSET", "ML"]

logger = logging.getLogger(__name__)


def lowerable_ops() -> frozenset[tuple[str, str]]:
    """The (domain, op_type) pairs that have a lowering."""
    return frozenset(LOWERINGS)


def parse_ops(text: str) -> frozenset[tuple[str, str]]:
    """The ops a ``--lower-ops`` value names: comma-separated ``all``, a domain (``ai.onnx.ml``: every
    op of it that has a lowering), ``DOMAIN::Op`` or a bare ``ai.onnx.ml`` op name (``Scaler``).
    RewriterError for a name that is no op of a domain (or a domain) with lowerings."""
    import difflib

    chosen, unknown = set(), []
    domains = {d for d, _ in LOWERINGS}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        if item == "all":
            chosen |= set(LOWERINGS)
        elif item in domains:
            chosen |= {k for k in LOWERINGS if k[0] == item}
        else:
            domain, _, op = item.rpartition("::")
            key = (domain or ML, op)
            if key in LOWERINGS or (domain in domains and op):  # a named op of a known domain blocks by name
                chosen.add(key)
            else:
                unknown.append(item)
    if unknown or not chosen:
        names = sorted(domains | {o for _, o in LOWERINGS} | {"all"})
        near = {u: difflib.get_close_matches(u, names, n=1) for u in unknown}
        hints = "; ".join(f"{u!r} (did you mean {m[0]!r}?)" if m else repr(u) for u, m in near.items())
        raise RewriterError(f"--lower-ops: {hints or 'nothing named'}: give all, a domain "
                            f"({', '.join(sorted(domains))}), DOMAIN::Op or an ai.onnx.ml op: "
                            f"{', '.join(o for d, o in sorted(LOWERINGS) if d == ML)}")
    return frozenset(chosen)


def _chosen_ops(ops) -> frozenset | None:
    if ops is None:
        return frozenset(LOWERINGS)
    chosen = frozenset((("" if d == "ai.onnx" else d), o) for d, o in ops)
    default = sorted(f"{d or 'ai.onnx'}::{o}" for d, o in chosen if is_default_domain(d))
    if default:
        raise RewriterError(f"{', '.join(default)}: standard ONNX ops are not lowered")
    return chosen


def _has_domain(graph_like, domain: str) -> bool:
    return any(n.domain == domain for n in traversal.all_nodes(graph_like))


def _finish_imports(model: onnx.ModelProto, opset: int) -> None:
    """Default-domain imports where lowered nodes need one; ai.onnx.ml and com.microsoft imports
    nothing uses dropped."""
    for holder in [model, *model.functions]:
        body = holder.graph if holder is model else holder
        if traversal.opset_version(holder.opset_import) is None and any(
                is_default_domain(n.domain) for n in traversal.all_nodes(body)):
            holder.opset_import.append(onnx.helper.make_opsetid("", opset))
        for domain in (ML, "com.microsoft"):
            if not _has_domain(body, domain) and not (holder is model and any(_has_domain(f, domain)
                                                                             for f in model.functions)):
                kept = [o for o in holder.opset_import if o.domain != domain]
                del holder.opset_import[:]
                holder.opset_import.extend(kept)


def _drop_stale_value_info(model: onnx.ModelProto) -> None:
    for scope in traversal.iter_scopes(model):
        if scope.is_function:
            continue
        body = scope.body
        made = {o for n in body.node for o in n.output} | {v.name for v in body.input}
        made |= {t.name for t in body.initializer}
        kept = [v for v in body.value_info if v.name in made or not v.name]
        if len(kept) != len(body.value_info):
            del body.value_info[:]
            body.value_info.extend(kept)


def lower_nodes(model: onnx.ModelProto, ops=None, *, new_opset: int = MIN_OPSET,
                final_opset: int | None = None) -> tuple[onnx.ModelProto, LoweringReport]:
    """A copy of ``model`` with every node of ``ops`` ((domain, op_type) pairs; None: every op that
    has a lowering) replaced by standard ONNX nodes at the model's default-domain opset, which must
    be >= :data:`MIN_OPSET` (a model without the domain gets ``new_opset``); ``final_opset``: the
    opset the result is converted to next, whose missing forms the lowerings avoid. Raises
    :class:`LoweringBlocked` (a RewriterError) naming every chosen node that cannot be lowered;
    the input is never changed."""
    from rewriter.convert import ir_version

    chosen = _chosen_ops(ops)
    model = relabel(model, ops)  # ONNX Runtime's ONNX-domain contrib ops (LayerNormalization-1, ...)
    opset = traversal.opset_version(model.opset_import)
    report = LoweringReport(opset=opset if opset is not None else max(new_opset, MIN_OPSET), source_opset=opset)
    if opset is not None and opset < MIN_OPSET:
        raise RewriterError(f"lowering writes default-domain opset >= {MIN_OPSET}; the model imports {opset} "
                            "(rewriter.convert.lower_ops.lower_ops raises it first)")
    result = onnx.ModelProto()
    result.CopyFrom(model)
    if not any(n.domain != "" and (chosen is None or (n.domain, n.op_type) in chosen)
               for s in traversal.iter_scopes(result) for n in s.body.node):
        return result, report
    types = model_types(result)
    blockers = lower_scopes(result, chosen, report.opset, types, report, function_types(result, types), final_opset)
    if blockers:
        raise LoweringBlocked(blockers)
    _finish_imports(result, report.opset)
    _drop_stale_value_info(result)
    result.ir_version = max(result.ir_version, ir_version.needed(result))
    return result, report
