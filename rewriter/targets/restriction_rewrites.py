"""Exact rewrites that make nodes meet a runtime's restrictions (:mod:`rewriter.targets.restrictions`).

Only rewrites that compute exactly what the node computed:

- ``outputs_unused``: an optional output nobody reads is dropped (MaxPool's Indices,
  LayerNormalization's Mean and InvStdDev, Attention's present_key / present_value /
  qk_matmul_output). One that is read stays, and blocks.
- ``constant``: an integer or bool input computed only from constants by deterministic nodes
  (a Cast or an Identity of a Constant, shape arithmetic on initializers) becomes an initializer with
  its value, computed by onnx.reference (integer arithmetic: exact). Float inputs are left alone.
- ``if_branches``: an else_branch output with the name of a then_branch output is given out as an
  Identity of it under a fresh name (the If's outputs are positional: nothing else changes).
- ``zero`` (QuantizeLinear / DequantizeLinear zero points) and ``input_type`` (DequantizeLinear's
  quantized input): a DequantizeLinear of a constant whose zero point is a constant (or absent)
  takes the constant minus the zero point, as int8, and no zero point, when every value fits; a
  uint8 QuantizeLinear whose zero point is 128 everywhere, all of whose readers are
  DequantizeLinear nodes with the same scale, axis and zero point, becomes int8 with zero point 0
  on both sides (``clamp(round(x/s) + 128, 0, 255) - 128 = clamp(round(x/s), -128, 127)``).
- ``rank`` (2D or 3D pooling): a 1D AveragePool / MaxPool becomes a 2D one over an added last axis
  of 1, between an Unsqueeze and a Squeeze (onnx-tensorrt's importer does the same with a rank-3
  input; kernel 1 and no padding along that axis give the same windows).

Anything else stays as it is; the checker then names it as a blocker.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.graph import traversal
from rewriter.graph.nondeterministic import NON_DETERMINISTIC_OPS
from rewriter.targets.restriction_lookups import Lookups, trt_constant
from rewriter.targets.restrictions import broken
from rewriter.graph.schemas import is_default_domain
from rewriter.graph.attributes import attribute_value, attribute_values
from rewriter.graph.names import fresh_name

__all__ = ["rewrite", "REWRITABLE"]

_FOLD_LIMIT = 16  # nodes folded for one input at most (shape arithmetic is a few nodes)
_FOLD_ELEMENTS = 1 << 16


class _Rewriter:
    def __init__(self, model: onnx.ModelProto, read):
        self.model = model
        self.read = read or numpy_helper.to_array
        self.used: set[str] | None = None
        self.readers: dict[str, list] | None = None
        self.names = {n for s in traversal.iter_scopes(model) for n in _names(s)}
        self.done: list[str] = []
        self.replaced: set[str] = set()  # names rewritten nodes stopped reading
        self.lookups: Lookups | None = None
        self.around: dict[int, tuple] = {}  # id(node) -> (body, nodes before it, nodes after it)

    def insert_around(self, body, node, before: list, after: list) -> None:
        """Nodes to place just before and after ``node`` of ``body`` (done at the end, in one pass)."""
        _, b, a = self.around.setdefault(id(node), (body, [], []))
        b.extend(before)
        a.extend(after)

    def place_inserted(self) -> None:
        bodies = {id(body): body for body, _, _ in self.around.values()}
        for body in bodies.values():
            nodes = []
            for n in body.node:
                _, before, after = self.around.get(id(n), (None, [], []))
                nodes += [*before, n, *after]
            copies = [onnx.NodeProto() for _ in nodes]
            for c, n in zip(copies, nodes):
                c.CopyFrom(n)
            del body.node[:]
            body.node.extend(copies)

    def fresh(self, base: str) -> str:
        return fresh_name(self.names, base)

    def _uses(self):
        self.used, self.readers = set(), {}
        for scope in traversal.iter_scopes(self.model):
            for n in scope.body.node:
                for i in n.input:
                    if i:
                        self.used.add(i)
                        self.readers.setdefault(i, []).append(n)
            body = scope.body
            self.used.update(body.output if scope.is_function else (o.name for o in body.output))

    def is_used(self, name: str) -> bool:
        if self.used is None:
            self._uses()
        return name in self.used

    def readers_of(self, name: str) -> list:
        if self.readers is None:
            self._uses()
        return self.readers.get(name, [])

    def add_constant(self, scope: traversal.Scope, value: np.ndarray, base: str) -> str:
        """A new constant in ``scope``: an initializer in a graph, a Constant node in a function."""
        name = self.fresh(base)
        tensor = numpy_helper.from_array(value, name)
        if scope.is_function:
            node = onnx.helper.make_node("Constant", [], [name], value=tensor, name=self.fresh(f"{base}_const"))
            scope.body.node.insert(0, node)
        else:
            scope.body.initializer.append(tensor)
        scope.invalidate()
        return name


def _names(scope: traversal.Scope):
    body = scope.body
    yield from (o for n in body.node for o in n.output)
    yield from (n.name for n in body.node)
    if not scope.is_function:
        yield from (t.name for t in body.initializer)
        yield from (v.name for v in body.input)


# ---- outputs_unused

def _drop_outputs(rw: _Rewriter, node, rule, scope) -> bool:
    drop = [i for i in rule["outputs"] if i < len(node.output) and node.output[i] and not rw.is_used(node.output[i])]
    if not drop or any(i < len(node.output) and node.output[i] and rw.is_used(node.output[i]) for i in rule["outputs"]):
        return False
    for i in drop:
        node.output[i] = ""
    while node.output and not node.output[-1]:
        node.output.pop()
    scope.invalidate()
    rw.done.append(f"{node.op_type}: unused optional output(s) dropped")
    return True


# ---- constant: fold an integer input computed from constants

def _fold(rw: _Rewriter, name: str, scope: traversal.Scope, opset: int, depth: list) -> np.ndarray | None:
    value = trt_constant(name, scope, rw.read)
    if value is not None:
        return value
    s, producer = scope, None
    while s is not None and producer is None:
        if name in s.inputs() and name not in s.initializers():
            return None
        producer = s.producers().get(name)
        s = s.parent if producer is None else s
    if producer is None or not is_default_domain(producer.domain) or producer.op_type in NON_DETERMINISTIC_OPS \
            or any(True for _ in traversal.subgraphs(producer)) or len(depth) >= _FOLD_LIMIT:
        return None
    depth.append(producer)
    inputs = []
    for i in producer.input:
        v = _fold(rw, i, s, opset, depth) if i else None
        if i and v is None:
            return None
        inputs.append(v)
    from rewriter.graph.evaluate import evaluate_node

    try:
        out = evaluate_node(producer, inputs, opset) if producer.output[0] == name else None
    except Exception:  # noqa: BLE001 - a node onnx.reference cannot run stays as it is
        return None
    if out is None or not isinstance(out, np.ndarray) or out.size > _FOLD_ELEMENTS:
        return None
    return out


def _fold_constant(rw: _Rewriter, node, rule, scope) -> bool:
    changed = False
    for i in rule["inputs"]:
        name = node.input[i] if i < len(node.input) else ""
        if not name or trt_constant(name, scope, rw.read) is not None:
            continue
        chain: list = []
        value = _fold(rw, name, scope, scope.opset or onnx.defs.onnx_opset_version(), chain)
        if value is None or not (np.issubdtype(value.dtype, np.integer) or value.dtype == np.bool_):
            continue
        rw.replaced.update(o for n in chain for o in n.output if o)  # what only this input read goes
        rw.replaced.update(i for n in chain for i in n.input if i)
        node.input[i] = rw.add_constant(scope, np.asarray(value), f"{name}_folded")
        rw.done.append(f"{node.op_type}: input {name!r} computed from constants made an initializer")
        changed = True
    return changed


# ---- zero points

def _per_axis(zp: np.ndarray, x_rank: int, axis: int) -> np.ndarray:
    if zp.ndim == 0 or zp.size == 1:
        return zp.reshape(())
    shape = [1] * x_rank
    shape[axis % x_rank] = zp.size
    return zp.reshape(shape)


def _dq_constant_input(rw: _Rewriter, node, scope) -> bool:
    """DequantizeLinear(x const, s, zp const or none) -> DequantizeLinear(x - zp as int8, s)."""
    if attribute_value(node, "block_size", 0):
        return False
    x = trt_constant(node.input[0], scope, rw.read)
    has_zp = len(node.input) > 2 and bool(node.input[2])
    zp = trt_constant(node.input[2], scope, rw.read) if has_zp else np.zeros((), np.int64)
    if x is None or zp is None or not np.issubdtype(x.dtype, np.integer) or zp.size == 0 or \
            (x.dtype == np.int8 and not np.any(zp)):
        return False
    axis = attribute_value(node, "axis", 1)
    if zp.size > 1 and (x.ndim == 0 or zp.size != x.shape[axis % x.ndim]):
        return False
    shifted = x.astype(np.int64) - _per_axis(zp.astype(np.int64), x.ndim, axis)
    if shifted.min(initial=0) < -128 or shifted.max(initial=0) > 127:
        return False
    rw.replaced.update(node.input[i] for i in (0, 2) if i < len(node.input) and node.input[i])
    node.input[0] = rw.add_constant(scope, shifted.astype(np.int8), f"{node.input[0]}_int8")
    del node.input[2:]
    rw.done.append("DequantizeLinear: constant input made int8 (its zero point folded in: 0)")
    return True


def _q_dq_uint8_pair(rw: _Rewriter, node, scope) -> bool:
    """uint8 QuantizeLinear with zero point 128 read only by matching DequantizeLinear nodes -> int8, zero point 0."""
    if len(node.input) < 3 or len(node.output) != 1:
        return False
    zp = trt_constant(node.input[2], scope, rw.read)
    if zp is None or zp.dtype != np.uint8 or zp.size == 0 or np.any(zp != 128):
        return False
    out, attrs = node.output[0], attribute_values(node, ("axis", "block_size", "output_dtype", "saturate"))
    if attrs.get("output_dtype", onnx.TensorProto.UINT8) != onnx.TensorProto.UINT8 or attrs.get("block_size", 0):
        return False
    graph_outputs = {o.name for s in traversal.iter_scopes(rw.model) if not s.is_function for o in s.body.output} | \
        {o for f in rw.model.functions for o in f.output}
    readers = rw.readers_of(out)
    if out in graph_outputs or not readers:
        return False
    scale = trt_constant(node.input[1], scope, rw.read)
    for dq in readers:
        if dq.op_type != "DequantizeLinear" or not is_default_domain(dq.domain) or list(dq.input[:1]) != [out] \
                or len(dq.input) < 3 or attribute_value(dq, "axis", 1) != attrs.get("axis", 1) \
                or attribute_value(dq, "block_size", 0):
            return False
        dq_zp = trt_constant(dq.input[2], scope, rw.read)
        if dq_zp is None or dq_zp.dtype != np.uint8 or dq_zp.shape != zp.shape or np.any(dq_zp != 128):
            return False
        if dq.input[1] != node.input[1]:
            dq_scale = trt_constant(dq.input[1], scope, rw.read)
            if scale is None or dq_scale is None or dq_scale.shape != scale.shape or \
                    dq_scale.dtype != scale.dtype or not np.array_equal(dq_scale, scale):
                return False
    zero = rw.add_constant(scope, np.zeros(zp.shape, np.int8), f"{node.input[2]}_int8")
    rw.replaced.update([node.input[2], *(dq.input[2] for dq in readers)])
    node.input[2] = zero
    for dq in readers:
        dq.input[2] = zero
    for s in traversal.iter_scopes(rw.model):  # the quantized value's recorded type changes
        if not s.is_function:
            for v in s.body.value_info:
                if v.name == out and v.type.HasField("tensor_type"):
                    v.type.tensor_type.elem_type = onnx.TensorProto.INT8
    rw.done.append(f"QuantizeLinear: uint8 with zero point 128 and its {len(readers)} DequantizeLinear reader(s) "
                   "made int8 with zero point 0")
    return True


def _zero(rw: _Rewriter, node, rule, scope) -> bool:
    """Zero points (``zero``) and DequantizeLinear's quantized type (``input_type``)."""
    if node.op_type == "DequantizeLinear" and (rule["kind"] == "zero" or "INT8" in rule.get("types", ())):
        return _dq_constant_input(rw, node, scope)
    if node.op_type == "QuantizeLinear" and rule["kind"] == "zero":
        return _q_dq_uint8_pair(rw, node, scope)
    return False


# ---- if_branches: outputs of the same name

def _rename_else_outputs(rw: _Rewriter, node, rule, scope) -> bool:
    """An else_branch output named as a then_branch one becomes an Identity of it under a fresh name."""
    then_g = next((a.g for a in node.attribute if a.name == "then_branch"), None)
    else_g = next((a.g for a in node.attribute if a.name == "else_branch"), None)
    if then_g is None or else_g is None:
        return False
    taken = {o.name for o in then_g.output}
    changed = 0
    for out in else_g.output:
        if out.name in taken:
            fresh = rw.fresh(f"{out.name}_else")
            else_g.node.append(onnx.helper.make_node("Identity", [out.name], [fresh], name=rw.fresh(f"{fresh}_id")))
            out.name = fresh
            changed += 1
    if changed:
        rw.done.append("If: else_branch outputs named as then_branch ones renamed (an Identity each)")
    return bool(changed)


# ---- rank: 1D pooling as 2D (what onnx-tensorrt's poolingHelper itself does with a rank-3 input)

_POOLS = frozenset({"AveragePool", "MaxPool"})


def _axes_node(rw, op, x, out, scope, base):
    """Unsqueeze / Squeeze of axis 3, with axes as the node's opset wants them."""
    name = rw.fresh(base)
    if (scope.opset or 13) >= 13:
        return onnx.helper.make_node(op, [x, rw.add_constant(scope, np.array([3], np.int64), f"{base}_axes")], [out],
                                     name=name)
    return onnx.helper.make_node(op, [x], [out], axes=[3], name=name)


def _pool_as_2d(rw: _Rewriter, node, rule, scope) -> bool:
    """A 1D AveragePool / MaxPool, [N, C, L], as a 2D one over [N, C, L, 1] between an Unsqueeze
    and a Squeeze: the same windows, kernel 1 and no padding along the added axis."""
    shape = rw.lookups.shape(node.input[0]) if rw.lookups is not None else None
    if node.op_type not in _POOLS or shape is None or len(shape) != 3 or 4 not in rule["ranks"] \
            or (len(node.output) > 1 and node.output[1]) or any(a.ref_attr_name for a in node.attribute):
        return False
    x, y = node.input[0], node.output[0]
    x4, y4 = rw.fresh(f"{x}_2d"), rw.fresh(f"{y}_2d")
    before = _axes_node(rw, "Unsqueeze", x, x4, scope, f"{node.name or node.op_type}_to_2d")
    after = _axes_node(rw, "Squeeze", y4, y, scope, f"{node.name or node.op_type}_from_2d")
    for a in node.attribute:
        if a.name in ("kernel_shape", "strides", "dilations"):
            vals = list(a.ints) + [1]
        elif a.name == "pads":
            vals = [a.ints[0], 0, a.ints[1], 0]
        else:
            continue
        del a.ints[:]
        a.ints.extend(vals)
    node.input[0], node.output[0] = x4, y4
    rw.insert_around(scope.body, node, [before], [after])
    rw.done.append(f"{node.op_type}: 1D pooling made 2D (an Unsqueeze before, a Squeeze after)")
    return True


_REWRITES = {"outputs_unused": _drop_outputs, "constant": _fold_constant, "zero": _zero, "input_type": _zero,
             "if_branches": _rename_else_outputs, "rank": _pool_as_2d}
REWRITABLE = frozenset(_REWRITES)  # the restriction kinds an exact rewrite here can meet


def rewrite(model: onnx.ModelProto, rules: dict, *, read_tensor=None, inferred=None) -> tuple[list[str], set[str]]:
    """Rewrite, in place, the nodes of ``model`` that break one of ``rules`` where this module has an
    exact rewrite; returns what was done (one line per kind of change, with its count) and the names
    the rewritten nodes no longer read (for the caller's removal of what became unused). The caller
    checks again: what is still broken blocks."""
    lookups = Lookups(model, read_tensor, inferred)
    todo = [(scope, node, rule) for scope, node, rule, _ in
            broken(model, {op: [r for r in rs if r["kind"] in _REWRITES] for op, rs in rules.items()},
                   lookups=lookups)]
    if not todo:
        return [], set()
    rw = _Rewriter(model, read_tensor)
    rw.lookups = lookups
    for scope, node, rule in todo:
        if _REWRITES[rule["kind"]](rw, node, rule, scope):
            rw.used = rw.readers = None
    rw.place_inserted()
    counts: dict[str, int] = {}
    for line in rw.done:
        counts[line] = counts.get(line, 0) + 1
    return [f"{line} x{n}" for line, n in counts.items()], rw.replaced
