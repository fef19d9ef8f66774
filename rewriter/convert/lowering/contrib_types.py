"""Types after ``com.microsoft`` nodes, which ONNX's shape inference does not know: each op's rule
gives its outputs' element types and shapes from its inputs' (as ONNX Runtime's schema does), and
the standard nodes after them are inferred one at a time, in graph order, so that a chain of
contrib and standard nodes (QLinearConv -> QLinearAdd -> QLinearConv -> ...) is typed throughout;
values of unknown rank are inferred again the same way (a Reshape to a computed shape of static
length has that rank).
Rules register with :func:`output_types` beside their lowerings."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.attributes import attribute_value
from rewriter.graph.schemas import is_default_domain

__all__ = ["COM", "output_types", "fill_contrib_types", "dims_of", "tensor_type", "broadcast_dims"]

logger = logging.getLogger(__name__)
COM = "com.microsoft"
RULES: dict[str, Callable] = {}
_SMALL = 4096  # constant inputs handed to inference as data (shapes, axes) up to this many elements
_ANONYMOUS = re.compile(r"unk__\d+")


def output_types(*op_types: str):
    """Register ``fn(node, types) -> [TypeProto | None per output]`` for ``com.microsoft::op_type``."""

    def register(fn):
        for op in op_types:
            RULES[op] = fn
        return fn

    return register


def tensor_type(elem: int, dims) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(elem, None if dims is None else list(dims))


def dims_of(tp: onnx.TypeProto | None):
    """(elem, dims) of a tensor type (dims None when the rank is unknown); (None, None) otherwise."""
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return None, None
    t = tp.tensor_type
    if not t.HasField("shape"):
        return t.elem_type or None, None
    return t.elem_type or None, [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def broadcast_dims(*shapes):
    """Numpy broadcasting of dims lists (None: unknown rank; a dim None or a name: unknown)."""
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        ds = [s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0]
        known = [d for d in ds if isinstance(d, int)]
        if any(d != 1 for d in known):
            out.append(max(d for d in known if d != 1))
        elif len(known) == len(ds):
            out.append(1)
        else:
            names = {d for d in ds if not isinstance(d, int)}
            out.append(names.pop() if len(names) == 1 and None not in names else None)
    return out


def _constant_data(name: str, scope: traversal.Scope) -> onnx.TensorProto | None:
    kind, thing, _ = traversal.definition(name, scope)
    if kind == "initializer" and thing.data_location != onnx.TensorProto.EXTERNAL:
        size = 1
        for d in thing.dims:
            size *= d
        return thing if size <= _SMALL else None
    if kind == "node" and thing.op_type == "Constant" and is_default_domain(thing.domain):
        for a in thing.attribute:
            if a.name == "value" and not a.ref_attr_name:
                return a.t
            if a.name in ("value_ints", "value_int") and not a.ref_attr_name:
                values = list(a.ints) if a.name == "value_ints" else a.i
                return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)
    return None


def _infer_standard(node, scope, types, imports) -> list:
    if any(traversal.attribute_graphs(a) for a in node.attribute):
        return []
    if any(i and i not in types for i in node.input):
        return []
    try:
        schema = onnx.defs.get_schema(node.op_type, scope.opset or 1, "")
        data = {}
        for i in node.input:
            if i and i not in data:
                t = _constant_data(i, scope)
                if t is not None:
                    data[i] = t
        got = onnx.shape_inference.infer_node_outputs(
            schema, node, {i: types[i] for i in node.input if i}, data, opset_imports=list(imports))
    except Exception as e:  # inference of one node failed: its outputs stay untyped
        logger.debug("no types after %s: %s", node.op_type, e)
        return []
    out = [got.get(o) for o in node.output]
    if node.op_type == "Reshape" and out and _dims_unknown(out[0]):
        out[0] = _reshaped(node, scope, types, out[0])
    if node.op_type == "Slice" and out and _dims_unknown(out[0]):
        out[0] = _sliced(node, scope, types, out[0])
    return out


def _known(d) -> bool:
    """A dim with a value or a name of the model's (ONNX's inference names the dims it does not
    know ``unk__N``)."""
    return isinstance(d, int) or (isinstance(d, str) and not _ANONYMOUS.fullmatch(d))


def _more_dims(tp, old) -> bool:
    """``tp`` has the rank of ``old`` and more known dims."""
    (_, a), (_, b) = dims_of(tp), dims_of(old)
    return a is not None and b is not None and len(a) == len(b) and \
        sum(map(_known, a)) > sum(map(_known, b))


def _sliced(node, scope, types, tp):
    """A Slice's output type with the dims of the axes it does not slice (constant ``axes``) kept
    from its input: ONNX's inference knows none of them when the bounds are computed (a position
    table sliced to the sequence length read by Shape keeps its leading 1)."""
    elem, dims = dims_of(types[node.input[0]])
    _, old = dims_of(tp)
    axes = _constant_array(node.input[3], scope) if len(node.input) > 3 and node.input[3] else None
    if dims is None or old is None or len(old) != len(dims) or axes is None or (scope.opset or 1) < 10:
        return tp
    cut = {int(a) % len(dims) for a in np.ravel(axes)}
    new = [o if _known(o) or i in cut else dims[i] for i, o in enumerate(old)]
    return tensor_type(elem or onnx.TensorProto.UNDEFINED, new)


def _dims_unknown(tp) -> bool:
    return _rank_unknown(tp) or any(not isinstance(d, int) for d in dims_of(tp)[1] or [None])


def _reshaped(node, scope, types, tp):
    """A Reshape's output type from the elements of its shape known before the run (a Concat of a
    Shape's Gathers and constants: YOLOv8's DFL reshapes to [batch, 4, 16, anchors]), else its rank."""
    from rewriter.graph.loop_trips import KnownValues

    elem, dims = dims_of(types[node.input[0]])
    _, old = dims_of(tp)

    def int_dims(name):
        got = dims_of(types.get(name))[1]
        return None if got is None else [d if isinstance(d, int) else None for d in got]

    values = KnownValues(lambda n: _constant_array(n, scope), int_dims, scope.producers().get, scope.opset or 1)
    found = values.partial(node.input[1])
    if found is None or np.ndim(found[0]) != 1:
        _, shape = dims_of(types[node.input[1]])
        if _rank_unknown(tp) and shape is not None and len(shape) == 1 and isinstance(shape[0], int):
            return tensor_type(elem or onnx.TensorProto.UNDEFINED, [None] * shape[0])  # the rank, not the dims
        return tp
    keep_zero = attribute_value(node, "allowzero", 0)
    new = []
    for i, (v, known) in enumerate(zip(found[0].tolist(), found[1].tolist())):
        if old is not None and i < len(old) and isinstance(old[i], int):
            new.append(old[i])
        elif known and v == 0 and not keep_zero:
            new.append(dims[i] if dims is not None and i < len(dims) and isinstance(dims[i], int) else None)
        else:
            new.append(int(v) if known and v >= 0 else None)
    if new.count(None) == 1 and dims is not None and all(isinstance(d, int) for d in dims):
        k, rest = new.index(None), int(np.prod([d for d in new if d is not None]))
        if rest and found[1][k] and found[0][k] == -1:  # the one -1: what the other dims leave
            new[k] = int(np.prod(dims)) // rest
    return tensor_type(elem or onnx.TensorProto.UNDEFINED, new)


def _constant_array(name, scope):
    t = _constant_data(name, scope)
    return None if t is None else numpy_helper.to_array(t)


def _rank_unknown(tp) -> bool:
    return tp is None or (tp.WhichOneof("value") == "tensor_type" and not tp.tensor_type.HasField("shape"))


def fill_contrib_types(model: onnx.ModelProto, types: dict) -> dict:
    """Add to ``types`` (name -> TypeProto) what the main graph's ``com.microsoft`` nodes give and the
    standard nodes after them; returns ``types``."""
    if not any(n.domain == COM for n in model.graph.node):
        return types
    scope = next(iter(traversal.iter_scopes(model)))
    improved: set[str] = set()  # the values given a type, or more static dims, here
    for node in model.graph.node:
        refine = any(i in improved for i in node.input) or (node.op_type in ("Reshape", "Slice") and
                                                             is_default_domain(node.domain) and
                                                             _dims_unknown(types.get(node.output[0])))
        if all(not o or not _rank_unknown(types.get(o)) for o in node.output) and not refine:
            continue
        if node.domain == COM:
            rule = RULES.get(node.op_type)
            try:
                got = rule(node, types) if rule is not None else []
            except (KeyError, IndexError, TypeError, ValueError) as e:
                logger.debug("no rule types after %s: %s", node.op_type, e)
                got = []
        elif is_default_domain(node.domain):
            got = _infer_standard(node, scope, types, model.opset_import)
        else:
            continue
        for name, tp in zip(node.output, got):
            if name and tp is not None and (name not in types or _rank_unknown(types[name]) and not _rank_unknown(tp)
                                            or refine and _more_dims(tp, types[name])):
                types[name] = tp
                improved.add(name)
    return types
