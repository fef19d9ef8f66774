"""Opset conversion: ReduceProd by rewriter's adapters, every other op by onnx.version_converter.

The conversion works on a copy of the model and fails as a whole: every ReduceProd
node is converted first (the cheap part, and where most impossible conversions are
found), then the rest of the model is delegated to ``onnx.version_converter`` with
the ReduceProd nodes held out of its reach in a private domain, then the result is
validated with the ONNX checker and strict shape inference. The input is never mutated.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter import adapters, compat, traversal
from rewriter.errors import ConversionError, RewriterError

__all__ = ["convert_opset", "convert_model", "ConvertOpsetPass", "ConvertReport"]

logger = logging.getLogger(__name__)

_HOLD_DOMAIN = "ai.rewriter.held"
_DEFAULT = ("", "ai.onnx")


@dataclasses.dataclass
class ConvertReport:
    """What a conversion did."""

    source_opset: int
    target_opset: int
    reduce_prod_nodes: int = 0
    changes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    delegated: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    type_only: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    version_converter_called: bool = False

    def summary_lines(self) -> list[str]:
        lines = [f"ReduceProd nodes: {self.reduce_prod_nodes}"]
        lines += [f"  {kind}: {n}" for kind, n in sorted(self.changes.items())]
        if self.type_only:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.type_only.items()))
            lines.append(f"other ops with type-only schema changes (kept as they are): {ops}")
        if self.delegated:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.delegated.items()))
            lines.append(f"other ops converted by onnx.version_converter: {ops}")
        else:
            lines.append("onnx.version_converter not needed")
        return lines


class _State:
    """What the adapters of one conversion share: the model copy, shape info, new names."""

    def __init__(self, model: onnx.ModelProto, original: onnx.ModelProto, base_dir, report):
        self.model = model
        self.original = original
        self.base_dir = base_dir
        self.report = report
        self._types: dict[str, onnx.TypeProto] | None = None
        self._inferred: onnx.ModelProto | None = None
        self._function_types: dict[tuple[str, str], dict[str, onnx.TypeProto]] = {}
        self._names: set[str] | None = None
        self.scopes = list(traversal.iter_scopes(model))  # walked once: the walk costs on big graphs
        self.function_constants: dict[int, int] = collections.defaultdict(int)  # inserted so far
        self.constants: dict[tuple, str] = {}
        # Nodes already in target form, kept out of onnx.version_converter's reach.
        self.held: list[onnx.NodeProto] = []
        self.maybe_unused: list[tuple[str, traversal.Scope]] = []

    def types(self) -> dict[str, onnx.TypeProto]:
        """Value types in the original model's graphs after (lenient) shape inference, by name."""
        if self._types is None:
            self._inferred = _infer(self.original)
            types: dict[str, onnx.TypeProto] = {}
            for scope in traversal.iter_scopes(self._inferred):
                if not scope.is_function:
                    _collect_types(scope.body, types)
            self._types = types
        return self._types

    def types_for(self, scope: traversal.Scope) -> dict[str, onnx.TypeProto]:
        """Types as seen from ``scope``: the graphs' own, or a function body's at its call sites."""
        root = scope
        while root.parent is not None:
            root = root.parent
        if not root.is_function:
            return self.types()
        key = (root.body.domain, root.body.name)
        if key not in self._function_types:
            self._function_types[key] = self._infer_function(root.body)
        return self._function_types[key]

    def _infer_function(self, fn: onnx.FunctionProto) -> dict[str, onnx.TypeProto]:
        """Infer a function body at each call site in the graphs; keep what every call agrees on."""
        graph_types = self.types()
        agreed: dict[str, onnx.TypeProto] | None = None
        for scope in traversal.iter_scopes(self._inferred):
            if scope.is_function:
                continue
            for call in scope.body.node:
                if call.op_type != fn.name or call.domain != fn.domain:
                    continue
                inputs = [onnx.helper.make_value_info(formal, graph_types[actual])
                          for formal, actual in zip(fn.input, call.input) if actual in graph_types]
                if len(inputs) != len(fn.input):
                    return {}
                body = onnx.helper.make_graph(list(fn.node), fn.name, inputs,
                                              [onnx.helper.make_empty_tensor_value_info(o) for o in fn.output])
                shell = onnx.helper.make_model(body, opset_imports=list(self.original.opset_import),
                                               functions=list(self.original.functions))
                shell.ir_version = self.original.ir_version
                found: dict[str, onnx.TypeProto] = {}
                _collect_types(_infer(shell).graph, found)
                if agreed is None:
                    agreed = found
                else:
                    merged = {k: _common_type(v, found.get(k)) for k, v in agreed.items()}
                    agreed = {k: v for k, v in merged.items() if v is not None}
        return agreed or {}

    def fresh_name(self, hint: str) -> str:
        if self._names is None:
            names = set()  # every defined name: node outputs, graph inputs, initializers
            for scope in self.scopes:
                for n in scope.body.node:
                    names.update(n.output)
                if scope.is_function:
                    names.update(scope.body.input)
                else:
                    names.update(t.name for t in scope.body.initializer)
                    names.update(v.name for v in scope.body.input)
            self._names = names
        name, i = hint, 0
        while name in self._names:
            i += 1
            name = f"{hint}_{i}"
        self._names.add(name)
        return name


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception as e:  # inference failures only cost us information here
        logger.info("shape inference failed: %s", e)
        return model


def _common_type(a: onnx.TypeProto, b: onnx.TypeProto | None) -> onnx.TypeProto | None:
    """What two call sites agree on: the element type and, when it matches, the rank."""
    if b is None or a.tensor_type.elem_type != b.tensor_type.elem_type:
        return None
    if a == b:
        return a
    ta, tb = a.tensor_type, b.tensor_type
    if ta.HasField("shape") and tb.HasField("shape") and len(ta.shape.dim) == len(tb.shape.dim):
        return onnx.helper.make_tensor_type_proto(ta.elem_type, [None] * len(ta.shape.dim))
    return onnx.helper.make_tensor_type_proto(ta.elem_type, None)


def _collect_types(graph: onnx.GraphProto, types: dict[str, onnx.TypeProto]) -> None:
    for t in graph.initializer:
        types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.type.HasField("tensor_type"):
            types.setdefault(vi.name, vi.type)


class NodeContext:
    """The view of the conversion that an adapter gets for one node."""

    def __init__(self, state: _State, node: onnx.NodeProto, scope: traversal.Scope):
        self._state, self._node, self.scope = state, node, scope
        self.label = traversal.node_label(node, scope)

    def constant(self, name: str) -> np.ndarray | None:
        return traversal.constant_value(name, self.scope, self._state.base_dir)

    def rank(self, name: str) -> int | None:
        t = self._state.types_for(self.scope).get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            return None
        return len(t.tensor_type.shape.dim)

    def elem_type(self, name: str) -> int | None:
        t = self._state.types_for(self.scope).get(name)
        return t.tensor_type.elem_type if t is not None else None

    def add_constant(self, hint: str, value: np.ndarray) -> str:
        """A constant visible to the node: an initializer in a graph, a Constant node in a function.

        Nodes of one graph or function that need the same value share one constant.
        """
        key = (id(self.scope.body), value.dtype.str, value.shape, value.tobytes())
        if key in self._state.constants:
            return self._state.constants[key]
        name = self._state.constants[key] = self._state.fresh_name(hint)
        tensor = numpy_helper.from_array(value, name)
        if self.scope.is_function:
            fn = self.scope.body
            fn.node.insert(self._state.function_constants[id(fn)], onnx.helper.make_node(
                "Constant", [], [name], value=tensor))
            self._state.held.append(fn.node[self._state.function_constants[id(fn)]])
            self._state.function_constants[id(fn)] += 1
        else:
            self.scope.body.initializer.append(tensor)
        return name

    def to_identity(self, node: onnx.NodeProto) -> None:
        data = node.input[0]
        del node.input[:]
        node.input.append(data)
        del node.attribute[:]
        node.op_type = "Identity"

    def maybe_unused(self, name: str) -> None:
        self._state.maybe_unused.append((name, self.scope))

    def record(self, kind: str) -> None:
        self._state.report.changes[kind] += 1


def _op_exists(op_type: str, opset: int) -> bool:
    try:
        adapters.schema_version_at(op_type, opset)
        return True
    except ConversionError:
        return False


_SCHEMA_CACHE: dict[tuple[str, int], int | None] = {}


def _since(op_type: str, opset: int) -> int | None:
    key = (op_type, opset)
    if key not in _SCHEMA_CACHE:
        try:
            _SCHEMA_CACHE[key] = onnx.defs.get_schema(op_type, opset, "").since_version
        except onnx.defs.SchemaError:
            _SCHEMA_CACHE[key] = None
    return _SCHEMA_CACHE[key]


def _plan_other_ops(state: _State, target: int):
    """Sort the non-ReduceProd default-domain ops whose schema differs at ``target``.

    Type-only steps (see ``compat``) are taken here: those nodes are held out of the
    version converter's reach like ReduceProd. The rest is delegated to the converter.
    Raises when an op does not exist at the target opset.
    """
    model = state.model
    report = state.report
    type_only: list[onnx.NodeProto] = []
    delegated: set[int] = set()
    keep_alive = []  # ids identify protobuf wrappers only while they are alive
    in_graph, in_functions = collections.Counter(), collections.Counter()
    ours = {id(n) for n in state.held}
    for scope in state.scopes:
        counter = in_functions if _function_root(scope) else in_graph
        for node in scope.body.node:
            if node.domain not in _DEFAULT or id(node) in ours:
                continue
            source_opset = scope.opset or target
            source = _since(node.op_type, source_opset)
            dest = _since(node.op_type, target)
            if dest is None:
                raise ConversionError(
                    f"{traversal.node_label(node, scope)}: operator {node.op_type} does not exist "
                    f"at opset {target}"
                )
            if source == dest:
                continue
            if compat.type_only_path(node, source_opset, target) or \
                    compat.type_only_path(node, source_opset, target, state.types_for(scope).get):
                type_only.append(node)
            else:
                _refuse_known_converter_defects(node, scope, source_opset, target, state)
                delegated.add(id(node))
                keep_alive.append(node)
                counter[node.op_type] += 1
    # A control-flow node is only kept as it is when nothing inside it needs the converter.
    for node in type_only:
        if node.op_type in ("If", "Loop") and any(id(n) in delegated for n in _subgraph_nodes(node)):
            delegated.add(id(node))
            in_graph[node.op_type] += 1
    for node in type_only:
        if id(node) not in delegated:
            state.held.append(node)
            report.type_only[node.op_type] += 1
    return in_graph, in_functions


_SOFTMAX_LIKE = {"Softmax": (12, 13), "LogSoftmax": (12, 13), "Hardmax": (12, 13)}


def _refuse_known_converter_defects(node, scope, source_opset, target, state) -> None:
    """Refuse steps where onnx.version_converter is known to return a model computing something else.

    Softmax, LogSoftmax and Hardmax changed what ``axis`` means at 13 (one axis instead of
    "flatten from axis"); the converter keeps ``axis`` as it is, which is only right when it
    is the last dimension (checked against ONNX Runtime in tests/test_compat.py).
    """
    boundary = _SOFTMAX_LIKE.get(node.op_type)
    if boundary is None or not min(source_opset, target) <= boundary[0] < boundary[1] <= max(source_opset, target):
        return
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1 if source_opset < 13 else -1)
    t = state.types_for(scope).get(node.input[0])
    rank = len(t.tensor_type.shape.dim) if t is not None and t.tensor_type.HasField("shape") else None
    if rank is None or axis not in (rank - 1, -1):
        raise ConversionError(
            f"{traversal.node_label(node, scope)}: {node.op_type} with axis={axis} "
            f"{'(rank unknown)' if rank is None else f'on rank {rank}'} cannot be converted across "
            f"opset 13, where the meaning of axis changed; onnx.version_converter would keep the "
            f"axis and compute something else (only the last axis converts)"
        )


def _subgraph_nodes(node: onnx.NodeProto):
    for attr in node.attribute:
        for g in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            yield from _all_nodes(g)


def _function_root(scope: traversal.Scope) -> bool:
    while scope.parent is not None:
        scope = scope.parent
    return scope.is_function


def _run_version_converter(model: onnx.ModelProto, target: int, what: str) -> onnx.ModelProto:
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, target)
    except Exception as e:  # the C++ converter raises RuntimeError/ValidationError with a message
        message = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        match = re.search(r"(?:for|of) (\w+)", message)
        op = f"operator {match.group(1)}" if match else "an operator"
        source = traversal.opset_version(model.opset_import)
        raise ConversionError(
            f"{what}: onnx.version_converter cannot convert {op} from opset {source} to {target}: "
            f"{message.split('failed: ')[-1]}"
        ) from None


def _release(graph_like) -> None:
    for node in _all_nodes(graph_like):
        if node.domain == _HOLD_DOMAIN:
            node.domain = ""


def _all_nodes(graph_like):
    for node in graph_like.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_nodes(g)


def _convert_main_graph(result: onnx.ModelProto, target: int) -> None:
    shell = onnx.ModelProto(ir_version=result.ir_version, graph=result.graph)
    shell.opset_import.extend(result.opset_import)
    shell.opset_import.add(domain=_HOLD_DOMAIN, version=1)
    converted = _run_version_converter(shell, target, "main graph")
    result.graph.CopyFrom(converted.graph)


def _convert_function(result: onnx.ModelProto, fn: onnx.FunctionProto, target: int) -> None:
    """Run the version converter on a function body wrapped in a temporary model."""
    graph = onnx.helper.make_graph(
        list(fn.node), f"{fn.name}_body",
        [onnx.helper.make_empty_tensor_value_info(i) for i in fn.input],
        [onnx.helper.make_empty_tensor_value_info(o) for o in fn.output],
    )
    shell = onnx.helper.make_model(graph, opset_imports=[*fn.opset_import,
                                   onnx.helper.make_opsetid(_HOLD_DOMAIN, 1)])
    shell.ir_version = result.ir_version
    converted = _run_version_converter(shell, target, f"function '{fn.domain}:{fn.name}'")
    del fn.node[:]
    fn.node.extend(converted.graph.node)


def _remove_unused(state: _State) -> None:
    if not state.maybe_unused:
        return
    used = set()
    for scope in state.scopes:
        for n in scope.body.node:
            used.update(n.input)
        if scope.is_function:
            used.update(scope.body.output)
        else:
            used.update(v.name for v in scope.body.output)
    for name, scope in state.maybe_unused:
        if name in used:
            continue
        s = scope
        while s is not None:
            s.invalidate()
            producer = s.producers().get(name)
            if producer is not None:
                s.body.node.remove(producer)
                s.invalidate()
                break
            for i, t in enumerate([] if s.is_function else s.body.initializer):
                if t.name == name:
                    del s.body.initializer[i]
                    break
            else:
                s = s.parent
                continue
            break
        used.add(name)  # removed once; a second reference to the same name is a no-op


def _set_opset(opset_import, version: int) -> None:
    for entry in opset_import:
        if entry.domain in _DEFAULT:
            entry.version = version


def convert_model(
    model: onnx.ModelProto, target_opset: int, *, base_dir: str | None = None
) -> tuple[onnx.ModelProto, ConvertReport]:
    """Convert ``model`` to ``target_opset``; returns the new model and a report.

    Raises ConversionError naming the node when any part cannot be converted.
    """
    latest = onnx.defs.onnx_opset_version()
    if not 1 <= target_opset <= latest:
        raise RewriterError(f"target opset must be in 1..{latest}, got {target_opset}")
    source = traversal.opset_version(model.opset_import)
    if source is None:
        raise ConversionError("the model does not import the default ONNX domain: nothing to convert")
    result = onnx.ModelProto()
    result.CopyFrom(model)
    report = ConvertReport(source, target_opset)
    state = _State(result, model, base_dir, report)

    reduce_prods = [(n, scope) for scope in state.scopes for n in scope.body.node
                    if n.op_type == "ReduceProd" and n.domain in _DEFAULT]
    for node, scope in reduce_prods:
        report.reduce_prod_nodes += 1
        ctx = NodeContext(state, node, scope)
        # A node that became an Identity still goes through the remaining (downward) steps:
        # their type checks apply to it too, and it has no axes for them to touch.
        for adapter, _from, _to in adapters.adapter_path("ReduceProd", scope.opset or source, target_opset):
            adapter(node, ctx)
        if node.op_type == "ReduceProd" or node.op_type == "Identity":
            state.held.append(node)
    _remove_unused(state)

    in_graph, in_functions = _plan_other_ops(state, target_opset)
    report.delegated = in_graph + in_functions
    if in_graph or in_functions:
        # Nodes already in target form go to a private domain the converter leaves alone.
        report.version_converter_called = True
        for node in state.held:
            node.domain = _HOLD_DOMAIN
        if in_graph:
            _convert_main_graph(result, target_opset)
        for fn in result.functions:
            if any(n.domain in _DEFAULT for n in fn.node):
                _convert_function(result, fn, target_opset)
        for body in [result.graph, *result.functions]:
            _release(body)
    for fn in result.functions:
        _set_opset(fn.opset_import, target_opset)
    _set_opset(result.opset_import, target_opset)
    required_ir = onnx.helper.find_min_ir_version_for(list(result.opset_import), ignore_unknown=True)
    result.ir_version = max(result.ir_version, required_ir)
    _validate(result, model)
    return result, report


def _validate(result: onnx.ModelProto, original: onnx.ModelProto) -> None:
    """The checker with full_check (strict shape inference included) must accept the result.

    When the input itself already fails strict inference, that problem is the input's, not
    the conversion's: the result then only has to pass the structural checker, and the
    shape verification around rewrites reports the inherited problem as a warning.
    """
    try:
        onnx.checker.check_model(result, full_check=True)
        return
    except Exception as e:
        error = " ".join(str(e).split())
    try:
        onnx.checker.check_model(original, full_check=True)
    except Exception:
        try:
            onnx.checker.check_model(result)
        except Exception as e:
            error = " ".join(str(e).split())
        else:
            logger.warning("the input already fails strict shape inference; the result is checked "
                           "structurally only")
            return
    raise ConversionError(f"the converted model is not valid: {error}")


def convert_opset(model, target_opset: int):
    """Convert a ModelProto or onnx_ir.Model to ``target_opset``; returns the same kind."""
    return _convert_any(model, target_opset)[0]


def _convert_any(model, target_opset: int):
    if isinstance(model, onnx.ModelProto):
        return convert_model(model, target_opset)
    import onnx_ir as ir

    result, report = convert_model(ir.to_proto(model), target_opset)
    return ir.from_proto(result), report


def _make_pass():
    import onnx_ir as ir

    class ConvertOpsetPass(ir.passes.FunctionalPass):
        """Convert a model's default-domain opset (ReduceProd by rewriter's adapters)."""

        def __init__(self, target_opset: int):
            super().__init__()
            self.target_opset = target_opset

        def call(self, model: ir.Model) -> ir.passes.PassResult:
            result, report = _convert_any(model, self.target_opset)
            modified = report.source_opset != report.target_opset or bool(report.changes)
            return ir.passes.PassResult(result, modified=modified)

    return ConvertOpsetPass


def __getattr__(name):
    if name == "ConvertOpsetPass":
        cls = _make_pass()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
