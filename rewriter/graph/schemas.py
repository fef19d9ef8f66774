"""Schema queries from ``onnx.defs``, for every layer (targets, convert, optimize, precision):
which versions an op has, which one is in force at an opset, the steps between two, and the
default domain's two spellings.

Low in the package: it imports only onnx, so rewriter.targets and rewriter.convert both read
it without importing each other.
"""

from __future__ import annotations

import functools

import onnx

__all__ = ["DEFAULT_DOMAINS", "is_default_domain", "all_ops", "schema_versions", "schema_version_at",
           "schema_version_at_domain", "steps_between", "schema_at"]

DEFAULT_DOMAINS = ("", "ai.onnx")


def is_default_domain(domain: str) -> bool:
    """Whether ``domain`` names the default ONNX domain ("" or "ai.onnx")."""
    return domain in DEFAULT_DOMAINS


@functools.lru_cache(maxsize=None)
def _versions_by_domain() -> dict[str, dict[str, tuple[int, ...]]]:
    found: dict[str, dict[str, list[int]]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        found.setdefault(s.domain, {}).setdefault(s.name, []).append(s.since_version)
    return {d: {op: tuple(sorted(set(v))) for op, v in ops.items()} for d, ops in found.items()}


def _all_versions(domain: str = "") -> dict[str, tuple[int, ...]]:
    return _versions_by_domain().get("" if is_default_domain(domain) else domain, {})


def all_ops(domain: str = "") -> list[str]:
    """Every op of ``domain`` (the default one unless named) in ``onnx.defs``."""
    return sorted(_all_versions(domain))


def schema_versions(op_type: str, domain: str = "") -> tuple[int, ...]:
    """The since_versions of every schema of ``op_type`` in ``domain``, ascending, from onnx.defs."""
    return _all_versions(domain).get(op_type, ())


@functools.lru_cache(maxsize=None)
def schema_version_at_domain(op_type: str, opset: int, domain: str = "") -> int | None:
    """The schema version of ``op_type`` of ``domain`` in force at that domain's ``opset``."""
    usable = [v for v in _all_versions(domain).get(op_type, ()) if v <= opset]
    return usable[-1] if usable else None


@functools.lru_cache(maxsize=None)
def schema_version_at(op_type: str, opset: int) -> int | None:
    """The schema version of ``op_type`` in force at ``opset`` (newest since_version <= opset),
    None when the op does not exist at that opset."""
    return schema_version_at_domain(op_type, opset, "")


@functools.lru_cache(maxsize=None)
def steps_between(op_type: str, from_opset: int, to_opset: int) -> tuple[tuple[int, int], ...]:
    """The adjacent schema steps ``(a, b)`` that take ``op_type`` from one opset to another."""
    versions = list(_all_versions().get(op_type, ()))
    src, dst = schema_version_at(op_type, from_opset), schema_version_at(op_type, to_opset)
    if src is None or dst is None:
        raise ValueError(f"{op_type} does not exist at opset {from_opset if src is None else to_opset}")
    i, j = versions.index(src), versions.index(dst)
    if i <= j:
        return tuple((versions[k], versions[k + 1]) for k in range(i, j))
    return tuple((versions[k], versions[k - 1]) for k in range(i, j, -1))


@functools.cache
def schema_at(op_type: str, opset: int, domain: str = ""):
    """The ``onnx.defs`` schema of ``op_type`` in force at ``domain``'s ``opset``, or None."""
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
