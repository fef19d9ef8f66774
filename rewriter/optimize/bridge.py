"""ModelProto <-> onnx_ir.Model without reading weights or losing what onnx_ir does not model.

``rewriter.io.load_model`` leaves big tensors as references (external data, or big inline
tensors cut out of the model file) that carry two private entries (see
:mod:`rewriter.io.tensors`). onnx_ir turns a reference into a lazy ``ExternalTensor`` but
writes back only location/offset/length, and it has no training info. ``to_ir`` records
what it would drop and ``to_proto`` puts it back, so ``save_model`` still streams the
untouched weights from where they were and the training info survives.
"""

from __future__ import annotations

import dataclasses
import warnings

import onnx
import onnx_ir as ir

from rewriter.graph import traversal
from rewriter.optimize.scopes import attribute_graphs
from rewriter.io.tensors import BASE_KEY, EXTERNAL, all_tensors

__all__ = ["Carry", "to_ir", "to_proto", "result_to_ir"]


@dataclasses.dataclass
class Carry:
    """What ``to_ir`` set aside for ``to_proto``."""

    entries: dict[tuple[str, int, int], list[tuple[str, str]]]
    training_info: list[onnx.TrainingInfoProto]
    # each function's value_info as the input had it: a function is polymorphic, so shapes
    # inferred at one call site must not be written into its body
    function_value_info: dict = dataclasses.field(default_factory=dict)
    # the names the input's graphs declared in value_info: the result declares no others (shapes
    # the optimizer inferred would only grow the file: 91 entries for ResNet-18, 448 for a Paddle
    # classifier, where the input had none)
    graph_value_info: frozenset = frozenset()
    # output name -> the name of the input's node that made it: a node a rewrite made in its place
    # (Flatten rewritten as Reshape) carries that name, as convert's rewrites do
    node_names: dict = dataclasses.field(default_factory=dict)
    # value name -> its ValueInfoProto, for values whose type holds a map (ZipMap's
    # seq(map(int64, float)) output): onnx_ir 1.1 has no map types, so they cross untyped
    map_types: dict = dataclasses.field(default_factory=dict)


def _key(t: onnx.TensorProto) -> tuple[str, int, int]:
    items = {e.key: e.value for e in t.external_data}
    return items.get("location", ""), int(items.get("offset", 0) or 0), int(items.get("length", -1) or -1)


def to_ir(model: onnx.ModelProto, base_dir: str | None = None) -> tuple[ir.Model, Carry]:
    """An ``onnx_ir.Model`` for ``model`` (not modified), its references kept lazy."""
    entries: dict[tuple[str, int, int], list[tuple[str, str]]] = {}
    for t, _ in all_tensors(model):
        if t.data_location == EXTERNAL:
            entries[_key(t)] = [(e.key, e.value) for e in t.external_data]
    carry = Carry(entries, [onnx.TrainingInfoProto.FromString(i.SerializeToString())
                            for i in model.training_info],
                  {(f.domain, f.name, f.overload): [onnx.ValueInfoProto.FromString(v.SerializeToString())
                                                    for v in f.value_info] for f in model.functions},
                  frozenset(v.name for s in traversal.iter_scopes(model) if not s.is_function
                            for v in s.body.value_info),
                  {o: n.name for s in traversal.iter_scopes(model) for n in s.body.node if n.name
                   for o in n.output if o})
    if model.training_info:
        model = _without_training_info(model)
    model = _without_map_types(model, carry.map_types)
    with warnings.catch_warnings():  # the private entries are ours; to_proto puts them back
        warnings.filterwarnings("ignore", message="Ignoring unknown external data key")
        result = ir.serde.deserialize_model(model)
    for tensor in _external_tensors(result):
        found = entries.get((str(tensor.location), tensor.offset or 0,
                             -1 if tensor.length is None else tensor.length))
        base = dict(found).get(BASE_KEY) if found else None
        tensor.base_dir = base or base_dir or ""
    return result, carry


def result_to_ir(model: onnx.ModelProto, base_dir: str | None = None) -> ir.Model:
    """A public function's or pass's result as an ``onnx_ir.Model`` the caller can keep: tensors
    that only this package can read (half or inline references, :func:`rewriter.io.detach.detach`)
    are read into memory; untouched external tensors stay lazy, with their directory."""
    from rewriter.io.detach import detach

    return to_ir(detach(model, base_dir, keep_located=True), base_dir)[0]


def _has_map(t: onnx.TypeProto) -> bool:
    kind = t.WhichOneof("value")
    if kind == "map_type":
        return True
    if kind == "sequence_type":
        return _has_map(t.sequence_type.elem_type)
    if kind == "optional_type":
        return _has_map(t.optional_type.elem_type)
    return False


def _without_map_types(model: onnx.ModelProto, saved: dict) -> onnx.ModelProto:
    """``model``, or a copy whose values with a map in their type are untyped (their
    ValueInfoProto kept in ``saved``, by name, for :func:`to_proto`)."""
    def infos(m):
        for scope in traversal.iter_scopes(m):
            if not scope.is_function:
                yield from (*scope.body.input, *scope.body.output, *scope.body.value_info)
    if not any(_has_map(v.type) for v in infos(model)):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for info in infos(copy):
        if _has_map(info.type):
            saved[info.name] = onnx.ValueInfoProto.FromString(info.SerializeToString())
            info.ClearField("type")
    return copy


def _without_training_info(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.training_info[:]
    return copy


def _external_tensors(model: ir.Model):
    def graph_tensors(graph):
        for value in graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                yield value.const_value
        for node in graph:
            yield from node_tensors(node)

    def node_tensors(node):
        for attr in node.attributes.values():
            if attr.is_ref():
                continue
            if attr.type == ir.AttributeType.TENSOR and isinstance(attr.value, ir.ExternalTensor):
                yield attr.value
            else:
                for g in attribute_graphs(attr):
                    yield from graph_tensors(g)

    yield from graph_tensors(model.graph)
    for fn in model.functions.values():
        for node in fn:
            yield from node_tensors(node)


def to_proto(model: ir.Model, carry: Carry) -> onnx.ModelProto:
    """The ModelProto of ``model``, references restored to what ``to_ir`` read."""
    proto = ir.serde.serialize_model(model)
    for t, _ in all_tensors(proto):
        if t.data_location != EXTERNAL:
            continue
        found = carry.entries.get(_key(t))
        if found is not None:
            del t.external_data[:]
            for k, v in found:
                t.external_data.add(key=k, value=v)
    for info in carry.training_info:
        proto.training_info.add().CopyFrom(info)
    for scope in traversal.iter_scopes(proto):
        if not scope.is_function and any(v.name not in carry.graph_value_info for v in scope.body.value_info):
            kept = [v for v in scope.body.value_info if v.name in carry.graph_value_info]
            del scope.body.value_info[:]
            scope.body.value_info.extend(kept)
    _carry_node_names(proto, carry.node_names)
    if carry.map_types:
        for scope in traversal.iter_scopes(proto):
            if not scope.is_function:
                for info in (*scope.body.input, *scope.body.output, *scope.body.value_info):
                    if info.name in carry.map_types:
                        info.CopyFrom(carry.map_types[info.name])
    for fn in proto.functions:
        kept = carry.function_value_info.get((fn.domain, fn.name, fn.overload), [])
        names = {o for n in fn.node for o in n.output} | set(fn.input) | set(fn.output)
        del fn.value_info[:]
        fn.value_info.extend(v for v in kept if v.name in names)
    return proto


def _carry_node_names(proto: onnx.ModelProto, names: dict[str, str]) -> None:
    """An unnamed node that makes an output a named node of the input made gets that name, when
    no node of the result has it."""
    if not names:
        return
    nodes = [n for s in traversal.iter_scopes(proto) for n in s.body.node]
    taken = {n.name for n in nodes if n.name}
    for node in nodes:
        if node.name:
            continue
        name = next((names[o] for o in node.output if o in names and names[o] not in taken), None)
        if name is not None:
            node.name = name
            taken.add(name)
