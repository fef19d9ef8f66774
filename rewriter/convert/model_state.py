"""What the adapters of one conversion share.

``ConversionState`` holds the model copy, the scopes (walked once), the types from shape
inference (computed only when an adapter asks, and for function bodies at their call
sites), fresh names and the constants added so far. What an adapter sees of it for one
node is a :class:`rewriter.convert.context.NodeContext`.
"""

from __future__ import annotations

import collections
import logging

import onnx

from rewriter.graph import traversal
from rewriter.graph.inferred import inferred_model
from rewriter.graph.names import fresh_name as _fresh
from rewriter.graph.schemas import schema_at
from rewriter.io import tensor_reader

__all__ = ["ConversionState"]

logger = logging.getLogger(__name__)


class ConversionState:
    """What the adapters of one conversion share: the model copy, shape info, new names."""

    def __init__(self, model: onnx.ModelProto, original: onnx.ModelProto, base_dir, report, inferred=None):
        self.model = model
        self.original = original
        self.base_dir = base_dir
        self.read_tensor = tensor_reader(base_dir)
        self.report = report
        self._names: set[str] | None = None
        self._node_names: set[str] | None = None
        self._chains: dict[int, collections.ChainMap] = {}
        # nodes made by the conversion and not yet in their body, by the values they produce
        self.pending: dict[str, onnx.NodeProto] = {}
        self.added_values: dict[str, object] = {}  # constants added by adapters, by name
        self.scopes = list(traversal.iter_scopes(model))  # walked once: the walk costs on big graphs
        self._original_scopes = len(self.scopes)
        self.original_scope_count = self._original_scopes  # more once expansions register scopes
        self._index = {id(s): i for i, s in enumerate(self.scopes)}
        # for each scope, the index of the function body it lies in (None in the graphs)
        self._roots: list[int | None] = []
        for s in self.scopes:
            self._roots.append(self._index[id(s.root)] if s.root.is_function else None)
        self._types: list[dict[str, onnx.TypeProto] | None] | None = None  # per scope, lazily
        self._inferred: onnx.ModelProto | None = inferred  # the original after shape inference
        self._inferring: set[int] = set()
        self._early: dict[int, dict[str, onnx.TypeProto]] = {}  # scope index -> types added before inference
        self.function_constants: dict[int, int] = collections.defaultdict(int)  # inserted so far
        self.constants: dict[tuple, str] = {}
        self.small_constants: dict[tuple[int, str], object] = {}  # (id(body), name) -> value read
        # Nodes already in target form, kept out of onnx.version_converter's reach.
        self.held: list[onnx.NodeProto] = []
        self.maybe_unused: list[tuple[str, traversal.Scope]] = []
        self._learned: bool | None = None  # types asked of onnxruntime: None = not yet
        self.unlearned: str | None = None  # why onnxruntime could not say, when it was asked

    def learn_types(self, scope: traversal.Scope) -> bool:
        """Ask ONNX Runtime (``rewriter.convert.ort_types``), once, the element types of the
        main graph's values ONNX's inference left untyped, when the graph has ``com.microsoft``
        nodes (only ONNX Runtime knows those ops). True when it answered; the report says so, and
        ``unlearned`` says why when it could not."""
        if self._learned is not None or scope.root is not self.scopes[0]:  # function bodies: not asked
            return bool(self._learned) and scope.root is self.scopes[0]
        from rewriter.convert import ort_types

        self._learned = False
        if not ort_types.makes_ort_values(self.original.graph):
            return False
        types = self._scope_types(0)
        untyped = [o for n in self.original.graph.node for o in n.output if o and o not in types]
        if not untyped:
            return False
        found, how = ort_types.onnxruntime_types(self.original, untyped)
        if found is None:
            self.unlearned = how
            return False
        for name, elem in found.items():
            types.setdefault(name, onnx.helper.make_tensor_type_proto(elem, None))
        self._learned = True
        self.report.notes.append(f"types of {len(found)} value(s) made by com.microsoft ops, which ONNX's inference "
                                 f"does not know, from {how}")
        return True

    def types_for(self, scope: traversal.Scope) -> collections.ChainMap:
        """Value types as seen from ``scope`` (its own, then its enclosing scopes'), from
        (lenient) shape inference of the original model; a function body is inferred at
        its call sites, keeping what every call agrees on."""
        index = self._index[id(scope)]
        found = self._chains.get(index)
        if found is None:  # a ChainMap is a live view: types added later show through
            chain = []
            s: traversal.Scope | None = scope
            while s is not None:
                chain.append(self._scope_types(self._index[id(s)]))
                s = s.parent
            found = self._chains[index] = collections.ChainMap(*chain)
        return found

    def _scope_types(self, index: int) -> dict[str, onnx.TypeProto]:
        if self._types is None:
            if not isinstance(self._inferred, onnx.ModelProto):  # None, or a LazyInference
                self._inferred = inferred_model(self._inferred, self.original) or self.original
            inferred = list(traversal.iter_scopes(self._inferred))
            if len(inferred) != self._original_scopes:  # inference changed the structure: know nothing
                inferred = [None] * len(self.scopes)
            inferred += [None] * (len(self.scopes) - len(inferred))  # scopes registered since
            self._types = [None] * len(self.scopes)
            for i, s in enumerate(inferred):
                if s is not None and self._roots[i] is None:  # graphs; function bodies on demand
                    self._types[i] = {}
                    _collect_types(s.body, self._types[i])
                    _schema_types(s.body, self._types[i], self.original.opset_import)
            for i, s in enumerate(inferred):  # subgraphs ONNX's inference did not look into
                if s is not None and self._roots[i] is None and s.parent is not None and \
                        any(o and o not in self._types[i] for n in s.body.node for o in n.output):
                    self._infer_subgraph(i, s.body)
        if self._types[index] is None:
            root = self._roots[index]
            found = None
            if root is not None and root not in self._inferring:
                found = self._infer_function(root)
            for offset, types in enumerate(found or []):
                self._types[root + offset] = types
            if self._types[index] is None:
                self._types[index] = {}
        early = self._early.pop(index, None)  # recorded before types were first asked for
        if early:
            own = self._types[index]
            for name, t in early.items():
                own.setdefault(name, t)
        return self._types[index]

    def _infer_subgraph(self, index: int, graph: onnx.GraphProto) -> None:
        """Types inside a subgraph that ONNX's inference of the model left untyped (the graph
        attribute of an op whose inference does not look inside, such as the score_mod of
        ai.onnx.preview's FlexAttention): the subgraph inferred on its own, its declared inputs and the types of the
        outer values it reads as inputs. Nothing when some outer value's type is unknown."""
        outer: dict[str, onnx.TypeProto] = {}
        s = self.scopes[index].parent
        while s is not None:
            for name, t in (self._types[self._index[id(s)]] or {}).items():
                outer.setdefault(name, t)
            s = s.parent
        defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
        defined |= {o for n in graph.node for o in n.output}
        free = {i for n in traversal.all_nodes(graph) for i in n.input if i} - defined
        free -= {o for n in traversal.all_nodes(graph) for o in n.output}  # defined in nested subgraphs
        if any(name not in outer for name in free) or any(not v.type.WhichOneof("value") for v in graph.input):
            return
        body = onnx.GraphProto()
        body.CopyFrom(graph)
        body.input.extend(onnx.helper.make_value_info(name, outer[name]) for name in sorted(free))
        shell = onnx.helper.make_model(body, opset_imports=list(self.original.opset_import),
                                       functions=list(self.original.functions))
        shell.ir_version = self.original.ir_version
        inferred = _infer(shell)
        if inferred is shell:
            return
        own = self._types[index]
        found: dict[str, onnx.TypeProto] = {}
        _collect_types(inferred.graph, found)
        for name, t in found.items():
            if name not in free:
                own.setdefault(name, t)

    def _infer_function(self, root: int) -> list[dict[str, onnx.TypeProto]] | None:
        """Types of the function at scope ``root`` and its subgraphs, inferred at each call site."""
        fn = self.scopes[root].body
        self._inferring.add(root)
        agreed: list[dict[str, onnx.TypeProto]] | None = None
        try:
            for scope in self.scopes:
                if self._roots[self._index[id(scope)]] == root:
                    continue  # a function does not call itself
                for call in scope.body.node:
                    if call.op_type != fn.name or call.domain != fn.domain:
                        continue
                    outer = self.types_for(scope)
                    inputs = [onnx.helper.make_value_info(formal, outer[actual])
                              for formal, actual in zip(fn.input, call.input) if actual in outer]
                    if len(inputs) != len(fn.input):
                        return None
                    body = onnx.helper.make_graph(list(fn.node), fn.name, inputs,
                                                  [onnx.helper.make_empty_tensor_value_info(o) for o in fn.output])
                    shell = onnx.helper.make_model(body, opset_imports=list(self.original.opset_import),
                                                   functions=list(self.original.functions))
                    shell.ir_version = self.original.ir_version
                    found = []
                    for s in traversal.iter_scopes(_infer(shell)):
                        if s.is_function:
                            break  # the shell's own scopes come first; functions after
                        found.append({})
                        _collect_types(s.body, found[-1])
                    if agreed is None:
                        agreed = found
                    elif len(agreed) == len(found):
                        agreed = [{k: t for k, v in a.items() if (t := _common_type(v, f.get(k))) is not None}
                                  for a, f in zip(agreed, found)]
                    else:
                        return None
        finally:
            self._inferring.discard(root)
        return agreed

    def add_types(self, scope: traversal.Scope, types: dict[str, onnx.TypeProto]) -> None:
        """Types of values made during the conversion (by adapters, by function expansion).
        Before anybody asked for types, they wait (recording them runs no shape inference)."""
        index = self._index[id(scope)]
        if self._types is None or self._types[index] is None:
            self._early.setdefault(index, {}).update(types)
            return
        own = self._types[index]
        for name, t in types.items():
            own.setdefault(name, t)

    def register_scope(self, scope: traversal.Scope) -> None:
        """A scope the conversion made (a subgraph of an inlined function body)."""
        self._index[id(scope)] = len(self.scopes)
        self.scopes.append(scope)
        self._roots.append(self._index[id(scope.root)] if scope.root.is_function else None)
        if self._types is not None:
            self._types.append({})

    def scope_index(self, scope: traversal.Scope) -> int:
        return self._index[id(scope)]

    def fresh_node_name(self, hint: str) -> str:
        """A node name not used by any node of the model."""
        if self._node_names is None:
            self._node_names = {n.name for s in self.scopes for n in s.body.node if n.name}
        return _fresh(self._node_names, hint)

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
        return _fresh(self._names, hint)


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


_SCHEMA_DOMAINS = ("ai.onnx.ml",)  # domains whose ops ONNX's inference often leaves untyped


def _schema_types(graph: onnx.GraphProto, types: dict[str, onnx.TypeProto], opset_import) -> None:
    """Outputs of ``ai.onnx.ml`` nodes that inference left untyped, typed from the op's schema
    when it allows one type only (SVMClassifier's scores are tensor(float)), so the default-domain
    nodes behind them (a Cast, a Flatten) can take type-only steps."""
    opsets = {o.domain: o.version for o in opset_import}
    for node in graph.node:
        if node.domain not in _SCHEMA_DOMAINS or node.domain not in opsets:
            continue
        schema = schema_at(node.op_type, opsets[node.domain], node.domain)
        if schema is None:
            continue
        allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
        for formal, name in zip(schema.outputs, node.output):
            if not name or name in types:
                continue
            options = allowed.get(formal.type_str, [formal.type_str])
            if len(options) == 1 and options[0].startswith("tensor(") and options[0].endswith(")"):
                elem = _ELEM_TYPES.get(options[0][len("tensor("):-1])
                if elem is not None:
                    types[name] = onnx.helper.make_tensor_type_proto(elem, None)


_ELEM_TYPES = {onnx.helper.tensor_dtype_to_string(t)[len("TensorProto."):].lower(): t
               for t in onnx.TensorProto.DataType.values() if t}


def _collect_types(graph: onnx.GraphProto, types: dict[str, onnx.TypeProto]) -> None:
    for t in graph.initializer:
        types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.type.WhichOneof("value") is not None:  # tensors, sequences, optionals, maps
            types.setdefault(vi.name, vi.type)
