"""The nodes a runtime other than ONNX Runtime has no data for: ops of a domain its data does not
measure (``com.microsoft``, ``ai.onnx.ml`` for a runtime measured on ``ai.onnx`` alone) and ONNX
Runtime's own contrib ops written in the ONNX domain (:mod:`rewriter.graph.ort_onnx_domain`), for
``check --target``: ``convert --target`` lowers those it can to standard ONNX and refuses the rest by
name. ONNX Runtime runs all of them."""

from __future__ import annotations

import onnx

from rewriter.graph import traversal
from rewriter.graph.names import first_few
from rewriter.graph.ort_onnx_domain import misplaced
from rewriter.graph.schemas import DEFAULT_DOMAINS

__all__ = ["foreign", "foreign_nodes", "foreign_lines"]


def foreign(model: onnx.ModelProto, target):
    """Each (domain, op), node, scope of ``model`` (every scope) that ``target`` has no data for: a
    domain it does not list (the default domain and the model's own functions aside) and ONNX
    Runtime's ONNX-domain contrib ops (domain "" in the key). Nothing for ONNX Runtime."""
    if target.runtime == "onnxruntime":
        return
    local = {(f.domain, f.name) for f in model.functions}
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
            if domain == "":  # ONNX Runtime's own op in the ONNX domain, or standard
                if misplaced(node, scope.opset):
                    yield ("", node.op_type), node, scope
            elif (node.domain, node.op_type) in local:
                continue
            elif not _known(target, domain) or (domain != "ai.onnx.ml"  # (its versions: the ML conversion's)
                                                and target.lacks(domain, node.op_type, None)):
                yield (domain, node.op_type), node, scope


def _known(target, domain: str) -> bool:
    """Whether ``target``'s data speaks of ``domain`` (its opsets, or what it measured missing)."""
    return domain in target.opsets or domain in (target.missing or {})


def foreign_nodes(model: onnx.ModelProto, target) -> dict[tuple[str, str], list[str]]:
    """(domain, op) -> labels of the nodes :func:`foreign` finds."""
    found: dict[tuple[str, str], list[str]] = {}
    for key, node, scope in foreign(model, target):
        found.setdefault(key, []).append(traversal.node_label(node, scope))
    return found


def foreign_lines(model: onnx.ModelProto, target, lowerable=frozenset()) -> list[str]:
    """One line per op of :func:`foreign_nodes`, saying whether ``convert --target`` lowers it
    (``lowerable``: the (domain, op) pairs :mod:`rewriter.convert.lowering` writes in standard ONNX)."""
    lines = []
    for (domain, op), labels in sorted(foreign_nodes(model, target).items()):
        if domain == "":
            what, key = f"{op} (ONNX Runtime's own op, written in the ONNX domain)", ("com.microsoft", op)
        else:
            what, key = f"{domain}:{op}", (domain, op)
        measured = "" if domain == "" or _known(target, domain) else f" (the {domain} domain is not in its data)"
        then = "convert lowers it to standard ONNX" if key in lowerable else "no lowering: convert refuses it"
        lines.append(f"{what}, which it is not known to implement{measured}: {first_few(labels)} [{then}]")
    return lines
