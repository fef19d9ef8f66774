"""The adapter registry: one function per (op, adjacent schema step, direction).

``ADAPTERS`` is keyed ``(op_type, from_version, to_version)`` with adjacent schema versions
(from ``onnx.defs``), so a test can compare it with the schema history. An adapter takes
``(node, ctx)``: it rewrites ``node`` (a NodeProto of the model being converted) from one
schema version to the next one up or down, through ``ctx`` (a
:class:`rewriter.convert.context.NodeContext`) for constants, ranks, types and new
constants; an impossible step raises ConversionError. Adapters live in
``rewriter.convert.adapters.<family>`` and register themselves with :func:`register`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import onnx

from rewriter.errors import ConversionError

__all__ = ["ADAPTERS", "Adapter", "register", "schema_versions", "schema_version_at", "adapter_path", "has_adapters"]

Adapter = Callable[[onnx.NodeProto, "object"], None]
ADAPTERS: dict[tuple[str, int, int], Adapter] = {}


def register(op_type: str, from_version: int, to_version: int):
    """Register an adapter for one schema step of ``op_type`` (adjacent versions)."""

    def decorate(fn: Adapter) -> Adapter:
        ADAPTERS[(op_type, from_version, to_version)] = fn
        return fn

    return decorate


def schema_versions(op_type: str, domain: str = "") -> list[int]:
    """The since_versions of every schema of ``op_type``, ascending, from onnx.defs."""
    return sorted(
        s.since_version
        for s in onnx.defs.get_all_schemas_with_history()
        if s.name == op_type and s.domain == domain
    )


_VERSIONS_CACHE: dict[str, list[int]] = {}


def _versions(op_type: str) -> list[int]:
    if op_type not in _VERSIONS_CACHE:
        _VERSIONS_CACHE[op_type] = schema_versions(op_type)
    return _VERSIONS_CACHE[op_type]


def schema_version_at(op_type: str, opset: int) -> int:
    """The schema version of ``op_type`` in force at ``opset`` (newest since_version <= opset)."""
    usable = [v for v in _versions(op_type) if v <= opset]
    if not usable:
        raise ConversionError(f"{op_type} does not exist at opset {opset}")
    return usable[-1]


@functools.lru_cache(maxsize=None)
def adapter_path(op_type: str, from_opset: int, to_opset: int) -> tuple[tuple[Adapter, int, int], ...]:
    """The adapters to apply, in order, to move a node from one opset to another."""
    versions = _versions(op_type)
    src = schema_version_at(op_type, from_opset)
    dst = schema_version_at(op_type, to_opset)
    i, j = versions.index(src), versions.index(dst)
    if i <= j:
        steps = [(versions[k], versions[k + 1]) for k in range(i, j)]
    else:
        steps = [(versions[k], versions[k - 1]) for k in range(i, j, -1)]
    _load_adapters()
    return tuple((ADAPTERS[(op_type, a, b)], a, b) for a, b in steps)


@functools.lru_cache(maxsize=None)
def has_adapters(op_type: str) -> bool:
    """Whether the project converts ``op_type`` with its own adapters."""
    _load_adapters()
    return any(key[0] == op_type for key in ADAPTERS)


def _load_adapters() -> None:
    from rewriter.convert import adapters  # noqa: F401  (importing registers every family)
