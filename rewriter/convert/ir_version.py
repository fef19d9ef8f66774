"""The IR version a model needs, and lowering a model to an older IR version.

Each IR version's additions are those ``onnx.proto`` lists in its ``Version`` enum (IR 3:
opset_import; 4: initializers that are not graph inputs, bfloat16; 5: quantization
annotations; 6: sparse tensors; 7: training info; 8: model-local functions, sparse and
optional types; 9: function attribute defaults, float8; 10: int4/uint4, overloads, function
value_info, metadata_props on nodes, graphs, functions, values and tensors; 11: float4,
multi-device configurations; 12: float8e8m0; 13: int2/uint2; 14: float6). :func:`features`
finds every use of one in a model, :func:`needed` the lowest IR version that expresses it
all (its opset imports included, by ``onnx.helper.find_min_ir_version_for``).

:func:`lower` takes a model to an older IR version, rewriting exactly what can be: an
initializer outside the graph inputs becomes a graph input of the main graph (IR 3's form),
sparse initializers and sparse Constant values become dense ones, model-local functions are
inlined (``onnx.inliner``), metadata that the older IR has no place for moves to the model's
own ``metadata_props`` (under :data:`MOVED_METADATA`, as JSON, so nothing is lost). Anything
else it cannot express fails as a whole, naming each use, where it is and the lowest IR
version that works.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.errors import ConversionError
from rewriter.graph import traversal
from rewriter.graph.schemas import is_default_domain

__all__ = ["Feature", "features", "needed", "lower", "opset_ir", "counted", "going_down", "kept_note", "MOVED_METADATA",
           "LOWEST"]

MOVED_METADATA = "rewriter.moved_metadata"
LOWEST = 3  # IR 1 and 2 have no opset_import: no model of an opset can be written in them

# the IR version that introduced each tensor element type beyond IR 3's
_TYPE_IR = {16: 4, 17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13, 27: 14, 28: 14}
# default-domain attributes whose int value is an element type
_DTYPE_ATTRS = frozenset({"to", "dtype", "output_dtype"})


@dataclasses.dataclass(frozen=True)
class Feature:
    """One use of something an IR version introduced."""

    ir_version: int  # the first IR version that expresses it
    what: str  # e.g. "model-local function 'gelu'"
    where: str  # e.g. "main graph"
    rewrite: str | None = None  # how :func:`lower` rewrites it exactly for an older IR, if it can

    def line(self) -> str:
        return f"{self.what} in {self.where} (needs IR {self.ir_version})"


def opset_ir(opset_import) -> int:
    """The lowest IR version that the opset imports need (custom domains need none)."""
    return max(LOWEST, onnx.helper.find_min_ir_version_for(list(opset_import), ignore_unknown=True))


def _type_name(elem: int) -> str:
    return onnx.TensorProto.DataType.Name(elem).lower()


def _types_of(tp: onnx.TypeProto):
    """Every tensor element type and every newer type kind a TypeProto uses: (ir, what)."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        if tp.tensor_type.elem_type in _TYPE_IR:
            yield _TYPE_IR[tp.tensor_type.elem_type], f"a {_type_name(tp.tensor_type.elem_type)} tensor type"
    elif kind == "sparse_tensor_type":
        yield 8, "a sparse tensor type"
        if tp.sparse_tensor_type.elem_type in _TYPE_IR:
            yield _TYPE_IR[tp.sparse_tensor_type.elem_type], f"a {_type_name(tp.sparse_tensor_type.elem_type)} type"
    elif kind == "optional_type":
        yield 8, "an optional type"
        yield from _types_of(tp.optional_type.elem_type)
    elif kind == "sequence_type":
        yield from _types_of(tp.sequence_type.elem_type)
    elif kind == "map_type":
        yield from _types_of(tp.map_type.value_type)


def _tensor_features(t: onnx.TensorProto, where: str):
    if t.data_type in _TYPE_IR:
        yield Feature(_TYPE_IR[t.data_type], f"{_type_name(t.data_type)} tensor '{t.name}'", where)
    if t.metadata_props:
        yield Feature(10, f"metadata_props of tensor '{t.name}'", where, "moved")


# attribute kinds that hold nothing a newer IR introduced
_PLAIN_ATTRS = frozenset({onnx.AttributeProto.FLOAT, onnx.AttributeProto.FLOATS, onnx.AttributeProto.INTS,
                          onnx.AttributeProto.STRING, onnx.AttributeProto.STRINGS, onnx.AttributeProto.GRAPH,
                          onnx.AttributeProto.GRAPHS})


class _Label:
    """A node's label for a message, made when a message needs it (a walk for unnamed nodes)."""

    def __init__(self, node, scope):
        self._node, self._scope, self._text = node, scope, None

    def __format__(self, spec) -> str:
        if self._text is None:
            self._text = traversal.node_label(self._node, self._scope)
        return format(self._text, spec)


def features(model: onnx.ModelProto) -> list[Feature]:
    """Every use in ``model`` of something introduced after IR 3, with where it is."""
    found: list[Feature] = []
    add = found.append
    if model.training_info:
        add(Feature(7, f"training info ({len(model.training_info)} entries)", "the model"))
    if model.configuration:
        add(Feature(11, "multi-device configurations", "the model"))
    for fn in model.functions:
        where = f"function '{fn.name}'"
        add(Feature(8, f"model-local function '{fn.name}'", "the model", "inlined"))
        if fn.attribute_proto:
            add(Feature(9, "attribute default values", where, "inlined"))
        if fn.overload:
            add(Feature(10, f"overload '{fn.overload}'", where, "inlined"))
        if fn.value_info:
            add(Feature(10, "value_info", where, "inlined"))
        if fn.metadata_props:
            add(Feature(10, "metadata_props", where, "inlined"))
    for scope in traversal.iter_scopes(model):
        body, where = scope.body, scope.location
        if not scope.is_function:
            inputs = {i.name for i in body.input}
            outside = [t.name for t in body.initializer if t.name not in inputs]
            if outside:
                add(Feature(4, f"{len(outside)} initializer(s) that are not graph inputs ('{outside[0]}', ...)",
                            where, "made graph inputs"))
            if body.quantization_annotation:
                add(Feature(5, "quantization annotations", where))
            if body.sparse_initializer:
                add(Feature(6, f"{len(body.sparse_initializer)} sparse initializer(s)", where, "made dense"))
            if body.metadata_props:
                add(Feature(10, "metadata_props of the graph", where, "moved"))
            for t in body.initializer:
                found.extend(_tensor_features(t, where))
            for s in body.sparse_initializer:
                found.extend(_tensor_features(s.values, where))
        values = [*body.input, *body.output, *body.value_info] if not scope.is_function else [*body.value_info]
        for v in values:
            for ir, what in _types_of(v.type):
                add(Feature(ir, f"{what} of value '{v.name}'", where))
            if v.metadata_props:
                add(Feature(10, f"metadata_props of value '{v.name}'", where, "moved"))
        for node in body.node:
            if not (node.overload or node.metadata_props or node.device_configurations or node.attribute):
                continue  # the common case: nothing a newer IR introduced (labels are made only when needed)
            label = _Label(node, scope)
            if node.overload:
                add(Feature(10, f"overload '{node.overload}' of node {label}", where, "inlined"))
            if node.metadata_props:
                add(Feature(10, f"metadata_props of node {label}", where, "moved"))
            if node.device_configurations:
                add(Feature(11, f"device configurations of node {label}", where))
            for a in node.attribute:
                kind = a.type  # one read each: protobuf field access is the cost of this walk
                if kind in _PLAIN_ATTRS:
                    continue
                if kind == onnx.AttributeProto.INT and a.name in _DTYPE_ATTRS and \
                        is_default_domain(node.domain) and a.i in _TYPE_IR:
                    add(Feature(_TYPE_IR[a.i], f"type {_type_name(a.i)} in attribute '{a.name}' of node {label}",
                                where))
                if kind == onnx.AttributeProto.TENSOR:
                    found.extend(_tensor_features(a.t, f"node {label}"))
                if kind == onnx.AttributeProto.TENSORS:
                    for t in a.tensors:
                        found.extend(_tensor_features(t, f"node {label}"))
                if kind == onnx.AttributeProto.SPARSE_TENSOR:
                    exact = "made dense" if node.op_type == "Constant" and is_default_domain(node.domain) else None
                    add(Feature(6, f"a sparse tensor in attribute '{a.name}' of node {label}", where, exact))
                if kind == onnx.AttributeProto.TYPE_PROTO or kind == onnx.AttributeProto.TYPE_PROTOS:
                    for tp in [a.tp, *a.type_protos]:
                        for ir, what in _types_of(tp):
                            add(Feature(ir, f"{what} in attribute '{a.name}' of node {label}", where))
    return found


def needed(model: onnx.ModelProto, found: list[Feature] | None = None) -> int:
    """The lowest IR version that expresses ``model`` as it is."""
    found = features(model) if found is None else found
    return max([opset_ir(model.opset_import), *(f.ir_version for f in found)])


def counted(f: Feature, input_ir: int) -> int:
    """The IR version ``f`` holds a result at: at most the input's (node metadata in an IR-8 file,
    which IR-8 readers ignore, raises nothing); initializers outside the graph inputs hold IR 4
    (IR 3's form makes them inputs, which changes the model's interface)."""
    return min(f.ir_version, max(input_ir, 4 if f.rewrite == "made graph inputs" else 0))


def going_down(found: list[Feature], opsets: int, input_ir: int) -> tuple[int, list[Feature]]:
    """The IR version a conversion down chooses unpinned, and the features that keep it above
    ``opsets`` (what the opset imports need). metadata_props hold nothing: readers of an older
    IR skip the field (and onnx.checker accepts it at any IR), so it stays where it is."""
    holding = [f for f in found if not f.what.startswith("metadata_props") and counted(f, input_ir) > opsets]
    return max([opsets, *(counted(f, input_ir) for f in holding)]), holding


def kept_note(chosen: int, opsets: int, holding: list[Feature]) -> str:
    """'IR version kept at 10 (...): what (where): how to drop it; ...' for the summary."""
    first = sorted(holding, key=lambda f: -f.ir_version)[:3]
    shown = "; ".join(f"{f.what} ({f.where}): " + (f"--ir-version {opsets} rewrites it ({f.rewrite})" if f.rewrite
                      else f"no IR version below {f.ir_version} has it") for f in first)
    more = f"; and {len(holding) - 3} more" if len(holding) > 3 else ""
    return f"IR version kept at {chosen} (the opset imports need {opsets}): {shown}{more}"


def lower(model: onnx.ModelProto, ir_version: int) -> list[str]:
    """Rewrite ``model`` in place so that IR ``ir_version`` expresses it, and set it; returns
    what was rewritten (one line each). Raises ConversionError, naming every use of a newer
    feature that cannot be rewritten and the lowest IR version that works, before changing
    anything."""
    need_opsets = opset_ir(model.opset_import)
    found = features(model)
    above = [f for f in found if f.ir_version > ir_version]
    lowest = needed(model, found)
    fixed = [f for f in above if f.rewrite is None]
    problems = [f.line() for f in fixed]
    if need_opsets > ir_version:
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        problems.insert(0, f"the opset imports ({opsets}) need IR {need_opsets}")
    if problems:
        works = max([need_opsets, *(f.ir_version for f in fixed)])
        shown = "; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise ConversionError(f"IR version {ir_version} cannot express the model: {shown} "
                              f"(the lowest IR version that works is {works})")
    done: list[str] = []
    if lowest > ir_version:
        kinds = {f.rewrite for f in above}
        if "inlined" in kinds and model.functions:
            done.append(_inline(model, ir_version))
        if "made dense" in kinds:
            done.append(_densify(model))
        if "moved" in kinds:
            done.append(_move_metadata(model))
        if "made graph inputs" in kinds:
            done.append(_initializers_as_inputs(model))
    model.ir_version = ir_version
    return [d for d in done if d]


def _inline(model: onnx.ModelProto, ir_version: int) -> str:
    """Inline the functions the IR version cannot hold (every one below IR 8)."""
    import onnx.inliner

    if ir_version < 8:
        ids = [(f.domain, f.name, f.overload) for f in model.functions]
    else:
        ids = [(f.domain, f.name, f.overload) for f in model.functions
               if (f.attribute_proto and ir_version < 9) or (ir_version < 10 and (
                   f.overload or f.value_info or f.metadata_props))]
    if not ids:
        return ""
    # calls with an overload name the IR cannot hold either
    overloaded = {(d, n) for d, n, o in ids if o}
    names = sorted({n for _, n, _ in ids})
    keep_meta = [(f.name, list(f.metadata_props)) for f in model.functions if (f.domain, f.name, f.overload) in ids
                 and f.metadata_props]
    _write_defaults(model, [f for f in model.functions if (f.domain, f.name, f.overload) in ids])
    inlined = onnx.inliner.inline_selected_functions(model, [(d, n) for d, n, _ in ids])
    model.CopyFrom(inlined)
    if overloaded:
        for scope in traversal.iter_scopes(model):
            for node in scope.body.node:
                node.overload = ""
    for name, props in keep_meta:
        _stash(model, f"function:{name}", props)
    return f"inlined {len(ids)} model-local function(s) ({', '.join(names)})"


def _write_defaults(model: onnx.ModelProto, functions) -> None:
    """Each call of a function to be inlined gets the function's attribute default values it
    does not set itself (the inliner reads only the call's own attributes)."""
    defaults = {(f.domain, f.name, f.overload): list(f.attribute_proto) for f in functions if f.attribute_proto}
    if not defaults:
        return
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            for a in defaults.get((node.domain, node.op_type, node.overload), ()):
                if not any(x.name == a.name for x in node.attribute):
                    node.attribute.add().CopyFrom(a)


def _stash(model: onnx.ModelProto, key: str, props) -> None:
    """Keep metadata entries in the model's own metadata_props under MOVED_METADATA (JSON)."""
    entry = next((p for p in model.metadata_props if p.key == MOVED_METADATA), None)
    if entry is None:
        entry = model.metadata_props.add()
        entry.key, entry.value = MOVED_METADATA, "{}"
    moved = json.loads(entry.value)
    moved.setdefault(key, {}).update({p.key: p.value for p in props})
    entry.value = json.dumps(moved, sort_keys=True)


def _move_metadata(model: onnx.ModelProto) -> str:
    count = 0

    def move(key, holder):
        nonlocal count
        if holder.metadata_props:
            count += len(holder.metadata_props)
            _stash(model, key, holder.metadata_props)
            del holder.metadata_props[:]

    for scope in traversal.iter_scopes(model):
        body, where = scope.body, scope.location
        if not scope.is_function:
            move(f"graph:{where}", body)
            for t in [*body.initializer, *(s.values for s in body.sparse_initializer)]:
                move(f"tensor:{where}:{t.name}", t)
        for v in [*body.input, *body.output, *body.value_info] if not scope.is_function else body.value_info:
            move(f"value:{where}:{v.name}", v)
        for node in body.node:
            move(f"node:{where}:{node.name or traversal.node_label(node, scope)}", node)
            for a in node.attribute:
                for t in [a.t, *a.tensors] if a.HasField("t") else a.tensors:
                    move(f"tensor:node {node.name}:{a.name}", t)
    return f"moved {count} metadata entr{'y' if count == 1 else 'ies'} the IR version has no place for " \
           f"to the model's metadata_props '{MOVED_METADATA}'" if count else ""


def _dense(sparse: onnx.SparseTensorProto) -> onnx.TensorProto:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dims = tuple(sparse.dims)
    dense = np.zeros(dims, dtype=values.dtype)
    if indices.ndim == 2:  # COO coordinates, one row per value
        dense[tuple(indices.T)] = values
    else:  # linear indices into the flattened tensor
        dense.reshape(-1)[indices] = values
    return numpy_helper.from_array(dense, sparse.values.name)


def _densify(model: onnx.ModelProto) -> str:
    count = 0
    for scope in traversal.iter_scopes(model):
        body = scope.body
        if not scope.is_function and body.sparse_initializer:
            body.initializer.extend(_dense(s) for s in body.sparse_initializer)
            count += len(body.sparse_initializer)
            del body.sparse_initializer[:]
        for node in body.node:
            if node.op_type == "Constant" and is_default_domain(node.domain):
                for a in node.attribute:
                    if a.type == onnx.AttributeProto.SPARSE_TENSOR:
                        dense = _dense(a.sparse_tensor)
                        a.ClearField("sparse_tensor")
                        a.name, a.type = "value", onnx.AttributeProto.TENSOR
                        a.t.CopyFrom(dense)
                        count += 1
    return f"made {count} sparse tensor(s) dense" if count else ""


def _initializers_as_inputs(model: onnx.ModelProto) -> str:
    """IR 3's form: every initializer is a graph input; a subgraph's move to the main graph
    (outer-scope values are visible inside; a subgraph's inputs are fixed by its op)."""
    main = model.graph
    names = {i.name for i in main.input}
    moved = 0
    for scope in list(traversal.iter_scopes(model)):
        if scope.is_function:
            continue
        body = scope.body
        inputs = {i.name for i in body.input}
        outside = [t for t in body.initializer if t.name not in inputs]
        if not outside:
            continue
        if body is not main:
            keep = [t for t in body.initializer if t.name in inputs]
            del body.initializer[:]
            body.initializer.extend(keep)
            main.initializer.extend(outside)
        for t in outside:
            if t.name not in names:
                main.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
                names.add(t.name)
                moved += 1
    return f"made {moved} initializer(s) graph inputs (IR 3 has no initializers outside them)" if moved else ""
