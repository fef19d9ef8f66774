"""What the user keeps float32 (``--keep-op-types``, ``--keep-nodes``): the names read one way
and checked once, for the CLI, the API and the pass alike.

A str is one name (never its letters). An op type must be one the model could hold: an op of
a domain the model (or one of its functions) imports, as ``onnx.defs`` knows them, a local
function's name, or an op type present in the model, its subgraphs or its functions' bodies
(custom domains have no schemas). Anything else is a misspelling, refused naming the nearest
valid names.
"""

from __future__ import annotations

import difflib

import onnx

from rewriter.errors import RewriterError
from rewriter.graph.schemas import all_ops, is_default_domain
from rewriter.graph.traversal import all_nodes

__all__ = ["keep_names", "check_op_types"]


def keep_names(value, what: str) -> tuple[str, ...]:
    """``value`` (None, one name as a str, or an iterable of names) as a tuple of names."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise RewriterError(f"{what}: expected names (str), got {type(name).__name__} {name!r}")
    return names


def known_op_types(model: onnx.ModelProto) -> set[str]:
    """The op types ``model`` could hold: see the module's docstring."""
    domains = {"" if is_default_domain(o.domain) else o.domain for o in model.opset_import}
    known = {f.name for f in model.functions}  # (called or not)
    for f in model.functions:
        domains |= {"" if is_default_domain(o.domain) else o.domain for o in f.opset_import}
        known |= {n.op_type for n in all_nodes(f)}
    for domain in domains:
        known.update(all_ops(domain))
    known |= {n.op_type for n in all_nodes(model.graph)}
    return known


def nearest(name: str, known) -> list[str]:
    """Up to three of ``known`` nearest to ``name``, a difference of case only first."""
    by_lower: dict[str, list[str]] = {}
    for k in sorted(known):
        by_lower.setdefault(k.lower(), []).append(k)
    close = difflib.get_close_matches(name.lower(), by_lower, n=3, cutoff=0.6)
    return [k for lower in close for k in by_lower[lower]][:3]


def check_op_types(model: onnx.ModelProto, op_types) -> tuple[str, ...]:
    """``op_types`` as a tuple; raises RewriterError naming each that is no op type of ``model``'s
    domains, its functions or its nodes, with the nearest valid names."""
    names = keep_names(op_types, "--keep-op-types")
    if not names:
        return names
    known = known_op_types(model)
    unknown = [n for n in dict.fromkeys(names) if n not in known]
    if unknown:
        imported = sorted({"ai.onnx" if is_default_domain(o.domain) else o.domain for o in model.opset_import})

        def said(n: str) -> str:
            near = nearest(n, known)
            return f"{n!r} (did you mean {', '.join(near)}?)" if near else f"{n!r} (no near name)"

        raise RewriterError(f"--keep-op-types: not an op type of the model's domains ({', '.join(imported)}), "
                            f"its functions or its nodes: {'; '.join(said(n) for n in unknown)}")
    return names
