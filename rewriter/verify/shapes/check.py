"""Verify every ReduceProd output's shape: the project's rule, ONNX's strict inference and
the declared shapes (graph outputs, ``value_info``) must agree.

One ``onnx.shape_inference.infer_shapes`` call per consistent model (strict, type-checked,
with data propagation), on the model itself, or on a light copy when it has initializers
over 1 KiB (they keep their name, type and dims but not their data). In the copy, declared
shapes of ReduceProd outputs are cleared so that ONNX's own answer can be compared with
them; a model without big initializers gets that copy only when strict inference fails.
Function bodies are inferred once per distinct call site (input types and attributes).
"""

from __future__ import annotations

import dataclasses
import logging

import onnx

from rewriter.graph import traversal
from rewriter.graph.constants import constant_value
from rewriter.io import tensor_reader
from rewriter.io.base_dir import proto_of
from rewriter.verify.shapes import inference as shape_infer
from rewriter.verify.shapes.shape_report import JSON_SCHEMA, CheckReport, ReduceProdRow, ShapeProblem
from rewriter.verify.shapes.rule import (
    DYNAMIC_AXES,
    ShapeRuleError,
    first_conflict,
    format_shape,
    reduce_prod_form,
    reduce_prod_output_shape,
)

__all__ = ["ShapeProblem", "ReduceProdRow", "CheckReport", "check_report", "verify_reduce_prod_shapes",
           "verify_reduce_prod_shapes_with_ranks", "verify_shapes", "verify_shapes_with_ranks", "JSON_SCHEMA",
           "reduce_prod_output_shape"]

logger = logging.getLogger(__name__)
_READ = tensor_reader(None)  # loaded models carry the directory of their external data


@dataclasses.dataclass
class _Unit:
    """Scopes inferred together: the model's graphs, or one function body at one call site."""

    node_scopes: list[traversal.Scope]  # where nodes and constants are read
    found: list[list]  # per scope, its ReduceProd nodes with their positions
    declared_scopes: list[traversal.Scope]  # where declarations are read
    work: onnx.ModelProto  # what is inferred
    suffix: str = ""  # appended to locations (function call site)
    strict: bool = True  # False when some function input type is unknown
    delegated: frozenset = frozenset()  # calls to these functions: errors reported by their own unit


class _Context:
    """Caches shared by all nodes of one check: types, constant axes, verdicts."""

    def __init__(self, want_rows: bool):
        self.types = shape_infer.TypeIndex()
        self.rows: list[ReduceProdRow] | None = [] if want_rows else None
        self.problems: list[ShapeProblem] = []
        self._axes: dict[tuple[int, str], object] = {}
        self._verdicts: dict[tuple, tuple] = {}
        # ReduceProd outputs ONNX could not infer but the rule knows: (scope, output, elem, shape)
        self.rule_only: list[tuple[traversal.Scope, str, int, list]] = []
        self.main_tscope: traversal.Scope | None = None  # the main graph of the inferred model

    def main_rank(self, name: str) -> int | None:
        """The rank ONNX's inference gave a main-graph value, None when unknown."""
        if self.main_tscope is None:
            return None
        shape = self.types.lookup(name, self.main_tscope)[1]
        return None if shape is None else len(shape)

    def axes_input(self, name: str, scope: traversal.Scope):
        key = (id(scope), name)
        if key not in self._axes:
            value = constant_value(name, scope, _READ)
            self._axes[key] = DYNAMIC_AXES if value is None else tuple(int(a) for a in value.reshape(-1))
        return self._axes[key]

    def verdict(self, key: tuple) -> tuple:
        found = self._verdicts.get(key)
        if found is None:
            found = self._verdicts[key] = _judge(*key)
        return found


def _judge(form, in_shape, axes, keepdims, noop, inferred, declared) -> tuple:
    """(expected shape, ((kind, reason), ...)) for one combination of shapes and attributes."""
    found = []
    expected = None
    try:
        expected = reduce_prod_output_shape(in_shape, axes, keepdims=bool(keepdims),
                                            noop_with_empty_axes=bool(noop), version=form or 18)
    except ShapeRuleError as e:
        found.append(("invalid-axes", f"{e} of input {format_shape(in_shape)}"))
    conflict = first_conflict(declared, expected)
    if conflict:
        found.append(("declared", f"declared output shape {format_shape(declared)} contradicts the "
                      f"expected {format_shape(expected)} ({conflict})"))
    conflict = first_conflict(inferred, expected)
    if conflict:
        found.append(("inferred", f"ONNX infers {format_shape(inferred)} but the ReduceProd rule "
                      f"gives {format_shape(expected)} ({conflict})"))
    conflict = first_conflict(declared, inferred)
    if conflict and not any(kind == "declared" for kind, _ in found):
        found.append(("declared", f"declared output shape {format_shape(declared)} contradicts "
                      f"ONNX's inferred {format_shape(inferred)} ({conflict})"))
    return expected, tuple(found)


def _check_node(i, node, scope, tscope, dscope, ctx: _Context, suffix: str, form: int | None) -> None:
    keepdims, noop, axes = 1, 0, None
    for a in node.attribute:
        if a.ref_attr_name:
            continue
        if a.name == "keepdims":
            keepdims = a.i
        elif a.name == "noop_with_empty_axes":
            noop = a.i
        elif a.name == "axes":
            axes = tuple(a.ints)
    if form is not None and form >= 18:
        axes = ctx.axes_input(node.input[1], scope) if len(node.input) > 1 and node.input[1] else None
    else:
        noop = None
    out = node.output[0] if node.output else ""
    elem, in_shape = ctx.types.lookup(node.input[0], tscope) if node.input else (0, None)
    inferred = ctx.types.lookup(out, tscope)[1] if out else None
    declared = ctx.types.declared(out, dscope) if out else None
    expected, found = ctx.verdict((form, in_shape, axes, keepdims, noop, inferred, declared))
    if inferred is None and expected is not None and elem and not suffix:
        ctx.rule_only.append((scope, out, elem, list(expected)))
    location = scope.location + suffix
    for kind, reason in found:
        ctx.problems.append(ShapeProblem(node.name, node.op_type, location, expected, inferred,
                                         declared, reason, out, kind))
    if ctx.rows is not None:
        dtype = onnx.TensorProto.DataType.Name(elem).lower() if elem else None
        shown_axes = "dynamic" if axes is DYNAMIC_AXES else (None if axes is None else list(axes))
        ctx.rows.append(ReduceProdRow(node.name or f"#{i}", location, form, dtype, in_shape, shown_axes,
                                      keepdims, noop, expected, inferred, declared, out,
                                      "problem" if found else "ok"))


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
        if len(chain) > 1 and chain[0][0] in unit.delegated:
            continue  # an error inside a checked function body: its own unit names the call site
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


def _clear_declared(unit: _Unit, bodies: list, types: shape_infer.TypeIndex) -> None:
    """Forget the declared shapes of ReduceProd outputs (keeping their element type) in
    ``bodies``, the work model's bodies matching the unit's scopes."""
    for k, nodes in enumerate(unit.found):
        names = {n.output[0] for _, n in nodes
                 if n.output and types.declared(n.output[0], unit.declared_scopes[k]) is not None}
        if not names:
            continue
        body = bodies[k]
        fields = (body.value_info,) if isinstance(body, onnx.FunctionProto) else (body.output, body.value_info)
        for field in fields:
            for vi in field:
                if vi.name in names and vi.type.WhichOneof("value") == "tensor_type":
                    vi.type.tensor_type.ClearField("shape")


def _check_unit(unit: _Unit, inferred, errors: list[str], ctx: _Context) -> list[traversal.Scope]:
    """Check the unit's ReduceProd nodes against its inferred model; return the inferred scopes."""
    errs = _error_problems(errors, unit) if errors else []
    tscopes = shape_infer.mirror(unit.node_scopes, inferred) if inferred is not None else []
    first = len(ctx.rows) if ctx.rows is not None else 0
    for k, (scope, dscope) in enumerate(zip(unit.node_scopes, unit.declared_scopes)):
        tscope = tscopes[k] if tscopes else None
        form = reduce_prod_form(scope.opset)
        for i, node in unit.found[k]:
            _check_node(i, node, scope, tscope, dscope, ctx, unit.suffix, form)
    if ctx.rows is not None and errs:  # a strict-inference error about a ReduceProd marks its row
        named = {(p.location, p.output) for p in errs if p.output}
        for row in ctx.rows[first:]:
            if (row.location, row.output) in named:
                row.status = "problem"
    ctx.problems.extend(errs)
    return tscopes


def _check(model, want_rows: bool) -> _Context:
    proto = proto_of(model)[0]
    ctx = _Context(want_rows)
    main_opset = traversal.opset_version(proto.opset_import)
    scopes, found = shape_infer.walk(proto.graph, traversal.Scope(proto.graph, "main graph", None, main_opset))
    fn_scopes = _function_scopes(proto, main_opset)
    unit = _Unit(scopes, found, scopes, proto, delegated=frozenset(k[1] for k in fn_scopes))

    def use_light_copy() -> None:
        unit.work = shape_infer.light_copy(proto)
        _clear_declared(unit, [s.body for s in shape_infer.mirror(scopes, unit.work)], ctx.types)

    if any(t.ByteSize() > shape_infer.STRIP_BYTES for t in proto.graph.initializer):
        use_light_copy()
    # else inference runs on the model itself (it does not modify its argument); declared
    # ReduceProd shapes then take part, which only matters when strict mode fails:
    # data propagation (Shape -> Gather -> Reshape ...) serves the ReduceProd rule; without a
    # ReduceProd the check is ONNX's full check (strict, type-checked), which has none
    propagate = any(found)
    inferred, errors = shape_infer.infer(unit.work, data_prop=propagate)
    if errors and unit.work is proto and any(
            ctx.types.declared(n.output[0], scopes[k]) is not None
            for k, nodes in enumerate(found) for _, n in nodes if n.output):
        use_light_copy()  # again without them, for ONNX's own answer and the other errors
        inferred, errors = shape_infer.infer(unit.work, data_prop=propagate)
    tscopes = _check_unit(unit, inferred, errors, ctx)
    ctx.main_tscope = tscopes[0] if tscopes else None
    if ctx.rule_only:
        _check_with_rule_shapes(unit, errors, ctx)
    if fn_scopes:
        _check_functions(proto, scopes, tscopes, fn_scopes, ctx)
    logger.info("checked ReduceProd shapes: %d problem(s)", len(ctx.problems))
    return ctx


def _check_with_rule_shapes(unit: _Unit, errors: list[str], ctx: _Context) -> None:
    """Where ONNX could not infer a ReduceProd output (axes it cannot read, say) but the rule
    knows it, infer once more with that shape declared, so that what the rest of the graph
    declares is checked against it (an If output fed by a branch's ReduceProd, for one)."""
    work = onnx.ModelProto()
    work.CopyFrom(unit.work)
    position = {id(s): k for k, s in enumerate(unit.node_scopes)}
    bodies = [s.body for s in shape_infer.mirror(unit.node_scopes, work)]
    for scope, out, elem, shape in ctx.rule_only:
        body = bodies[position[id(scope)]]
        output = next((o for o in body.output if o.name == out), None)
        if output is not None:
            if not output.type.tensor_type.HasField("shape"):
                output.type.CopyFrom(onnx.helper.make_tensor_type_proto(elem, shape))
        else:
            body.value_info.append(onnx.helper.make_tensor_value_info(out, elem, shape))
    _, more = shape_infer.infer(work)
    known = set(errors)
    for problem in _error_problems([e for e in more if e not in known], unit):
        ctx.problems.append(dataclasses.replace(
            problem, reason=problem.reason + " (with the ReduceProd outputs ONNX could not infer "
            "taken from the rule)"))


def _function_scopes(proto, main_opset) -> dict[tuple, list[traversal.Scope]]:
    """(domain, name, overload) -> scopes of each model-local function holding a ReduceProd."""
    fn_scopes = {}
    for fn in proto.functions:
        opset = traversal.opset_version(fn.opset_import)
        fscope = traversal.Scope(fn, f"function '{fn.domain}:{fn.name}'", None,
                                 main_opset if opset is None else opset)
        fscopes, ffound = shape_infer.walk(fn, fscope)
        if any(ffound):
            fn_scopes[(fn.domain, fn.name, getattr(fn, "overload", ""))] = fscopes
    return fn_scopes


def _check_functions(proto, scopes, tscopes, fn_scopes, ctx: _Context) -> None:
    def type_of(name: str, k: int):
        entry = ctx.types.entry(name, tscopes[k]) if tscopes else None
        if isinstance(entry, onnx.TensorProto):
            return onnx.helper.make_tensor_type_proto(entry.data_type, list(entry.dims))
        return entry.type if entry is not None and entry.HasField("type") else None

    for key, mini, suffix, typed in shape_infer.function_contexts(proto, scopes, set(fn_scopes), type_of):
        originals = fn_scopes[key]
        top = traversal.Scope(mini.graph, originals[0].location, None, originals[0].opset)
        mscopes, mfound = shape_infer.walk(mini.graph, top)
        for m, o in zip(mscopes, originals):  # locations as in the user's model
            m.location = o.location
        unit = _Unit(mscopes, mfound, originals, mini, suffix, typed)
        _clear_declared(unit, [s.body for s in mscopes], ctx.types)
        inferred, errors = shape_infer.infer(mini, strict=typed)
        _check_unit(unit, inferred, errors, ctx)


def check_report(model) -> CheckReport:
    """Every ReduceProd's shapes (one row each; per call site in functions) and all problems.

    Accepts an ``onnx.ModelProto`` or an ``onnx_ir.Model``; never modifies it.
    """
    ctx = _check(model, want_rows=True)
    return CheckReport(ctx.rows, ctx.problems)


def verify_reduce_prod_shapes_with_ranks(model):
    """:func:`verify_reduce_prod_shapes`, and a function giving the rank ONNX's inference found
    for a main-graph value (None when unknown)."""
    ctx = _check(model, want_rows=False)
    return ctx.problems, ctx.main_rank


def verify_reduce_prod_shapes(model) -> list[ShapeProblem]:
    """Problems with ReduceProd output shapes or ONNX strict inference; empty when consistent.

    Accepts an ``onnx.ModelProto`` or an ``onnx_ir.Model``; never modifies it.
    """
    return _check(model, want_rows=False).problems


# the old names (they promised every shape; what is checked is each ReduceProd's, and inference)
verify_shapes = verify_reduce_prod_shapes
verify_shapes_with_ranks = verify_reduce_prod_shapes_with_ranks
