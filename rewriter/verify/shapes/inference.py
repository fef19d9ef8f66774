"""ONNX shape inference as the shape check needs it.

- :func:`light_copy`: a copy of a model for inference whose big initializers keep their
  name, type and dims but not their data (shape inference never reads them: only small
  integer tensors such as axes or shapes are read, and those stay).
- :func:`infer`: strict, type-checked inference with data propagation; when strict mode
  fails, the error lines and a lenient inference so that shapes are still known.
- :func:`error_lines_to_problems` data: each error line names a node ``(op_type, name)``.
- :func:`function_contexts`: a model-local function's body as a small model whose inputs
  have the types seen at one call site, for each distinct call site.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator

import onnx

from rewriter.graph import traversal
from rewriter.graph.schemas import DEFAULT_DOMAINS, is_default_domain

__all__ = ["light_copy", "infer", "parse_error_line", "function_contexts", "TypeIndex",
           "type_info", "walk", "mirror", "STRIP_BYTES"]

logger = logging.getLogger(__name__)

STRIP_BYTES = 1024
_ERROR_HEAD = re.compile(r"\(op_type:([^,)]*)(?:, node name: ([^)]*))?\):\s*")


def light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose main-graph initializers over 1 KiB have no data."""
    copy = onnx.ModelProto()
    for fd, value in model.ListFields():
        if fd.name != "graph":
            _set_field(copy, fd, value)
    for fd, value in model.graph.ListFields():
        if fd.name != "initializer":
            _set_field(copy.graph, fd, value)
    for t in model.graph.initializer:
        if t.ByteSize() > STRIP_BYTES:
            copy.graph.initializer.append(
                onnx.TensorProto(name=t.name, data_type=t.data_type, dims=t.dims))
        else:
            copy.graph.initializer.append(t)
    return copy


def _set_field(msg, fd, value) -> None:
    if fd.is_repeated:
        getattr(msg, fd.name).extend(value)
    elif fd.message_type is not None:
        getattr(msg, fd.name).CopyFrom(value)
    else:
        setattr(msg, fd.name, value)


def infer(work: onnx.ModelProto, strict: bool = True, data_prop: bool = True
          ) -> tuple[onnx.ModelProto | None, list[str]]:
    """The inferred model and the strict-mode error lines (empty when strict inference passed)."""
    kwargs = dict(check_type=True, data_prop=data_prop)
    errors: list[str] = []
    if strict:
        try:
            return onnx.shape_inference.infer_shapes(work, strict_mode=True, **kwargs), []
        except Exception as e:  # noqa: BLE001 - InferenceError, ValidationError, a too-big model...
            text = str(e) or type(e).__name__
        lines = [ln.strip() for ln in text.splitlines()]
        errors = [ln for ln in lines if _ERROR_HEAD.search(ln)] or [" ".join(text.split())]
    try:
        return onnx.shape_inference.infer_shapes(work, strict_mode=False, **kwargs), errors
    except Exception as e:  # noqa: BLE001 - the lenient run failing too leaves shapes unknown
        logger.info("lenient shape inference failed: %s", e)
        if not strict:
            return None, []
        return None, errors or [" ".join(str(e).split())]


def parse_error_line(line: str) -> list[tuple[str, str]] | None:
    """The nodes an error line names, outermost first, as (op_type, name or ''), and the
    reason given for the innermost; None when the line names no node."""
    heads = list(_ERROR_HEAD.finditer(line))
    if not heads:
        return None
    chain = [(h.group(1), h.group(2) or "") for h in heads]
    return chain, line[heads[-1].end():].strip()


# ---------------------------------------------------------------- reading types

def _shape_of_type(tp: onnx.TypeProto, inferred: bool) -> tuple | None:
    if tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
        return None
    dims = []
    for d in tp.tensor_type.shape.dim:
        which = d.WhichOneof("value")
        if which == "dim_value":
            dims.append(d.dim_value)
        elif which == "dim_param" and not (inferred and d.dim_param.startswith("unk__")):
            dims.append(d.dim_param)  # unk__N: a name inference made up for an unknown dim
        else:
            dims.append(None)
    return tuple(dims)


def type_info(entry, inferred: bool = True) -> tuple[int, tuple | None]:
    """(elem_type, shape) of a ValueInfoProto or an initializer TensorProto."""
    if isinstance(entry, onnx.TensorProto):
        return entry.data_type, tuple(entry.dims)
    tp = entry.type
    elem = tp.tensor_type.elem_type if tp.WhichOneof("value") == "tensor_type" else 0
    return elem, _shape_of_type(tp, inferred)


def _index(scope: traversal.Scope, *fields: str) -> dict:
    """A scope's value_info by name, with ``fields`` of a graph (initializer, input, output) over
    it; a function has value_info only."""
    idx = {vi.name: vi for vi in scope.body.value_info}
    if not scope.is_function:
        for field in fields:
            idx.update({entry.name: entry for entry in getattr(scope.body, field)})
    return idx


class TypeIndex:
    """Types by name as seen from a scope: one dict per scope built on first use, and one
    parse per distinct TypeProto."""

    def __init__(self):
        self._types: dict[int, dict] = {}
        self._declared: dict[int, dict] = {}
        self._parsed: dict[tuple[bool, bytes], tuple] = {}

    def _of(self, scope: traversal.Scope) -> dict:
        idx = self._types.get(id(scope))
        if idx is None:
            idx = self._types[id(scope)] = _index(scope, "initializer", "input", "output")
        return idx

    def _parse(self, entry, inferred: bool) -> tuple[int, tuple | None]:
        if isinstance(entry, onnx.TensorProto):
            return entry.data_type, tuple(entry.dims)
        key = (inferred, entry.type.SerializeToString())
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = self._parsed[key] = type_info(entry, inferred)
        return parsed

    def entry(self, name: str, scope: traversal.Scope | None):
        """The ValueInfoProto or initializer for ``name`` in ``scope`` or an enclosing one."""
        while scope is not None:
            idx = self._types.get(id(scope))
            entry = (idx if idx is not None else self._of(scope)).get(name)
            if entry is not None:
                return entry
            scope = scope.parent
        return None

    def lookup(self, name: str, scope: traversal.Scope | None) -> tuple[int, tuple | None]:
        """(elem_type, shape) of ``name``; (0, None) when unknown."""
        entry = self.entry(name, scope)
        return (0, None) if entry is None else self._parse(entry, True)

    def declared(self, name: str, scope: traversal.Scope) -> tuple | None:
        """The shape declared for ``name`` by this scope's outputs or value_info, if any."""
        idx = self._declared.get(id(scope))
        if idx is None:
            idx = self._declared[id(scope)] = _index(scope, "output")
        entry = idx.get(name)
        return None if entry is None else self._parse(entry, False)[1]


# ---------------------------------------------------------------- scopes

from rewriter.graph.attribute_refs import bind_attribute_refs  # noqa: E402


def _walk(body, scope: traversal.Scope, scopes: list, found: list) -> None:
    reduce_prods, parents = [], []
    holders = traversal.ops_with(traversal.GRAPH_KINDS)
    for i, node in enumerate(body.node):
        op, domain = node.op_type, node.domain
        if domain in DEFAULT_DOMAINS:
            if op == "ReduceProd":
                reduce_prods.append((i, node))
            elif op in holders:
                parents.append(node)
        else:  # a custom-domain node may hold graphs
            parents.append(node)
    scopes.append(scope)
    found.append(reduce_prods)
    for node in parents:
        for attr in node.attribute:
            graphs = traversal.attribute_graphs(attr)
            for j, g in enumerate(graphs):
                which = attr.name if len(graphs) == 1 else f"{attr.name}[{j}]"
                child = traversal.Scope(g, f"{which} of {traversal.node_label(node, scope)}", scope, scope.opset)
                _walk(g, child, scopes, found)


def walk(body, scope: traversal.Scope) -> tuple[list[traversal.Scope], list[list]]:
    """``scope`` and its nested subgraph scopes (parents first, as traversal.iter_scopes), and
    for each the ReduceProd nodes it holds with their positions. One pass over the nodes."""
    scopes, found = [], []
    _walk(body, scope, scopes, found)
    return scopes, found


def mirror(scopes: list[traversal.Scope], model: onnx.ModelProto) -> list[traversal.Scope]:
    """The scopes of ``model``'s main graph matching ``scopes`` (a model of the same structure);
    locations are taken from ``scopes``."""
    top = traversal.Scope(model.graph, scopes[0].location, None, scopes[0].opset)
    if len(scopes) == 1:  # no subgraph: no need to walk the nodes again
        return [top]
    mine, _ = walk(model.graph, top)
    for m, s in zip(mine, scopes):
        m.location = s.location
    return mine


# ---------------------------------------------------------------- functions at call sites

def _mini_model(model, fn, call, types) -> onnx.ModelProto:
    g = onnx.GraphProto(name=f"{fn.name}_at_call_site")
    for i, name in enumerate(fn.input):
        vi = g.input.add()
        vi.name = name
        if i < len(types) and types[i] is not None:
            vi.type.CopyFrom(types[i])
    bound = {a.name: a for a in fn.attribute_proto}
    if call is not None:
        bound.update((a.name, a) for a in call.attribute)
    for n in fn.node:
        c = g.node.add()
        c.CopyFrom(n)
        bind_attribute_refs(c, bound)
    for name in fn.output:
        g.output.add().name = name
    opsets = {("" if is_default_domain(o.domain) else o.domain): o.version for o in model.opset_import}
    opsets.update((("" if is_default_domain(o.domain) else o.domain), o.version) for o in fn.opset_import)
    mini = onnx.ModelProto(ir_version=model.ir_version, graph=g)
    for domain, version in opsets.items():
        mini.opset_import.add(domain=domain, version=version)
    mini.functions.extend(model.functions)
    return mini


def function_contexts(
    model: onnx.ModelProto,
    graph_scopes: list[traversal.Scope],
    wanted: set[tuple[str, str, str]],
    type_of: Callable[[str, int], onnx.TypeProto | None],
) -> Iterator[tuple[tuple[str, str, str], onnx.ModelProto, str, bool]]:
    """For each function in ``wanted`` ((domain, name, overload)) and each distinct call site
    in a graph: (key, body as a model typed at that site, location suffix, fully typed).

    ``type_of(name, k)`` is the type of ``name`` seen from ``graph_scopes[k]``. A function
    without call sites in graphs is yielded once, untyped.
    """
    calls: dict[tuple, list] = {key: [] for key in wanted}
    for k, scope in enumerate(graph_scopes):
        for node in scope.body.node:
            key = (node.domain, node.op_type, getattr(node, "overload", ""))
            if key in calls:
                calls[key].append((node, k))
    functions = {(f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions}
    for key in sorted(wanted):
        fn = functions[key]
        seen = set()
        for node, k in calls[key]:
            types = [type_of(name, k) if name else None for name in node.input[: len(fn.input)]]
            sig = (tuple(t.SerializeToString() if t is not None else b"" for t in types),
                   tuple(a.SerializeToString() for a in node.attribute))
            if sig in seen:
                continue
            seen.add(sig)
            typed = len(types) == len(fn.input) and all(t is not None for t in types)
            suffix = f" (called by {traversal.node_label(node, graph_scopes[k])})"
            yield key, _mini_model(model, fn, node, types), suffix, typed
        if not calls[key]:
            yield key, _mini_model(model, fn, None, []), "", False
