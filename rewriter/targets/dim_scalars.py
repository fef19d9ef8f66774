"""Dims read from ``Shape`` written as scalars where a release keeps a shape only for them
(``rewrite_forms`` form ``dims_as_scalars``; TVM 0.27's data).

TVM 0.27's Relax ONNX frontend keeps a dim read from a ``Shape`` symbolic (a ``ShapeExpr`` or a
``PrimValue``) only along one path: ``Gather`` of the shape by a scalar index, arithmetic
(``Add`` / ``Sub`` / ``Mul``) on such scalars, and ``Unsqueeze`` of one to a 1-element shape.
A ``Gather`` by a 1-element index ``[k]`` gives a tensor computed at run time instead, and a
``Slice`` whose starts or ends is such a tensor (the first S rows of a position table, the
lowered ``EmbedLayerNormalization``; the mask-index slices of the lowered ``Attention``),
a ``ConstantOfShape`` of it or a ``Range`` to its ``Squeeze`` has no shape: the next ``Reshape``
with a 0 or -1 in its shape is refused ("Reshape expects the input tensor to have known shape").

Here each starts / ends of a ``Slice``, input of a ``ConstantOfShape`` (1-element values) and
input of a ``Range`` (scalars) that is such a dim expression (``Gather(Shape(x), [k])``, a
``Squeeze`` or ``Unsqueeze`` of one, ``Add`` / ``Sub`` / ``Mul`` of them and 1-element integer
constants, a ``Div`` of one that cannot be negative by a positive constant) is computed again on scalars, with an ``Unsqueeze`` to one element where a 1-element
value is read: the same values (every value involved holds one element). The original nodes
stay for their other readers. A ``Range`` from 0 by 1 to such a dim, or to a ``Cast`` of one to
float or double (a detector's anchor grid, arange(width) + 0.5), is reshaped to [dim], its length:
TVM gives it a length of its own otherwise, and cannot emit the arithmetic of the grid with the
feature map ("CodeGenVM cannot emit this Relax operator directly"), with static dims too.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.attributes import attribute_int
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.dim_exprs import exact_division, gathers_a_dim, one_dim_shape
from rewriter.targets.node_splice import taken_names
from rewriter.targets.restriction_lookups import constant_array

__all__ = ["READERS", "SHAPE_READERS", "dims_as_scalars", "scalar_constant_of_shape", "scalar_reshapes_unsqueezed",
           "shape_no_ops_bypassed", "shapes_cast_for_readers"]

# op -> (input positions, True when the reader takes a 1-element 1-D value, False for a scalar)
READERS = {"Slice": ((1, 2), True), "ConstantOfShape": ((0,), True), "Range": ((0, 1, 2), False)}
_ARITH = ("Add", "Sub", "Mul")
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)


class _Writer:
    """Scalar forms of dim expressions in one scope: new nodes in ``nodes`` (placed before their
    reader), memoized by the value they compute again."""

    def __init__(self, scope: traversal.Scope, taken: set):
        self.scope, self.taken, self.nodes = scope, taken, []
        self._memo: dict[str, tuple[str, bool] | None] = {}

    def _node(self, op: str, inputs: list, hint: str, **attrs) -> str:
        out = fresh_name(self.taken, hint)
        self.nodes.append(helper.make_node(op, inputs, [out], name=fresh_name(self.taken, out), **attrs))
        return out

    def _int64(self, value, hint: str) -> str:
        out = fresh_name(self.taken, hint)
        self.nodes.append(helper.make_node("Constant", [], [out], name=fresh_name(self.taken, out),
                                           value=numpy_helper.from_array(np.asarray(value, np.int64), out)))
        return out

    def scalar(self, name: str) -> tuple[str, bool] | None:
        """(a scalar int64 value equal to the 1-element dim expression ``name``, whether it is new),
        or None when ``name`` is not one."""
        if name not in self._memo:
            self._memo[name] = None  # (a cycle cannot happen in a valid graph)
            self._memo[name] = self._scalar(name)
        return self._memo[name]

    def _scalar(self, name: str) -> tuple[str, bool] | None:
        kind, node, where = traversal.definition(name, self.scope)
        if kind != "node" or where is not self.scope or not is_default_domain(node.domain):
            return None
        if node.op_type == "Gather" and gathers_a_dim(node, self.scope):
            index = constant_array(node.input[1], self.scope)
            if index.ndim == 0:
                return name, False
            k = self._int64(index.reshape(()), f"{name}_index")
            return self._node("Gather", [node.input[0], k], f"{name}_scalar", axis=0), True
        k = one_dim_shape(node)
        if k is not None:  # Shape(x, start=k, end=k + 1): TVM keeps it as a shape, not its Squeeze for a Range
            shape = self._node("Shape", [node.input[0]], f"{name}_whole")
            return self._node("Gather", [shape, self._int64(k, f"{name}_index")], f"{name}_scalar", axis=0), True
        if node.op_type in ("Squeeze", "Unsqueeze"):  # TVM reads them on a dim it keeps as dims
            return self.scalar(node.input[0])
        if node.op_type == "Cast" and attribute_int(node, "to") == onnx.TensorProto.INT64:  # (a dim is int64 already)
            inner = self.scalar(node.input[0])
            return None if inner is None else (inner[0], True)
        if (node.op_type in _ARITH or node.op_type == "Div" and exact_division(node, self.scope)) \
                and len(node.input) == 2:
            parts = [self.scalar(i) or self._constant_scalar(i) for i in node.input]
            if None in parts:
                return None
            # arithmetic on an Unsqueeze of a dim is on a shape, which TVM refuses
            if not any(new for _, new in parts) and not any(self._unsqueezed(i) for i in node.input):
                return name, False
            return self._node(node.op_type, [p for p, _ in parts], f"{name}_scalar"), True
        return None

    def _unsqueezed(self, name: str) -> bool:
        kind, node, _ = traversal.definition(name, self.scope)
        return kind == "node" and node.op_type == "Unsqueeze"

    def _constant_scalar(self, name: str) -> tuple[str, bool] | None:
        value = constant_array(name, self.scope)
        if value is None or value.size != 1 or value.dtype != np.int64:
            return None
        return self._int64(value.reshape(()), f"{name}_scalar"), False

    def one_element(self, name: str) -> str | None:
        """A 1-element 1-D value equal to ``name`` that TVM reads as a shape, or None."""
        got = self.scalar(name)
        return None if got is None or not got[1] else self.unsqueezed(got[0], name)

    def unsqueezed(self, scalar: str, hint: str) -> str:
        if self.scope.opset is not None and self.scope.opset >= 13:
            return self._node("Unsqueeze", [scalar, self._int64([0], f"{hint}_axes")], f"{hint}_dims")
        return self._node("Unsqueeze", [scalar], f"{hint}_dims", axes=[0])

    def range_as_long(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """A Reshape of ``node``'s output (a Range from 0 by 1 to a dim expression) to [limit], its
        length: TVM gives a Range a length of its own, which no other dim matches (the mask's
        positions 0..T-1 broadcast against the scores' T). Empty when ``node`` is not one."""
        start, delta = (constant_array(node.input[i], self.scope) for i in (0, 2))
        limit = self.scalar(node.input[1]) or self._float_dim(node.input[1])
        if start is None or delta is None or limit is None or start.size != 1 or delta.size != 1 \
                or start.item() != 0 or delta.item() != 1:
            return []
        out = node.output[0]
        node.output[0] = fresh_name(self.taken, f"{out}_range")
        length = self.unsqueezed(limit[0], out)
        return [helper.make_node("Reshape", [node.output[0], length], [out], name=fresh_name(self.taken, f"{out}_long"))]


    def _float_dim(self, name: str) -> tuple[str, bool] | None:
        """The scalar dim expression that ``name``, a Cast of it to float or double, reads (a float
        Range's limit: a detector's anchor grid, arange(width) + 0.5), or None. The Range's length is
        that dim (a dim below 2^24 is a float exactly)."""
        kind, node, where = traversal.definition(name, self.scope)
        if kind != "node" or where is not self.scope or node.op_type != "Cast" or not is_default_domain(node.domain) \
                or attribute_int(node, "to") not in _FLOATS:
            return None
        return self.scalar(node.input[0])


def _rewrite_scope(scope: traversal.Scope, taken: set) -> list[str]:
    writer, nodes, done = _Writer(scope, taken), [], []
    for node in scope.body.node:
        positions, one_d = READERS.get(node.op_type, ((), True)) if is_default_domain(node.domain) else ((), True)
        after = writer.range_as_long(node) if node.op_type == "Range" and positions else []
        changed = bool(after)
        for i in positions:
            if i >= len(node.input) or not node.input[i]:
                continue
            if one_d:
                new = writer.one_element(node.input[i])
            else:
                got = writer.scalar(node.input[i])
                new = got[0] if got is not None and got[1] else None
            if new is not None:
                node.input[i] = new
                changed = True
        nodes += writer.nodes + [node] + after
        writer.nodes = []
        if changed:
            done.append(node.name or node.output[0])
    if done:
        del scope.body.node[:]
        scope.body.node.extend(nodes)
    return done


def dims_as_scalars(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place the dim expressions ``READERS`` read (module docstring); one note."""
    del inferred  # (the forms are read from the nodes)
    taken = taken_names(model)
    done = []
    for scope in list(traversal.iter_scopes(model)):
        done += _rewrite_scope(scope, taken)
    if not done:
        return []
    return [(f"{len(done)} node(s) reading dims of a Shape (Slice starts / ends, ConstantOfShape, Range) read "
             f"them computed on scalars, the form whose shape {release} keeps: {first_few(repr(n) for n in done)}")]


def scalar_constant_of_shape(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Each ConstantOfShape whose shape is a constant with no element (a scalar out) as a Constant
    of its value, in place (form ``scalar_as_constant``): TVM 0.27 broadcasts the value, a
    1-element tensor, to the empty shape and refuses ("broadcast_to expects the input shape to have
    the number of ndim at least as the input tensor's"; torch's exports of a scalar mask)."""
    del inferred
    done = []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            if node.op_type != "ConstantOfShape" or not is_default_domain(node.domain):
                continue
            shape = constant_array(node.input[0], scope)
            if shape is None or shape.size != 0:
                continue
            given = next((a.t for a in node.attribute if a.name == "value"), None)
            value = np.zeros((), np.float32) if given is None else numpy_helper.to_array(given).reshape(())
            node.op_type = "Constant"
            del node.input[:]
            del node.attribute[:]
            node.attribute.append(helper.make_attribute("value", numpy_helper.from_array(value)))
            done.append(node.name or node.output[0])
    if not done:
        return []
    return [(f"{len(done)} ConstantOfShape node(s) of an empty shape written as a Constant of their scalar "
             f"value, which {release} loads: {first_few(repr(n) for n in done)}")]


def _from_shapes(name: str, scope: traversal.Scope, seen: dict) -> bool:
    """Whether ``name`` is computed from Shape / Size outputs and constants only, a Shape among them
    (memo ``seen``: name -> (from shapes and constants only, a Shape reached))."""
    return _cone(name, scope, seen) == (True, True)


def _cone(name: str, scope: traversal.Scope, seen: dict) -> tuple[bool, bool]:
    if name not in seen:
        seen[name] = (False, False)  # (a cycle cannot happen in a valid graph)
        kind, node, where = traversal.definition(name, scope)
        if kind == "initializer":
            seen[name] = (True, False)
        elif kind == "node" and node.op_type in ("Shape", "Size"):
            seen[name] = (True, True)
        elif kind == "node" and not any(True for _ in traversal.subgraphs(node)):
            parts = [_cone(i, where, seen) for i in node.input if i]
            seen[name] = (all(p for p, _ in parts), any(s for _, s in parts))
    return seen[name]


def _no_op(node: onnx.NodeProto, ranks: dict, scope: traversal.Scope) -> bool:
    """``node`` is an Identity, or a Reshape of a scalar to the shape []."""
    if node.op_type == "Identity":
        return True
    if node.op_type != "Reshape" or ranks.get(node.input[0]) != 0:
        return False
    shape = constant_array(node.input[1], scope)
    return shape is not None and shape.size == 0


def shape_no_ops_bypassed(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Each Identity, and Reshape of a scalar to [], of a value computed from shapes (a Shape and
    constants) taken out, in place, its readers reading its input (form ``no_ops_bypassed``):
    TVM 0.27 refuses an Identity of a shape ("Node ... cannot handle ShapeExpr inputs") and a Reshape
    of a dim it keeps as a scalar ("Reshape requires the input data to be Tensor"), the Paddle
    exports' way between a Shape and the shape of a Reshape. Not when its output is a graph's output
    or read inside a subgraph."""
    from rewriter.graph.model_index import value_types

    ranks = {n: len(t.tensor_type.shape.dim) for n, t in value_types(model, inferred).items()
             if t.HasField("tensor_type") and t.tensor_type.HasField("shape")}
    scopes = list(traversal.iter_scopes(model))
    read_inside = {i for s in scopes if s.parent is not None for n in s.body.node for i in n.input}
    done = []
    for scope in scopes:
        outputs = set(scope.body.output) if scope.is_function else {o.name for o in scope.body.output}
        seen, renamed, kept = {}, {}, []
        for node in scope.body.node:
            node.input[:] = [renamed.get(i, i) for i in node.input]
            if (is_default_domain(node.domain) and node.input and _no_op(node, ranks, scope)
                    and node.output[0] not in outputs and node.output[0] not in read_inside
                    and _from_shapes(node.input[0], scope, seen)):
                renamed[node.output[0]] = node.input[0]
                done.append(node.name or node.output[0])
                continue
            kept.append(node)
        if renamed:
            del scope.body.node[:]
            scope.body.node.extend(kept)
    if not done:
        return []
    return [(f"{len(done)} Identity / Reshape node(s) of shape values taken out (their readers read their input), "
             f"which {release} refuses on a shape: {first_few(repr(n) for n in done)}")]


# the ops TVM 0.27's Relax ONNX frontend gives a shape to as it is (onnx_frontend.py's
# shape_compatible_ops); any other refuses one: "Node ... cannot handle ShapeExpr inputs"
SHAPE_READERS = frozenset({"Reshape", "Resize", "ConstantOfShape", "Gather", "Slice", "Shape", "Expand", "Concat",
                           "Equal", "Where", "Cast", "CastLike", "Squeeze"})


def shapes_cast_for_readers(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Each Shape whose output an op outside ``SHAPE_READERS`` reads (whisper's Sub of the samples'
    count from 480000): that reader reads a Cast of it to int64 instead (the same values; TVM makes
    the Cast's output a tensor, or a constant when the dims are static), in place (form
    ``cast_for_readers``)."""
    del inferred
    taken = taken_names(model)
    done = []
    for scope in traversal.iter_scopes(model):
        shapes = {node.output[0] for node in scope.body.node
                  if node.op_type == "Shape" and is_default_domain(node.domain) and node.output}
        casts, nodes = {}, []
        for node in scope.body.node:
            if not (is_default_domain(node.domain) and node.op_type in SHAPE_READERS):
                for i, name in enumerate(node.input):
                    if name in shapes:
                        if name not in casts:
                            casts[name] = fresh_name(taken, f"{name}_int64")
                            nodes.append(helper.make_node("Cast", [name], [casts[name]], to=onnx.TensorProto.INT64,
                                                          name=fresh_name(taken, casts[name])))
                        node.input[i] = casts[name]
                        done.append(node.name or node.output[0])
            nodes.append(node)
        if casts:
            del scope.body.node[:]
            scope.body.node.extend(nodes)
    if not done:
        return []
    return [(f"{len(done)} node(s) reading a Shape with an op {release} refuses a shape for read a Cast of it to "
             f"int64 instead: {first_few(repr(n) for n in done)}")]


def scalar_reshapes_unsqueezed(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Each Reshape of a scalar computed from shapes to [1] (or [-1]) written as an Unsqueeze, in
    place (form ``scalar_unsqueezed``): TVM 0.27 holds such a scalar as a PrimValue and refuses to
    reshape it ("Reshape requires the input data to be Tensor. However, the given one is
    ir.PrimType": the GroupQueryAttention lowering's Reshape of total_sequence_length, which
    onnxruntime-genai's Llama computes from the mask's Shape), and reads an Unsqueeze of one as a
    shape, of int64 only ("the value in ShapeType can only have dtype of int64"): another integer
    type goes to int64 and back around the Unsqueeze."""
    from rewriter.graph.model_index import value_types

    types = {n: t.tensor_type for n, t in value_types(model, inferred).items() if t.HasField("tensor_type")}
    taken = taken_names(model)
    done = []
    for scope in traversal.iter_scopes(model):
        seen, nodes, changed = {}, [], False
        for node in scope.body.node:
            t = types.get(node.input[0]) if node.op_type == "Reshape" and node.input else None
            shape = constant_array(node.input[1], scope) if t is not None and len(node.input) > 1 else None
            if (shape is None or shape.reshape(-1).tolist() not in ([1], [-1]) or not t.HasField("shape")
                    or len(t.shape.dim) != 0 or not is_default_domain(node.domain)
                    or not _from_shapes(node.input[0], scope, seen)):
                nodes.append(node)
                continue
            writer = _Writer(scope, taken)
            x, out = node.input[0], node.output[0]
            if t.elem_type != onnx.TensorProto.INT64:
                x = writer._node("Cast", [x], f"{out}_int64", to=onnx.TensorProto.INT64)
            wide = writer.unsqueezed(x, out)
            if t.elem_type != onnx.TensorProto.INT64:
                writer.nodes.append(helper.make_node("Cast", [wide], [out], name=node.name, to=t.elem_type))
            else:
                writer.nodes[-1].output[0] = out  # the Unsqueeze writes the Reshape's output
                writer.nodes[-1].name = node.name
            nodes += writer.nodes
            done.append(node.name or out)
            changed = True
        if changed:
            del scope.body.node[:]
            scope.body.node.extend(nodes)
    if not done:
        return []
    return [(f"{len(done)} Reshape node(s) of a scalar computed from shapes to one element written as an Unsqueeze, "
             f"which {release} reads: {first_few(repr(n) for n in done)}")]
