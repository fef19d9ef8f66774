"""Verify every ReduceProd output's shape: the project's rule, ONNX's strict inference and
the declared shapes (graph outputs, ``value_info``) must agree.

One ``onnx.shape_inference.infer_shapes`` call per model (strict, type-checked, with data
propagation) on a light copy: initializers over 1 KiB keep their name, type and dims but
not their data, and ReduceProd outputs' declared shapes are cleared so that ONNX's own
answer can be compared with them. Function bodies are inferred once per distinct call
site (input types and attributes).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging

import onnx
import onnx_ir as ir

from rewriter import traversal
from rewriter.errors import RewriterError
from rewriter.shape_report import JSON_SCHEMA, CheckReport, ReduceProdRow, ShapeProblem
from rewriter import shape_infer
from rewriter.shape_rule import (
    DYNAMIC_AXES,
    ShapeRuleError,
    first_conflict,
    format_shape,
    reduce_prod_form,
    reduce_prod_output_shape,
)

__all__ = ["ShapeProblem", "ReduceProdRow", "CheckReport", "check_report", "verify_shapes",
           "VerifyShapesPass", "JSON_SCHEMA", "reduce_prod_output_shape"]

logger = logging.getLogger(__name__)



def _dtype_name(elem: int) -> str | None:
    if not elem:
        return None
    return onnx.TensorProto.DataType.Name(elem).lower()


# ---------------------------------------------------------------- the check

@dataclasses.dataclass
class _Unit:
    """Scopes inferred together: the model's graphs, or one function body at one call site."""

    node_scopes: list[traversal.Scope]  # where nodes and constants are read
    declared_scopes: list[traversal.Scope]  # where declarations are read
    work: onnx.ModelProto  # what is inferred
    work_bodies: list  # the bodies of ``work`` matching node_scopes (declarations cleared)
    suffix: str = ""  # appended to locations (function call site)
    strict: bool = True  # False when some function input type is unknown


def _reduce_prod_nodes(body):
    return [(i, n) for i, n in enumerate(body.node)
            if n.op_type == "ReduceProd" and n.domain in ("", "ai.onnx")]


def _attr_int(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name and not a.ref_attr_name:
            return int(a.i)
    return default


def _axes(node: onnx.NodeProto, form: int | None, scope: traversal.Scope):
    if form is not None and form >= 18:
        if len(node.input) < 2 or not node.input[1]:
            return None
        value = traversal.constant_value(node.input[1], scope)
        return DYNAMIC_AXES if value is None else [int(a) for a in value.reshape(-1)]
    for a in node.attribute:
        if a.name == "axes" and not a.ref_attr_name:
            return [int(x) for x in a.ints]
    return None


def _check_node(i, node, scope, tscope, dscope, types, suffix, rows, problems) -> None:
    form = reduce_prod_form(scope.opset)
    location = scope.location + suffix
    out = node.output[0] if node.output else ""
    elem, in_shape = types.lookup(node.input[0], tscope) if node.input else (0, None)
    keepdims = _attr_int(node, "keepdims", 1)
    noop = _attr_int(node, "noop_with_empty_axes", 0) if form and form >= 18 else None
    axes = _axes(node, form, scope)
    inferred = types.lookup(out, tscope)[1] if out else None
    declared = types.declared(out, dscope) if out else None
    expected = None
    found: list[ShapeProblem] = []

    def problem(kind: str, reason: str) -> None:
        found.append(ShapeProblem(node.name, node.op_type, location, expected, inferred,
                                  declared, reason, out, kind))

    try:
        expected = reduce_prod_output_shape(in_shape, axes, keepdims=bool(keepdims),
                                            noop_with_empty_axes=bool(noop), version=form or 18)
    except ShapeRuleError as e:
        problem("invalid-axes", f"{e} of input {format_shape(in_shape)}")
    conflict = first_conflict(declared, expected)
    if conflict:
        problem("declared", f"declared output shape {format_shape(declared)} contradicts the "
                f"expected {format_shape(expected)} ({conflict})")
    conflict = first_conflict(inferred, expected)
    if conflict:
        problem("inferred", f"ONNX infers {format_shape(inferred)} but the ReduceProd rule gives "
                f"{format_shape(expected)} ({conflict})")
    conflict = first_conflict(declared, inferred)
    if conflict and not any(p.kind == "declared" for p in found):
        problem("declared", f"declared output shape {format_shape(declared)} contradicts ONNX's "
                f"inferred {format_shape(inferred)} ({conflict})")
    rows.append(ReduceProdRow(
        node.name or f"#{i}", location, form, _dtype_name(elem), in_shape,
        "dynamic" if axes is DYNAMIC_AXES else axes, keepdims, noop, expected, inferred,
        declared, out, "problem" if found else "ok"))
    problems.extend(found)


def _error_problems(errors: list[str], unit: _Unit) -> list[ShapeProblem]:
    by_name = {}
    for scope in unit.node_scopes:
        for node in scope.body.node:
            if node.name:
                by_name.setdefault(node.name, (node, scope))
    problems = []
    top = unit.node_scopes[0].location + unit.suffix
    for line in errors:
        parsed = shape_infer.parse_error_line(line)
        if parsed is None:
            problems.append(ShapeProblem("", "", top, None, None, None,
                                         f"ONNX shape inference failed: {line}", kind="inference-error"))
            continue
        chain, reason = parsed
        op_type, name = chain[-1]
        found = by_name.get(name) if name else None
        location = top
        if found:
            location = found[1].location + unit.suffix
        elif len(chain) > 1:
            outer_op, outer_name = chain[0]
            outer = f"node '{outer_name}' ({outer_op})" if outer_name else f"unnamed {outer_op} node"
            location = f"a subgraph of {outer} in {top}"
        output = found[0].output[0] if found and found[0].output else ""
        problems.append(ShapeProblem(name, op_type, location, None, None, None,
                                     f"ONNX strict shape inference: {reason}", output, "inference-error"))
    return problems


def _prepare(unit: _Unit, found: list, types: shape_infer.TypeIndex) -> None:
    """Clear the declared shapes of ReduceProd outputs in the unit's work model."""
    for k, nodes in enumerate(found):
        names = {n.output[0] for _, n in nodes
                 if n.output and types.declared(n.output[0], unit.declared_scopes[k]) is not None}
        if names:
            _clear_declared(unit.work_bodies[k], names)


def _run_unit(unit: _Unit, found: list, types: shape_infer.TypeIndex, rows: list, problems: list):
    """Infer the unit's work model, check its ReduceProd nodes; return the inferred scopes."""
    inferred, errors = shape_infer.infer(unit.work, strict=unit.strict)
    errs = _error_problems(errors, unit) if errors else []
    tscopes = _mirror(unit.node_scopes, inferred) if inferred is not None else []
    first = len(rows)
    for k, (scope, dscope) in enumerate(zip(unit.node_scopes, unit.declared_scopes)):
        tscope = tscopes[k] if tscopes else None
        for i, node in found[k]:
            _check_node(i, node, scope, tscope, dscope, types, unit.suffix, rows, problems)
    named = {(p.location, p.output) for p in errs if p.output}
    for row in rows[first:]:  # a strict-inference error about a ReduceProd marks its row too
        if (row.location, row.output) in named:
            row.status = "problem"
    problems.extend(errs)
    return tscopes


def _clear_declared(body, names: set[str]) -> None:
    """Forget the declared shapes of ``names`` (keeping their element type) in a work copy."""
    fields = (body.value_info,) if isinstance(body, onnx.FunctionProto) else (body.output, body.value_info)
    for field in fields:
        for vi in field:
            if vi.name in names and vi.type.WhichOneof("value") == "tensor_type":
                vi.type.tensor_type.ClearField("shape")


def _as_proto(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, ir.Model):
        return ir.to_proto(model)
    raise TypeError(f"expected an onnx.ModelProto or an onnx_ir.Model, got {type(model).__name__}")


def _mirror(scopes: list[traversal.Scope], model: onnx.ModelProto) -> list[traversal.Scope]:
    """The scopes of ``model`` (same structure as the model of ``scopes``) matching ``scopes``."""
    if len(scopes) == 1:  # no subgraph: no need to walk the graph again
        return [traversal.Scope(model.graph, scopes[0].location, None, scopes[0].opset)]
    return list(itertools.islice(traversal.iter_scopes(model), len(scopes)))


def _root(scope: traversal.Scope) -> traversal.Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


def _needs_light_copy(proto: onnx.ModelProto, found, scopes, types) -> bool:
    if any(types.declared(n.output[0], scopes[k]) is not None
           for k, nodes in enumerate(found) for _, n in nodes if n.output):
        return True
    return any(t.ByteSize() > shape_infer.STRIP_BYTES for t in proto.graph.initializer)


def check_report(model) -> CheckReport:
    """Every ReduceProd's shapes (one row each; per call site in functions) and all problems."""
    proto = _as_proto(model)
    graph_scopes, fn_scopes = [], {}
    for scope in traversal.iter_scopes(proto):
        root = _root(scope)
        if root.is_function:
            fn = root.body
            fn_scopes.setdefault((fn.domain, fn.name, getattr(fn, "overload", "")), []).append(scope)
        else:
            graph_scopes.append(scope)
    found = [_reduce_prod_nodes(s.body) for s in graph_scopes]
    types = shape_infer.TypeIndex()
    rows: list[ReduceProdRow] = []
    problems: list[ShapeProblem] = []
    if _needs_light_copy(proto, found, graph_scopes, types):
        work = shape_infer.light_copy(proto)
        unit = _Unit(graph_scopes, graph_scopes, work, [s.body for s in _mirror(graph_scopes, work)])
        _prepare(unit, found, types)
    else:  # inference does not modify its argument: no copy needed
        unit = _Unit(graph_scopes, graph_scopes, proto, [])
    tscopes = _run_unit(unit, found, types, rows, problems)
    wanted = {key for key, scopes in fn_scopes.items()
              if any(_reduce_prod_nodes(s.body) for s in scopes)}
    if wanted:
        def type_of(name: str, k: int):
            entry = types.entry(name, tscopes[k]) if tscopes else None
            if isinstance(entry, onnx.TensorProto):
                return onnx.helper.make_tensor_type_proto(entry.data_type, list(entry.dims))
            return entry.type if entry is not None and entry.HasField("type") else None

        for key, mini, suffix, typed in shape_infer.function_contexts(proto, graph_scopes, wanted, type_of):
            originals = fn_scopes[key]
            mscopes = _mirror(originals, mini)
            for m, o in zip(mscopes, originals):  # locations as in the user's model
                m.location = o.location
            unit = _Unit(mscopes, originals, mini, [s.body for s in mscopes], suffix, typed)
            ffound = [_reduce_prod_nodes(s.body) for s in mscopes]
            _prepare(unit, ffound, types)
            _run_unit(unit, ffound, types, rows, problems)
    logger.info("checked %d ReduceProd node(s): %d problem(s)", len(rows), len(problems))
    return CheckReport(rows, problems)


def verify_shapes(model) -> list[ShapeProblem]:
    """Problems with ReduceProd output shapes or ONNX strict inference; empty when consistent.

    Accepts an ``onnx.ModelProto`` or an ``onnx_ir.Model``; never modifies it.
    """
    return check_report(model).problems


class VerifyShapesPass(ir.passes.PassBase):
    """Analysis pass: raises RewriterError listing the problems, else returns the model unchanged."""

    @property
    def in_place(self) -> bool:
        return True

    @property
    def changes_input(self) -> bool:
        return False

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        problems = verify_shapes(model)
        if problems:
            details = "; ".join(str(p) for p in problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise RewriterError(f"shape verification found {len(problems)} problem(s): {details}{more}")
        return ir.passes.PassResult(model, modified=False)
