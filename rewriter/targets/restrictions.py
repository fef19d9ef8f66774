"""A runtime's per-op restrictions (attribute values, input ranks and types, used outputs,
constant inputs, value limits) checked node by node.

The rules are data: ``rewriter/targets/data/tensorrt.json`` holds, per TensorRT release, each
clause of onnx-tensorrt's ``docs/operators.md`` Restrictions column either as a rule (``kind`` and
its fields, the clause itself as ``text``) or, when no static look at a model decides it, in
``unchecked`` with a note (``tools/runtime_data/trt_restrictions.py`` makes both). A
:class:`rewriter.targets.Target` carries its release's rules; :func:`violations` lists every node
of a model that breaks one, with the clause and what in the node breaks it.

What "constant" means is what onnx-tensorrt takes as weights: an initializer (also one that is a
graph input, which the parser imports as weights) or a Constant node's output, in the node's graph
or an enclosing one. A rank, dim or type that shape inference cannot tell counts as a violation
(the node may well be refused), and says so: ``--input-shape`` often settles it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx

from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.restriction_lookups import UNKNOWN, Lookups, attr, schema_of, trt_constant, value_bound

__all__ = ["Violation", "violations", "broken", "trt_constant", "Lookups"]

# the rule kinds rewriter.targets.restriction_rewrites can satisfy exactly (for some nodes)


@dataclasses.dataclass(frozen=True)
class Violation:
    """One node that breaks one restriction."""

    node: str  # the node's label (name, op, where)
    name: str
    where: str
    op: str
    restriction: str  # the clause of operators.md
    reason: str  # what in the node breaks it
    kind: str = ""  # the rule's kind

    def line(self) -> str:
        return f"{self.node}: {self.reason} (operators.md: \"{self.restriction}\")"


def _input(node, i: int) -> str:
    return node.input[i] if i < len(node.input) else ""


def _name_of(schema, i: int, outputs: bool = False) -> str:
    formal = (schema.outputs if outputs else schema.inputs) if schema is not None else []
    return formal[i].name if i < len(formal) else f"#{i}"


# ---- the rules: each returns what in the node breaks it, or None

def _check_attribute(rule, node, schema, ctx, scope):
    for cond, want in rule.get("when", {}).items():
        if attr(node, schema, cond) != want:
            return None
    v = attr(node, schema, rule["attribute"])
    if v is UNKNOWN:
        return f"{rule['attribute']} is set by the function's caller"
    if v is not None and v not in rule["allowed"]:
        return f"{rule['attribute']} is {v!r}"
    return None


def _check_attributes_default(rule, node, schema, ctx, scope):
    for name in rule["attributes"]:
        v = attr(node, schema, name, default=False)
        if v is UNKNOWN:
            return f"{name} is set by the function's caller"
        if v is not None and v != attr(onnx.NodeProto(), schema, name):
            return f"it sets {name} = {v!r}"
    return None


def _check_attributes_absent(rule, node, schema, ctx, scope):
    present = [a.name for a in node.attribute if a.name in rule["attributes"]]
    return f"it has {', '.join(present)}" if present else None


def _check_ones(rule, node, schema, ctx, scope):
    v = attr(node, schema, rule["attribute"], default=False)
    if v is UNKNOWN:
        return f"{rule['attribute']} is set by the function's caller"
    return f"{rule['attribute']} is {v}" if v and any(x != 1 for x in v) else None


def _check_symmetric_pads(rule, node, schema, ctx, scope):
    v = attr(node, schema, rule["attribute"], default=False)
    if v is UNKNOWN:
        return f"{rule['attribute']} is set by the function's caller"
    if v and list(v[:len(v) // 2]) != list(v[len(v) // 2:]):
        return f"{rule['attribute']} is {v} (begin and end differ)"
    return None


def _check_same_activations(rule, node, schema, ctx, scope):
    if attr(node, schema, "direction") != "bidirectional":
        return None
    acts = attr(node, schema, "activations", default=False)
    if acts is UNKNOWN:
        return "activations is set by the function's caller"
    acts = acts or []
    half = len(acts) // 2
    if acts and [a.lower() for a in acts[:half]] != [a.lower() for a in acts[half:]]:
        return f"it is bidirectional with activations {acts[:half]} forward and {acts[half:]} reverse"
    return None


def _check_rank(rule, node, schema, ctx, scope):
    for i in rule["inputs"]:
        name = _input(node, i)
        if not name:
            continue
        shape = ctx.shape(name)
        what = f"input {_name_of(schema, i)} ({name!r})"
        if shape is None:
            return f"the rank of {what} is not known (shape inference gives none; --input-shape may tell)"
        if len(shape) not in rule["ranks"]:
            return f"{what} has rank {len(shape)}, not {' or '.join(map(str, rule['ranks']))}"
    return None


def _check_inputs_absent(rule, node, schema, ctx, scope):
    present = [f"{_name_of(schema, i)} ({_input(node, i)!r})" for i in rule["inputs"] if _input(node, i)]
    return f"it has input {', '.join(present)}" if present else None


def _check_outputs_unused(rule, node, schema, ctx, scope):
    used, present = [], []
    for i in rule["outputs"]:
        out = node.output[i] if i < len(node.output) else ""
        if out:
            (used if out in ctx.used() else present).append(f"{_name_of(schema, i, True)} ({out!r})")
    if used:
        return f"its output {', '.join(used)} is used"
    return f"it has output {', '.join(present)} (unused: convert drops it)" if present else None


def _check_constant(rule, node, schema, ctx, scope):
    for i in rule["inputs"]:
        name = _input(node, i)
        if not name:
            continue
        value = trt_constant(name, scope, ctx.read)
        what = f"input {_name_of(schema, i)} ({name!r})"
        if value is None:
            return f"{what} is not an initializer or a Constant's output"
        if "equals" in rule and not np.all(value == rule["equals"]):
            return f"{what} is {value.tolist()!r}, not {rule['equals']!r}"
    return None


def _check_zero(rule, node, schema, ctx, scope):
    name = _input(node, rule["input"])
    if not name:
        return None
    value = trt_constant(name, scope, ctx.read)
    what = f"input {_name_of(schema, rule['input'])} ({name!r})"
    if value is None:
        return f"{what} is not a constant"
    if np.any(value.astype(np.float64) != 0):
        shown = value.tolist() if value.size <= 4 else f"{value.size} values, not all 0"
        return f"{what} is {shown!r}"
    return None


# the output's elements are the first input's (all of them, or repeated): its bounds hold
def _check_less_than(rule, node, schema, ctx, scope):
    name, limit = _input(node, rule["input"]), rule["value"]
    value = trt_constant(name, scope, ctx.read) if name else None
    if value is not None:
        return f"{_name_of(schema, rule['input'])} is {int(np.max(value))}, not below {limit}" \
            if np.any(value >= limit) else None
    # computed at run time: bounded by constants (Min(150, n), ReduceMin(Concat(...)))
    bound = value_bound(name, scope, ctx, False) if name else None
    if bound is not None and bound < limit:
        return None
    # K never exceeds the dim TopK works along, so a static dim below the limit settles it too
    shape = ctx.shape(_input(node, 0))
    axis = attr(node, schema, "axis")
    if shape is not None and isinstance(axis, int) and -len(shape) <= axis < len(shape):
        dim = shape[axis]
        if isinstance(dim, int) and dim < limit:
            return None
    return f"{_name_of(schema, rule['input'])} is computed at run time, and neither a bound on it nor the dim it " \
           f"selects from is known below {limit}"


def _check_input_type(rule, node, schema, ctx, scope):
    name = _input(node, rule["input"])
    if not name:
        return None
    t = ctx.elem_type(name)
    allowed = [getattr(onnx.TensorProto, n) for n in rule["types"]]
    what = f"input {_name_of(schema, rule['input'])} ({name!r})"
    if t is None:
        return f"the type of {what} is not known"
    return f"{what} is {onnx.TensorProto.DataType.Name(t)}" if t not in allowed else None


def _check_static_shape(rule, node, schema, ctx, scope):
    name = _input(node, rule["input"])
    shape = ctx.shape(name)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return f"input {_name_of(schema, rule['input'])} ({name!r}) has shape " \
               f"{'unknown' if shape is None else shape}, not static"
    return None


def _check_static_dim(rule, node, schema, ctx, scope):
    name = _input(node, rule["input"])
    shape, axis = ctx.shape(name), attr(node, schema, rule["axis_attribute"])
    if shape is None or not isinstance(axis, int) or not -len(shape) <= axis < len(shape) \
            or not isinstance(shape[axis], int):
        return f"dim {axis} of input {_name_of(schema, rule['input'])} ({name!r}) is not static " \
               f"(shape {'unknown' if shape is None else shape})"
    return None


def _check_real_signal(rule, node, schema, ctx, scope):
    """A real signal: [batch, length, 1], or [batch, length] (which ONNX Runtime reads as real too)."""
    name = _input(node, rule["input"])
    shape = ctx.shape(name)
    if shape is not None and (len(shape) == 2 or (len(shape) == 3 and shape[2] == 1)):
        return None
    what = f"input {_name_of(schema, rule['input'])} ({name!r})"
    if shape is None or (len(shape) == 3 and not isinstance(shape[2], int)):
        return f"{what} has shape {'unknown' if shape is None else shape}: not known to be real"
    return f"{what} has shape {shape}, not [batch, length, 1] (a real signal)"


def _check_resize_axes(rule, node, schema, ctx, scope):
    if not _input(node, 2):
        return None
    axes = attr(node, schema, "axes", default=False)
    if axes is None:
        return None
    if axes is UNKNOWN:
        return "axes is set by the function's caller"
    shape = ctx.shape(_input(node, 0))
    if shape is None:
        return f"it has scales and axes {axes}, and the rank of its input is not known"
    if [a % len(shape) for a in axes] != list(range(len(shape))):
        return f"it has scales and axes {axes}, not 0..{len(shape) - 1} in order"
    return None


def _check_if_branches(rule, node, schema, ctx, scope):
    then_g = next((a.g for a in node.attribute if a.name == "then_branch"), None)
    else_g = next((a.g for a in node.attribute if a.name == "else_branch"), None)
    if then_g is None or else_g is None:
        return None
    same = sorted({o.name for o in then_g.output} & {o.name for o in else_g.output})
    if same:
        return f"both branches output {', '.join(map(repr, same))}"
    for k, (a, b) in enumerate(zip(then_g.output, else_g.output)):
        sa, sb = ctx.shape(a.name), ctx.shape(b.name)
        if sa is None or sb is None:
            return f"the rank of output {k} of a branch is not known"
        if rule["shapes"] == "same_rank" and len(sa) != len(sb):
            return f"output {k} has rank {len(sa)} in then_branch and {len(sb)} in else_branch"
        if rule["shapes"] == "broadcastable" and any(
                isinstance(x, int) and isinstance(y, int) and x != y and 1 not in (x, y)
                for x, y in zip(reversed(sa), reversed(sb))):
            return f"output {k} has shape {sa} in then_branch and {sb} in else_branch (not broadcastable)"
    return None


def _einsum_terms(node, schema):
    eq = attr(node, schema, "equation")
    if not isinstance(eq, str):
        return None
    return [t.strip() for t in eq.replace(" ", "").split("->")[0].split(",")]


def _check_einsum_plain(rule, node, schema, ctx, scope):
    terms = _einsum_terms(node, schema)
    if terms is None:
        return "its equation is set by the function's caller"
    if any("..." in t for t in terms):
        return "its equation has an ellipsis"
    diagonal = [t for t in terms if len(set(t)) != len(t)]
    return f"its equation takes a diagonal ({diagonal[0]!r})" if diagonal else None


def _check_einsum_no_broadcast(rule, node, schema, ctx, scope):
    terms = _einsum_terms(node, schema)
    if terms is None or any("..." in t for t in terms):
        return None  # einsum_plain says so
    dims: dict[str, list] = {}
    for term, name in zip(terms, node.input):
        shape = ctx.shape(name)
        if shape is None or len(shape) != len(term):
            return f"the shape of input {name!r} is not known"
        for letter, d in zip(term, shape):
            dims.setdefault(letter, []).append(d)
    for letter, ds in dims.items():
        if 1 in ds and any(d != 1 for d in ds):  # a dim of 1 against another (or an unknown one) broadcasts
            return f"subscript {letter!r} has dims {ds} across the inputs (broadcasting)"
    return None


CHECKS: dict[str, Callable] = {
    "attribute": _check_attribute, "attributes_default": _check_attributes_default,
    "attributes_absent": _check_attributes_absent, "ones": _check_ones, "symmetric_pads": _check_symmetric_pads,
    "same_activations": _check_same_activations, "rank": _check_rank, "inputs_absent": _check_inputs_absent,
    "outputs_unused": _check_outputs_unused, "constant": _check_constant, "zero": _check_zero,
    "less_than": _check_less_than, "input_type": _check_input_type, "static_shape": _check_static_shape,
    "static_dim": _check_static_dim, "real_signal": _check_real_signal, "resize_axes": _check_resize_axes,
    "if_branches": _check_if_branches, "einsum_plain": _check_einsum_plain,
    "einsum_no_broadcast": _check_einsum_no_broadcast,
}


def broken(model: onnx.ModelProto, rules: dict, *, read_tensor=None, inferred=None, lookups: Lookups | None = None):
    """(scope, node, rule, reason) for every node of ``model`` that breaks one of ``rules``
    ({op: [rule, ...]}, the default domain's ops), in model order."""
    if not rules:
        return
    ctx = lookups or Lookups(model, read_tensor, inferred)
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            if not is_default_domain(node.domain) or node.op_type not in rules:
                continue
            schema = schema_of(node.op_type, scope.opset)
            for rule in rules[node.op_type]:
                reason = CHECKS[rule["kind"]](rule, node, schema, ctx, scope)
                if reason is not None:
                    yield scope, node, rule, reason


def violations(model: onnx.ModelProto, rules: dict, *, read_tensor=None, inferred=None) -> list[Violation]:
    """Every (node, rule) of ``model`` where the node breaks one of ``rules`` ({op: [rule, ...]}, the
    default domain's ops), in model order. ``read_tensor`` reads initializers (external data);
    ``inferred``: the model after shape inference or a LazyInference, when the caller has it."""
    return [Violation(traversal.node_label(node, scope), node.name, scope.location, node.op_type, rule["text"],
                      reason, rule["kind"])
            for scope, node, rule, reason in broken(model, rules, read_tensor=read_tensor, inferred=inferred)]
