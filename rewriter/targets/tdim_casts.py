"""``TopK`` / ``cast_bypassed`` (``rewrite_forms``; tract 0.23's data): tract reads an ONNX Cast
to int64 as a cast to its dim type (TDim), and its TopK cannot sort that type ("TDim is not a
number": piper_tashkeel sorts its lengths, ``Cast(input_lengths, to=INT64)``, before torch's
packed GRU).  A TopK whose data a Cast to int64 writes reads the Cast's input instead when that is
int64 or int32: the same int64 when the Cast changes nothing; an int32, whose order the cast to
int64 keeps exactly, sorted as it is and its values cast to int64 after (the same values and
indices, ties in the same order; tract sorts int32, measured).  A Cast from a float type is left:
truncation makes ties the float values do not have; the Cast itself stays where other nodes read it.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import taken_names

__all__ = ["INTEGERS", "topk_cast_bypassed"]

# element types sorted in place of their cast to int64 (which keeps their order exactly)
INTEGERS = frozenset({TensorProto.INT64, TensorProto.INT32})


def _cast_source(node: onnx.NodeProto, scope, types: dict) -> tuple[str, int] | None:
    """(the value the Casts to int64 before the TopK ``node``'s data read, its element type) when
    that is an integer type (a chain of such Casts followed back while each reads an int64: torch's
    exports cast the lengths to int64 again at each layer), else None."""
    name, found = node.input[0], None
    for _ in range(32):
        cast = scope.producers().get(name)
        if cast is None or cast.op_type != "Cast" or not is_default_domain(cast.domain):
            break
        to = next((a.i for a in cast.attribute if a.name == "to"), None)
        source = types.get(cast.input[0])
        if to != TensorProto.INT64 or source is None or not source.HasField("tensor_type"):
            break
        elem = source.tensor_type.elem_type
        if elem not in INTEGERS:
            break
        name, found = cast.input[0], (cast.input[0], elem)
        if elem != TensorProto.INT64:
            break
    return found


def topk_cast_bypassed(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each TopK whose data a Cast to int64 of an integer value writes, as the
    module's docstring says; one note naming them."""
    types = value_types(model, inferred)
    taken = taken_names(model)
    done = []
    for scope in traversal.iter_scopes(model):
        nodes = []
        for node in scope.body.node:
            found = _cast_source(node, scope, types) if node.op_type == "TopK" and is_default_domain(
                node.domain) else None
            if found is not None:
                source, elem = found
                node.input[0] = source
                if elem != TensorProto.INT64 and node.output[0]:
                    values = node.output[0]
                    node.output[0] = fresh_name(taken, f"{values}_narrow")
                    nodes += [node, helper.make_node("Cast", [node.output[0]], [values], to=TensorProto.INT64,
                                                     name=fresh_name(taken, f"{node.name or values}_values_int64"))]
                    done.append(node.name or values)
                    continue
                done.append(node.name or node.output[1])
            nodes.append(node)
        if len(nodes) != len(scope.body.node):
            del scope.body.node[:]
            scope.body.node.extend(nodes)
    if not done:
        return []
    return [f"{len(done)} TopK node(s) sorting a Cast to int64 of an integer value sort that value "
            f"({release} reads the Cast as a dim type its TopK cannot sort): {first_few(repr(n) for n in done)}"]
