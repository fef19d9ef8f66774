"""Whether every string of a model's graphs and functions is valid UTF-8, at C speed.

ONNX's ``.proto`` is proto2, whose parser accepts any bytes in a ``string`` field; protobuf
then hands such a field to Python as ``bytes``. A proto3 message checks UTF-8 as it parses.
:func:`all_text_utf8` parses the main graph (as a light copy without initializer data
when it holds over 64 MiB) and the functions with proto3 mirrors of ONNX's messages
that keep only the string fields and the messages leading to them, so the common case (all
valid) costs one serialization and one parse instead of a Python walk of every
node. The caller walks the model in Python only when this says no, to name the node.
"""

from __future__ import annotations

import functools

import onnx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

__all__ = ["all_text_utf8"]

_PACKAGE = "rewriter_utf8_mirror"
DIRECT_BYTES = 64 << 20  # graphs up to this size are serialized whole, bigger ones as a light copy
_FD = descriptor_pb2.FieldDescriptorProto


def _mirror_name(descriptor) -> str:
    return descriptor.full_name.replace(".", "_")


def _repeated(field) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29; older ones have label
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


@functools.lru_cache(maxsize=None)
def _mirrors() -> tuple[type, type]:
    """Proto3 mirrors of GraphProto and FunctionProto (string and message fields only)."""
    fdp = descriptor_pb2.FileDescriptorProto(name=f"{_PACKAGE}.proto", package=_PACKAGE, syntax="proto3")
    todo, seen = [onnx.GraphProto.DESCRIPTOR, onnx.FunctionProto.DESCRIPTOR], set()
    while todo:
        d = todo.pop()
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        message = fdp.message_type.add(name=_mirror_name(d))
        for f in d.fields:
            label = _FD.LABEL_REPEATED if _repeated(f) else _FD.LABEL_OPTIONAL
            if f.type == f.TYPE_STRING:
                message.field.add(name=f.name, number=f.number, type=_FD.TYPE_STRING, label=label)
            elif f.type == f.TYPE_MESSAGE:
                message.field.add(name=f.name, number=f.number, type=_FD.TYPE_MESSAGE, label=label,
                                  type_name=f".{_PACKAGE}.{_mirror_name(f.message_type)}")
                todo.append(f.message_type)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    graph = message_factory.GetMessageClass(pool.FindMessageTypeByName(
        f"{_PACKAGE}.{_mirror_name(onnx.GraphProto.DESCRIPTOR)}"))
    function = message_factory.GetMessageClass(pool.FindMessageTypeByName(
        f"{_PACKAGE}.{_mirror_name(onnx.FunctionProto.DESCRIPTOR)}"))
    return graph, function


def _light_graph(graph: onnx.GraphProto) -> onnx.GraphProto:
    light = onnx.GraphProto()
    light.node.extend(graph.node)
    light.input.extend(graph.input)
    light.output.extend(graph.output)
    light.value_info.extend(graph.value_info)
    light.initializer.extend(onnx.TensorProto(name=t.name) for t in graph.initializer)
    light.name = graph.name
    return light


def all_text_utf8(model: onnx.ModelProto) -> bool:
    """True when every string field of the main graph (its nodes to any depth, inputs, outputs,
    value_info, initializer names) and of every function is valid UTF-8. False means some
    string somewhere in them is not (possibly one nobody reads, such as a doc string)."""
    graph, function = _mirrors()
    g = model.graph
    try:  # serializing the graph as it is costs less than a light copy, unless it holds much data
        graph.FromString((g if g.ByteSize() <= DIRECT_BYTES else _light_graph(g)).SerializeToString())
        for fn in model.functions:
            function.FromString(fn.SerializeToString())
    except DecodeError:
        return False
    return True
