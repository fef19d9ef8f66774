"""Shape arithmetic on partly symbolic shapes: what exporters compute from ``Shape(x)``.

Legacy exports build shapes at run time: ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``,
or ``Shape -> Gather -> Cast`` for a channel count. With a symbolic batch dim the folder
cannot fold the whole chain, but each element is either a known int or "dim i of x". This
pass follows such shape vectors (Shape, Gather on axis 0, Unsqueeze/Squeeze of axis 0,
Concat on axis 0, Slice with step 1, Identity, Cast between int64/int32, integer constants;
any other short integer vector or scalar of known length, such as ``Mul(Gather(Shape(x), 0), 4)``,
is a run-time element) and:

- replaces a value whose elements are all known with a constant (``Gather(Shape(x), 1)`` on
  ``x: [N, 8, ...]`` is 8);
- gives a Reshape a constant shape when every element is known or is the same dim of the
  Reshape's own input at the same position (it becomes 0, "copy this dim"; not with
  ``allowzero=1``), so ``Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))`` becomes
  ``Reshape(x, [0, -1])``;
- when exactly one element is only known at run time and the others are known positive sizes
  (ints > 0, or copies of static dims), that element becomes -1: wherever the original
  Reshape is valid, -1 works out to the same value (``[N * 4, 2]`` -> ``[-1, 2]``). Not next
  to a copied symbolic dim, which could be 0 at run time.

The dims of a Reshape's or an Expand's output are worked out from its shape vector where ONNX's
inference cannot tell them (the vector is computed at run time), so the batch dim's name
reaches the shape chains further down (MobileViT-v2's ``Expand(x, Shape(y))``).

Two dims are the same when they are the same dim of the same value, or the same named
symbolic dim (ONNX: equal names are equal sizes). Values that are graph outputs are kept.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_inference import fill_shape, infer_node
from rewriter.optimize.values import add_constant
from rewriter.optimize.scopes import graphs_and_functions
from rewriter.graph.schemas import is_default_domain

__all__ = ["FoldShapeArithmeticPass"]

logger = logging.getLogger(__name__)

_INTS = frozenset({ir.DataType.INT64, ir.DataType.INT32})
_MAX = 64  # shape vectors are short


def _dim_key(value: ir.Value, i: int):
    dim = value.shape[i]
    if isinstance(dim, int):
        return dim
    if isinstance(dim, ir.SymbolicDim) and dim.value:
        return ("sym", dim.value)
    return ("pos", id(value), i)


def _ints(value: ir.Value | None):
    if value is None or value.is_graph_input() or value.const_value is None:
        return None
    tensor = value.const_value
    if tensor.dtype not in _INTS or tensor.size > _MAX or len(tensor.shape) > 1:
        return None
    array = tensor.numpy()
    return [int(v) for v in array.reshape(-1)], array.ndim == 0


def _opaque(value: ir.Value | None):
    """A short integer vector (or scalar) only known at run time: one unknown element per entry."""
    if value is None or value.dtype not in _INTS or value.shape is None or not value.shape.is_static():
        return None
    dims = [int(d) for d in value.shape.dims]
    if len(dims) > 1 or (dims and dims[0] > _MAX):
        return None
    n = dims[0] if dims else 1
    return [("opaque", id(value), i) for i in range(n)], not dims


def _attr_ints(node: ir.Node, name: str):
    attr = node.attributes.get(name)
    if attr is None or attr.is_ref():
        return None
    return list(attr.as_ints()) if attr.type == ir.AttributeType.INTS else [attr.as_int()]


def _attr_int(node: ir.Node, name: str, default):
    attr = node.attributes.get(name)
    if attr is None:
        return default
    if attr.is_ref():
        return None
    return attr.as_int()


_ARITHMETIC = ("Add", "Sub", "Mul", "Div")


def _fits(elements: list[int], dtype: ir.DataType) -> bool:
    info = np.iinfo(dtype.numpy())
    return all(info.min <= e <= info.max for e in elements)


def _aligned(a, b):
    """Two shape vectors as element lists of one length (a scalar or a 1-element vector
    broadcasts), and whether the result is a scalar; None when they do not broadcast."""
    (x, x_scalar), (y, y_scalar) = a, b
    if len(x) != len(y):
        if x_scalar and len(x) == 1:
            x = x * len(y)
        elif y_scalar and len(y) == 1:
            y = y * len(x)
        else:
            return None
    return x, y, x_scalar and y_scalar


def _arithmetic(op: str, a, b):
    """``a op b`` on shape vectors whose elements are all known ints (a scalar broadcasts):
    exact integer arithmetic; Div only of non-negative ints by positive ones (where C's
    truncating division, ONNX Runtime's, and floor division agree)."""
    if a is None or b is None or not all(isinstance(e, int) for e in a[0] + b[0]):
        return None
    aligned = _aligned(a, b)
    if aligned is None:
        return None
    x, y, scalar = aligned
    if op == "Div" and not all(p >= 0 and q > 0 for p, q in zip(x, y)):
        return None
    result = [p + q if op == "Add" else p - q if op == "Sub" else p * q if op == "Mul" else p // q
              for p, q in zip(x, y)]
    return result, scalar


def _equal(a, b):
    """``a == b`` on shape vectors when every pair is decided: two known ints compare; a dim
    (of a Shape: never negative) differs from a negative int (``x.expand(N, -1)`` exports
    ``Where(Equal(shape, -1), 1, shape)``). Run-time values of other ops decide nothing."""
    if a is None or b is None:
        return None
    aligned = _aligned(a, b)
    if aligned is None:
        return None
    x, y, scalar = aligned
    result = []
    for p, q in zip(x, y):
        if isinstance(p, int) and isinstance(q, int):
            result.append(p == q)
        elif isinstance(p, int) and p < 0 and q[0] != "opaque" or isinstance(q, int) and q < 0 and p[0] != "opaque":
            result.append(False)
        else:
            return None
    return result, scalar


class FoldShapeArithmeticPass(ir.passes.InPlacePass):
    """Fold shape vectors built from partly symbolic shapes (see the module doc)."""

    def __init__(self):
        super().__init__()
        self.folded = 0
        self.reshapes = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.folded = self.reshapes = 0
        opset = model.opset_imports.get("", None)
        for graph in graphs_and_functions(model):
            if isinstance(graph, ir.Function):
                opset = graph.opset_imports.get("", opset)
            self._graph(graph, opset)
        modified = bool(self.folded or self.reshapes)
        if modified:
            logger.info("folded %d shape value(s), gave %d Reshape(s) a constant shape", self.folded, self.reshapes)
        return ir.passes.PassResult(model, modified=modified)

    # ------------------------------------------------------------ the walk
    def _graph(self, graph, opset: int | None) -> None:
        self._vectors: dict = {}
        outputs = frozenset(graph.outputs)
        for node in list(graph):
            if not is_default_domain(node.domain):
                continue
            if node.op_type == "Reshape":
                self._reshape(graph, node)
            if opset is not None:  # the dims after a Reshape given a constant shape are known now
                infer_node(node, opset)
            if node.op_type == "Reshape":
                self._reshape_dims(node)
            elif node.op_type == "Expand":
                self._expand_dims(node)
            if len(node.outputs) != 1 or node.op_type == "Reshape":
                continue
            found = self._evaluate(node)
            if found is None:
                continue
            out = node.outputs[0]
            self._vectors[out] = found
            elements, scalar = found
            if (node.op_type != "Constant" and out not in outputs and all(isinstance(e, int) for e in elements)
                    and (out.dtype in _INTS and _fits(elements, out.dtype)
                         or out.dtype == ir.DataType.BOOL and node.op_type == "Equal")):
                array = np.array(elements if not scalar else elements[0], dtype=out.dtype.numpy())
                out.replace_all_uses_with(add_constant(graph, node, array, f"{out.name}_folded"))
                self.folded += 1

    def _vector(self, value: ir.Value | None):
        if value is None:
            return None
        found = self._vectors.get(value)
        if found is None:
            found = _ints(value)
        if found is None:
            found = _opaque(value)
        return found

    def _evaluate(self, node: ir.Node):
        op, inputs = node.op_type, node.inputs
        if op == "Shape":
            x = inputs[0] if inputs else None
            if x is None or x.shape is None:
                return None
            start, end = _attr_int(node, "start", 0), _attr_int(node, "end", None)
            if start is None or (end is None and "end" in node.attributes):
                return None
            keys = [_dim_key(x, i) for i in range(len(x.shape))]
            return keys[start:end], False
        if op in ("Identity", "Cast"):
            found = self._vector(inputs[0] if inputs else None)
            if op == "Cast" and (found is None or ir.DataType(_attr_int(node, "to", 0) or 0) not in _INTS):
                return None
            if op == "Cast" and inputs[0].dtype not in _INTS:
                return None
            return found
        if op == "Gather":
            data, idx = self._vector(inputs[0]), _ints(inputs[1]) if len(inputs) > 1 else None
            if data is None or idx is None or data[1] or _attr_int(node, "axis", 0) != 0:
                return None
            elements, n = data[0], len(data[0])
            if not all(-n <= i < n for i in idx[0]):
                return None
            return [elements[i] for i in idx[0]], idx[1]
        if op in ("Unsqueeze", "Squeeze"):
            data = self._vector(inputs[0] if inputs else None)
            axes = _ints(inputs[1])[0] if len(inputs) > 1 and _ints(inputs[1]) else _attr_ints(node, "axes")
            if data is None:
                return None
            if op == "Unsqueeze" and data[1] and axes in ([0], [-1]):
                return data[0], False
            if op == "Squeeze" and not data[1] and len(data[0]) == 1 and axes in (None, [0], [-1]):
                return data[0], True
            return None
        if op == "Concat":
            if _attr_int(node, "axis", None) not in (0, -1):
                return None
            parts = [self._vector(v) for v in inputs]
            if any(p is None or p[1] for p in parts):
                return None
            return [e for p in parts for e in p[0]], False
        if op == "Slice":
            data = self._vector(inputs[0] if inputs else None)
            params = [_ints(v) if v is not None else None for v in list(inputs[1:5]) + [None] * (5 - len(inputs))]
            starts, ends, axes, steps = params
            if data is None or data[1] or starts is None or ends is None or len(starts[0]) != 1 or len(ends[0]) != 1:
                return None
            if (len(inputs) > 3 and inputs[3] is not None and (axes is None or axes[0] not in ([0], [-1]))) or \
                    (len(inputs) > 4 and inputs[4] is not None and (steps is None or steps[0] != [1])):
                return None
            return data[0][starts[0][0]:ends[0][0]], False
        if op == "Constant":
            return _ints(node.outputs[0])
        if op in _ARITHMETIC and len(inputs) == 2:
            return _arithmetic(op, self._vector(inputs[0]), self._vector(inputs[1]))
        if op == "Equal" and len(inputs) == 2:
            return _equal(self._vector(inputs[0]), self._vector(inputs[1]))
        return None

    def _reshape_dims(self, node: ir.Node) -> None:
        """The dims of a Reshape's output from its shape vector when ONNX's inference could not
        tell them (a shape computed at run time): its rank is the vector's length; an element
        known as an int > 0 is that dim, 0 copies the input's dim, a named symbolic dim is
        that dim; the others (-1, run-time values) are unknown."""
        data = node.inputs[0] if node.inputs else None
        found = self._vector(node.inputs[1] if len(node.inputs) > 1 else None)
        out = node.outputs[0]
        if data is None or found is None or found[1] or _attr_int(node, "allowzero", 0) != 0:
            return
        dims = []
        for p, e in enumerate(found[0]):
            if isinstance(e, int):
                copied = e == 0 and data.shape is not None and p < len(data.shape)
                dims.append(e if e > 0 else data.shape.dims[p] if copied else ir.SymbolicDim(None))
            elif e[0] == "sym":
                dims.append(ir.SymbolicDim(e[1]))
            else:
                dims.append(ir.SymbolicDim(None))
        if out.type is None and data.type is not None:
            out.type = data.type
        fill_shape(out, ir.Shape(dims))

    def _expand_dims(self, node: ir.Node) -> None:
        """The dims of an Expand's output from its shape vector when ONNX's inference could not
        tell them (``Expand(x, Shape(y))``, MobileViT-v2's attention): the two shapes broadcast,
        aligned on the right. Where the input's dim is 1, the vector's element is the dim (an
        int, or a named symbolic dim); where the input's dim is a static d > 1, it is d; where
        both are the same named dim, that dim; else unknown."""
        data = node.inputs[0] if node.inputs else None
        found = self._vector(node.inputs[1] if len(node.inputs) > 1 else None)
        out = node.outputs[0]
        if data is None or data.shape is None or found is None or found[1]:
            return
        elements, rank = found[0], len(data.shape)
        size = max(rank, len(elements))
        ins = [1] * (size - rank) + list(data.shape.dims)
        wanted = [1] * (size - len(elements)) + list(elements)
        dims = []
        for d, e in zip(ins, wanted):
            named = isinstance(e, tuple) and e[0] == "sym"
            if isinstance(d, int) and d != 1:
                dims.append(d)
            elif d == 1 and isinstance(e, int) and e >= 1:
                dims.append(e)
            elif d == 1 and named:
                dims.append(ir.SymbolicDim(e[1]))
            elif isinstance(d, ir.SymbolicDim) and d.value and (named and e[1] == d.value or e == 1):
                dims.append(ir.SymbolicDim(d.value))
            elif isinstance(d, ir.SymbolicDim) and isinstance(e, int) and e > 1:
                dims.append(e)
            else:
                dims.append(ir.SymbolicDim(None))
        if out.type is None and data.type is not None:
            out.type = data.type
        fill_shape(out, ir.Shape(dims))

    def _reshape(self, graph, node: ir.Node) -> None:
        data = node.inputs[0] if node.inputs else None
        shape = node.inputs[1] if len(node.inputs) > 1 else None
        found = self._vector(shape)
        if data is None or found is None or found[1] or _attr_int(node, "allowzero", 0) != 0:
            return
        elements = found[0]
        if all(isinstance(e, int) for e in elements) or data.shape is None:
            return  # already constant, or nothing to compare with
        rank = len(data.shape)
        new, free = [], []
        for p, e in enumerate(elements):
            if isinstance(e, int):
                new.append(e)
            elif p < rank and _dim_key(data, p) == e:
                new.append(0)
            else:
                free.append(p)
                new.append(-1)
        if free:
            # One element only known at run time: -1 gives the same value whenever the original
            # Reshape is valid, if the other elements multiply to a non-zero known size.
            static = [d if isinstance(d, int) else None for d in data.shape.dims]
            sizes = [v if v > 0 else (static[p] if v == 0 and p < rank else None) for p, v in enumerate(new)
                     if p not in free]
            if len(free) != 1 or -1 in [v for p, v in enumerate(new) if p not in free] or \
                    any(v is None or v <= 0 for v in sizes):
                return
        array = np.array(new, dtype=np.int64)
        node.replace_input_with(1, add_constant(graph, node, array, f"{node.outputs[0].name}_shape_folded"))
        self.reshapes += 1
