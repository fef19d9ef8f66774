"""What the engine decides about the nodes of one op at one opset before it looks at any of
them: how they start (:func:`start`: an unknown op, one missing at the opset, one to expand, or
one that takes steps), the steps of their way to the target (:func:`path`), and whether every
one of them is kept without a look (:func:`keep_without_looking`, a :class:`Keep`)."""

from __future__ import annotations

import enum
import functools
from typing import NamedTuple

import onnx

from rewriter.convert import registry, steps
from rewriter.convert.type_verdicts import widening

__all__ = ["Keep", "Start", "start", "path", "keep_without_looking", "deprecated_schema", "has_function_body"]


class Keep(enum.Enum):
    """Whether the engine's walk may keep every node of an op at an opset without looking at it."""

    LOOK = "look"  # each node is looked at (Engine.convert): something about it may change or block
    NO_STEPS = "no steps"  # its schema is the target's: nothing to take, nothing to count
    TYPE_ONLY = "type-only"  # only type-only steps, each allowing every type the one before did: kept, counted


class Start(NamedTuple):
    """How the nodes of an op at an opset start their conversion."""

    what: str  # "unknown" (no such op), "missing" (not at the opset), "expand" (not at the target, or
    #            only deprecated there, or the runtime targeted lacks it) or "steps"
    src: int | None = None  # the schema version at the opset
    normalizer: registry.Adapter | None = None  # run on every node before its steps ("steps" only)


def start(op: str, opset: int, to_version: int, lacks=None) -> Start:
    """How the nodes of ``op`` at ``opset`` start on their way to opset ``to_version``;
    ``lacks(domain, op, version)``: whether the runtime targeted lacks a schema (None: no runtime)."""
    if not registry.schema_versions(op):
        return Start("unknown")
    src = registry.schema_version_at(op, opset)
    if src is None:
        return Start("missing")
    dst = registry.schema_version_at(op, to_version)
    if dst is None or (dst < src and deprecated_schema(op, dst) and has_function_body(op, src)):
        return Start("expand", src)
    if lacks is not None and lacks("", op, dst):  # the runtime targeted does not implement it
        return Start("expand", src)
    return Start("steps", src, registry.normalizer(op))


def path(op: str, opset: int, target: int) -> tuple[tuple[tuple[int, int], ...], list[str]]:
    """The schema steps of ``op`` from ``opset`` to ``target`` and the kind of each
    (``rewriter.convert.steps.step_kind``)."""
    found = registry.steps_between(op, opset, target)
    return found, [steps.step_kind(op, a, b) for a, b in found]


def keep_without_looking(op: str, how: Start, steps_: tuple, kinds: list[str]) -> Keep:
    """Whether every node of ``op`` that starts ``how`` and takes ``steps_`` (of ``kinds``) is
    kept as it is whatever its inputs, outputs and types: :attr:`Keep.NO_STEPS` when there is no
    step, :attr:`Keep.TYPE_ONLY` when every step is type-only and its schema allows, for every
    formal, every type the one before did; else :attr:`Keep.LOOK`."""
    if how.what != "steps" or how.normalizer is not None:
        return Keep.LOOK
    if not steps_:
        return Keep.NO_STEPS
    if all(k == "type-only" for k in kinds) and all(widening(op, a, b) for a, b in steps_):
        return Keep.TYPE_ONLY
    return Keep.LOOK


@functools.lru_cache(maxsize=None)
def deprecated_schema(op: str, version: int) -> bool:
    return bool(onnx.defs.get_schema(op, version, "").deprecated)


@functools.lru_cache(maxsize=None)
def has_function_body(op: str, version: int) -> bool:
    schema = onnx.defs.get_schema(op, version, "")
    return bool(schema.function_opset_versions or schema.context_dependent_function_opset_versions)
