"""The floor of a half-precision result: the float32 source's own error when only its float
inputs are rounded to the half type, as the result rounds them (the Casts at the edge, or
inputs declared in half). No half arithmetic downstream can be closer to the source than
that, so a result is judged within ``max(limit, 2 x floor)`` per output (``--verify`` and
``--max-error`` alike; the floor is printed beside the error).

An input the result does not round (its first consumers compute in float32:
``--keep-io-precision``) adds nothing to the floor; with no input rounded the floor is 0. An
output that rounding the inputs alone changes in shape, or in where its NaN or infinities are
(a count of detections), has no floor (infinity): its tolerance stays the limit
(:func:`tolerance`, from :mod:`rewriter.verify.numerics.rel_l2`).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from rewriter.graph.schemas import is_default_domain
from rewriter.graph.traversal import iter_scopes
from rewriter.precision.io_first import MOVES_DATA
from rewriter.verify.numerics.rel_l2 import rel_l2_measure, tolerance
from rewriter.graph.attributes import attribute_int

__all__ = ["rounded_inputs", "round_feeds", "output_floors", "input_floors", "tolerance"]

_HALF = (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def _readers(model: onnx.ModelProto) -> dict:
    found: dict = {}
    for scope in iter_scopes(model):
        for node in scope.body.node:
            for name in node.input:
                if name:
                    found.setdefault(name, []).append(node)
    return found


def _cast_to(node: onnx.NodeProto) -> int:
    if node.op_type != "Cast" or not is_default_domain(node.domain):
        return 0
    return attribute_int(node, "to", 0)


def rounded_inputs(model: onnx.ModelProto) -> dict[str, int]:
    """Graph input name -> the half type ``model`` rounds it to before computing with it:
    declared in half, or read (directly or through nodes that only move data) by a Cast to half."""
    readers = _readers(model)
    found = {}
    for v in model.graph.input:
        elem = v.type.tensor_type.elem_type
        if elem in _HALF:
            found[v.name] = elem
            continue
        if elem != onnx.TensorProto.FLOAT:
            continue
        frontier, seen = [v.name], set()
        while frontier and v.name not in found:
            name = frontier.pop()
            for node in readers.get(name, ()):
                if _cast_to(node) in _HALF:
                    found[v.name] = _cast_to(node)
                    break
                if node.op_type in MOVES_DATA and is_default_domain(node.domain) and id(node) not in seen:
                    seen.add(id(node))
                    frontier += [o for o in node.output if o]
    return found


def round_feeds(feeds: dict, rounding: dict[str, int]) -> dict:
    """``feeds`` with each float input named in ``rounding`` rounded to its half type (kept float32)."""
    from rewriter.precision.rounding import to_half

    out = dict(feeds)
    for name, elem in rounding.items():
        value = out.get(name)
        if value is not None and np.asarray(value).dtype.kind == "f":
            out[name] = to_half(np.asarray(value, np.float32), elem, False).astype(np.float32)
    return out


def output_floors(want: list, got: list) -> list[float]:
    """Per output: relative L2 error of ``got`` (the source on rounded inputs) against ``want``
    for a float output; 0 for another; infinity when they cannot be compared by value."""
    floors = []
    for a, b in zip(want, got):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind != "f":
            floors.append(0.0)
            continue
        error, _, _, reason = rel_l2_measure(a, b)
        floors.append(math.inf if reason else float(error))
    return floors


def input_floors(rewritten: onnx.ModelProto, feeds_list: list, run, want_list: list) -> list[float] | None:
    """Per output, the largest floor over the samples ``feeds_list`` (whose source outputs are
    ``want_list``): ``run(feeds)`` runs the float32 source. Zeros when ``rewritten`` rounds no
    input; None when the source does not run on the rounded inputs (no floor known)."""
    rounding = rounded_inputs(rewritten)
    if not want_list:
        return None
    if not rounding:
        return [0.0] * len(want_list[0])
    worst: list[float] | None = None
    for feeds, want in zip(feeds_list, want_list):
        try:
            got = run(round_feeds(feeds, rounding))
        except Exception:  # noqa: BLE001 - the source refuses the rounded inputs: no floor known
            return None
        floors = output_floors(want, got)
        worst = floors if worst is None else [max(x, y) for x, y in zip(worst, floors)]
    return worst
