"""The adapter registry: one function per (op, adjacent schema step, direction).

``ADAPTERS`` is keyed ``(op_type, from_version, to_version)`` with adjacent schema versions
(from ``onnx.defs``), so a test can compare it with the schema history. An adapter takes
``(node, ctx)``: it rewrites ``node`` (a NodeProto of the model being converted) from one
schema version to the next one up or down, through ``ctx`` (a
:class:`rewriter.convert.context.NodeContext`): constants, ranks, types, new constants,
inserted nodes. An impossible step raises ConversionError with the reason. Adapters live in
``rewriter.convert.adapters.<family>`` and register themselves with :func:`register`::

    @register("Squeeze", 13, 11)
    def squeeze_13_11(node, ctx): ...

A generic adapter registers for many steps: ``register(("ReduceMax", 18, 13), ("ReduceMin", 18, 13))``.
Each registration records its kind (``KINDS``): "attribute<->input", "new feature",
"meaning change", "type-only" (an adapter that checks something beyond types), ...
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import onnx

__all__ = ["DEFAULT_DOMAINS", "ADAPTERS", "KINDS", "DOMAIN_ADAPTERS", "DOMAIN_KINDS", "kind", "NORMALIZERS", "Adapter", "register", "register_normalizer", "normalizer", "lookup", "schema_versions", "schema_version_at",
           "schema_version_at_domain",
           "steps_between", "all_ops", "has_adapters"]

# the schema queries live in rewriter.graph.schemas (targets read them too); re-exported here

from rewriter.graph.schemas import (DEFAULT_DOMAINS, all_ops, is_default_domain,  # noqa: E402,F401
                                    schema_version_at, schema_version_at_domain, schema_versions, steps_between)

Adapter = Callable[[onnx.NodeProto, "object"], None]
ADAPTERS: dict[tuple[str, int, int], Adapter] = {}  # the default domain's
KINDS: dict[tuple[str, int, int], str] = {}
# every domain's: domain -> (op, from, to) -> adapter / kind ("" is ADAPTERS / KINDS)
DOMAIN_ADAPTERS: dict[str, dict[tuple[str, int, int], Adapter]] = {"": ADAPTERS}
DOMAIN_KINDS: dict[str, dict[tuple[str, int, int], str]] = {"": KINDS}


def register(*key, kind: str = "rewrite", domain: str = ""):
    """Register an adapter for one schema step ``register("Op", from, to)``, or for several
    ``register(("Op", from, to), ("Op2", from, to), ...)`` (a generic adapter); ``domain`` is
    the op's (default: the default domain)."""
    keys = [key] if key and isinstance(key[0], str) else list(key)
    domain = "" if is_default_domain(domain) else domain

    def decorate(fn: Adapter) -> Adapter:
        for op_type, a, b in keys:
            DOMAIN_ADAPTERS.setdefault(domain, {})[(op_type, a, b)] = fn
            DOMAIN_KINDS.setdefault(domain, {})[(op_type, a, b)] = kind
        _clear_caches()
        return fn

    return decorate


def kind(op_type: str, a: int, b: int, domain: str = "") -> str:
    """The kind an adapter was registered with ("rewrite" when none was said)."""
    return DOMAIN_KINDS.get("" if is_default_domain(domain) else domain, {}).get((op_type, a, b), "rewrite")


NORMALIZERS: dict[str, Adapter] = {}


def register_normalizer(op_type: str):
    """Register ``fn(node, ctx)`` to run on every node of ``op_type`` a conversion meets, before
    its steps and also when it takes none (e.g. to write down a default that the op's function
    body needs); ``ctx.step`` is ``(v, v)`` with ``v`` the node's schema version."""

    def decorate(fn: Adapter) -> Adapter:
        NORMALIZERS[op_type] = fn
        return fn

    return decorate


def normalizer(op_type: str) -> Adapter | None:
    if not _LOADED:
        _load_adapters()
    return NORMALIZERS.get(op_type)


def lookup(op_type: str, a: int, b: int, domain: str = "") -> Adapter | None:
    if not _LOADED:
        _load_adapters()
    return DOMAIN_ADAPTERS.get("" if is_default_domain(domain) else domain, {}).get((op_type, a, b))


@functools.lru_cache(maxsize=None)
def has_adapters(op_type: str) -> bool:
    """Whether the project converts some step of ``op_type`` with its own adapter."""
    _load_adapters()
    return any(key[0] == op_type for key in ADAPTERS)


def _clear_caches() -> None:
    has_adapters.cache_clear()


_LOADED: list[bool] = []


def _load_adapters() -> None:
    from rewriter.convert import adapters  # noqa: F401  (importing registers every family)

    _LOADED.append(True)
