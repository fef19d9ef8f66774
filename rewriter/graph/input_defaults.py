"""Graph inputs that carry an initializer: a default value that a caller may override.

A main graph input with an initializer of the same name is an input whose initializer is only
its default: ONNX Runtime takes a value fed for it instead, so rewriter never treats it as a
constant (a conversion that needs it constant is refused, a fold that reads it is skipped).
Every IR-3 model has each weight in that form (IR 3 has no initializers outside the inputs),
and so does every torch export made with ``keep_initializers_as_inputs``; onnx's converter,
TensorRT and OpenVINO read them as constants, and ONNX Runtime ships
``remove_initializer_from_input.py`` to make them so.

:func:`freeze_input_defaults` makes chosen defaults constants: the graph input goes, the
initializer stays (the model's IR version becomes at least 4, the first with initializers
outside the inputs). Only the main graph's inputs have defaults: a subgraph's inputs are bound
by the node that runs it, a function's by its call. :func:`default_note` is what a refusal or a
skipped fold caused by such an input says, :func:`explain` adds it to a converter's blocker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import onnx

from rewriter.errors import RewriterError

__all__ = ["FROZEN_IR", "input_defaults", "default_note", "explain", "chosen", "freeze_input_defaults",
           "freeze_in_place", "check_kept"]

FROZEN_IR = 4  # the first IR version with initializers that are not graph inputs
_NOT_CONSTANT = re.compile(r"'([^']*)' (?:is )?not a constant")


def input_defaults(model: onnx.ModelProto) -> list[str]:
    """The main graph's inputs that have an initializer (dense or sparse), in input order."""
    graph = model.graph
    have = {t.name for t in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
    return [i.name for i in graph.input if i.name in have]


def default_note(name: str) -> str:
    """Why a value ``name`` that is a graph input with an initializer is not a constant."""
    return (f"'{name}' is a graph input; its initializer is only a default that a caller may override "
            f"(--freeze-input-defaults {name} makes it a constant)")


def explain(reason: str, defaults: Iterable[str]) -> str:
    """``reason`` (a converter's refusal) with :func:`default_note` added for each value it calls
    not a constant that is one of ``defaults``."""
    defaults = set(defaults)
    notes = [default_note(n) for n in dict.fromkeys(_NOT_CONSTANT.findall(reason)) if n in defaults]
    return "; ".join([reason, *notes]) if notes else reason


def chosen(available: list[str], freeze) -> list[str]:
    """The names ``freeze`` asks for among ``available`` (the inputs with a default): True for all,
    None or False for none, a name or names for those. RewriterError naming a name that is not
    one of them (and the ones that are)."""
    if freeze is None or freeze is False:
        return []
    if freeze is True:
        return list(available)
    names = [freeze] if isinstance(freeze, str) else list(freeze)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"freeze_input_defaults must be True or graph input names, got {freeze!r}")
    unknown = [n for n in dict.fromkeys(names) if n not in available]
    if unknown:
        valid = ", ".join(map(repr, available)) if available else "none: no graph input has an initializer"
        raise RewriterError(f"--freeze-input-defaults: {', '.join(map(repr, unknown))} "
                            f"{'is not a graph input' if len(unknown) == 1 else 'are not graph inputs'} "
                            f"with an initializer (those with one: {valid})")
    return list(dict.fromkeys(names))


def freeze_in_place(model: onnx.ModelProto, freeze) -> list[str]:
    """Make the defaults ``freeze`` names (see :func:`chosen`) constants in ``model`` itself;
    returns their names. An input's doc string or metadata moves to the graph's value_info."""
    names = chosen(input_defaults(model), freeze)
    if not names:
        return []
    graph, gone = model.graph, set(names)
    kept = [i for i in graph.input if i.name not in gone]
    for i in graph.input:
        if i.name in gone and (i.doc_string or i.metadata_props):
            graph.value_info.add().CopyFrom(i)
    del graph.input[:]
    graph.input.extend(kept)
    if model.ir_version < FROZEN_IR:
        model.ir_version = FROZEN_IR
    return names


def freeze_input_defaults(model: onnx.ModelProto, freeze=True) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of ``model`` in which the graph inputs ``freeze`` names (True: every one that has an
    initializer; a name or names; None or False: none) are constants: each leaves the graph's
    inputs and keeps its initializer; the IR version becomes at least 4. Returns (the copy, the
    names frozen, in input order). ``model`` itself is returned when nothing is frozen.

    Raises:
        RewriterError: a name that is not a main graph input with an initializer (the message
            names it and those that are).
    """
    names = chosen(input_defaults(model), freeze)
    if not names:
        return model, []
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy, freeze_in_place(copy, names)


def check_kept(result: onnx.ModelProto, frozen: Iterable[str]) -> None:
    """RewriterError when a frozen default is a graph input again in ``result``: lowering to IR 3,
    which has no initializers outside the graph inputs, makes every initializer one."""
    inputs = {i.name for i in result.graph.input}
    back = [n for n in frozen if n in inputs]
    if back:
        raise RewriterError(f"--freeze-input-defaults: IR {result.ir_version} has no initializers outside the "
                            f"graph inputs, so {', '.join(map(repr, back))} cannot stay constant there "
                            f"(IR {FROZEN_IR} is the first that can hold it)")
