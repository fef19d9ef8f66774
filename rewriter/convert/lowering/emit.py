"""Writing the standard-ONNX nodes that replace one node: an op builder valid at one default-domain
opset (>= 13), constants (initializers in a graph, Constant nodes in a function, shared per scope)
and the few sequential chains exactness needs (sums, maxima, first-maximum indices in the order
ONNX Runtime's kernels take them)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewriter.graph.names import fresh_name

__all__ = ["MIN_OPSET", "ScopeWriter", "Emitter", "NewOutputType", "F32", "F64", "I64", "BOOL", "STR", "negative_zeros"]

MIN_OPSET = 13  # Squeeze/Unsqueeze/ReduceSum axes as inputs, Softmax on one axis

F32, F64, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
BOOL, STR = TensorProto.BOOL, TensorProto.STRING


def negative_zeros(values) -> bool:
    """Whether a float array holds -0.0 (then a selection of it needs :meth:`Emitter.select`)."""
    arr = np.asarray(values)
    return arr.dtype.kind == "f" and bool(((arr == 0) & np.signbit(arr)).any())


@dataclasses.dataclass(frozen=True)
class NewOutputType:
    """A main-graph output whose type a lowering changes (ZipMap's maps become their tensor): the
    new type, the doc_string and model metadata entry that keep what the old type said, and the
    line that warns of it."""

    name: str
    type: onnx.TypeProto
    doc: str
    metadata: tuple[str, str]
    warning: str


class ScopeWriter:
    """What the nodes lowered in one graph or function share: the model's used names, the scope's
    constants (deduplicated by value), the initializers to add (graphs only), the graph outputs
    whose type changes."""

    def __init__(self, used: set, in_function: bool, opset: int, final_opset: int | None = None):
        self.used = used
        self.in_function = in_function
        self.opset = opset
        # the opset the model goes to next (lower_ops converts it there): forms it lacks are avoided
        self.final_opset = opset if final_opset is None else final_opset
        self.initializers: list[TensorProto] = []
        self.retyped: list[NewOutputType] = []
        self._consts: dict[tuple, str] = {}

    def fresh(self, hint: str) -> str:
        return fresh_name(self.used, hint)


class Emitter:
    """Builds the nodes that replace one node, in order, valid at ``writer.opset``."""

    def __init__(self, writer: ScopeWriter, prefix: str):
        self.writer = writer
        self.opset = writer.opset
        self.final_opset = min(writer.opset, writer.final_opset)
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []

    # -- names and constants ------------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        return self.writer.fresh(f"{self.prefix}_{hint}")

    def const(self, value, dtype=None, hint: str = "const") -> str:
        """A constant holding ``value`` (numpy array or scalar, of ``dtype`` when given)."""
        arr = np.asarray(value, dtype=dtype) if dtype is not None else np.asarray(value)
        if arr.dtype.kind in "USO":
            arr = np.asarray(arr, dtype=object)
            key = ("str", arr.shape, tuple(str(v) for v in arr.reshape(-1)))
        else:
            key = (arr.dtype.str, arr.shape, arr.tobytes())
        w = self.writer
        if key in w._consts:
            return w._consts[key]
        name = w.fresh(f"{self.prefix}_{hint}")
        tensor = numpy_helper.from_array(arr, name)
        if w.in_function:
            self.nodes.append(helper.make_node("Constant", [], [name], name=w.fresh(f"{name}_node"), value=tensor))
        else:
            w.initializers.append(tensor)
        w._consts[key] = name
        return name

    # -- nodes --------------------------------------------------------------------------------------

    def op(self, op_type: str, inputs, *, out: str | None = None, n_out: int = 1, outs=None, **attrs):
        """Add one default-domain node; returns its output name (or names when ``n_out`` > 1)."""
        if outs is None:
            outs = [out] if out is not None and n_out == 1 else [self.fresh(op_type.lower()) for _ in range(n_out)]
        node = helper.make_node(op_type, list(inputs), list(outs), name=self.fresh(op_type), **attrs)
        self.nodes.append(node)
        return outs[0] if n_out == 1 else list(outs)

    def ints(self, values) -> str:
        return self.const(np.asarray(values, dtype=np.int64), hint="axes")

    def cast(self, x: str, to: int, out: str | None = None) -> str:
        return self.op("Cast", [x], out=out, to=to)

    def unsqueeze(self, x: str, axes, out: str | None = None) -> str:
        return self.op("Unsqueeze", [x, self.ints(axes)], out=out)

    def squeeze(self, x: str, axes, out: str | None = None) -> str:
        return self.op("Squeeze", [x, self.ints(axes)], out=out)

    def reduce(self, op_type: str, x: str, axes, keepdims: int = 1, out: str | None = None) -> str:
        """ReduceSum/Max/Min over ``axes``: axes are an input from 13 (ReduceSum) or 18 (others)."""
        as_input = op_type == "ReduceSum" or self.opset >= 18
        if as_input:
            return self.op(op_type, [x, self.ints(axes)], out=out, keepdims=keepdims)
        return self.op(op_type, [x], out=out, axes=list(axes), keepdims=keepdims)

    def columns(self, x: str, axis: int, n: int) -> list[str]:
        """``x`` split along ``axis`` into ``n`` pieces of size 1 (the axis kept)."""
        if n == 1:
            return [x]
        return self.op("Split", [x, self.ints([1] * n)], n_out=n, axis=axis)

    def concat(self, parts: list[str], axis: int, out: str | None = None) -> str:
        if len(parts) == 1:
            return self.op("Identity", parts, out=out) if out is not None else parts[0]
        return self.op("Concat", parts, out=out, axis=axis)

    def identity(self, x: str, out: str) -> str:
        return self.op("Identity", [x], out=out)

    def negative_zero(self, x: str, dtype=np.float32) -> str:
        """Whether each element of float ``x`` is -0.0 (1 / -0.0 is -inf)."""
        zero, one = self.const(np.zeros((), dtype), hint="zero"), self.const(np.ones((), dtype), hint="one")
        return self.op("And", [self.op("Equal", [x, zero]), self.op("Less", [self.op("Div", [one, x]), zero])])

    def select(self, cond: str, a: str, b: str, *, a_signed: bool = True, b_signed: bool = True, dtype=np.float32,
               out: str | None = None) -> str:
        """cond ? a : b for floats, -0.0 included: onnxruntime's Where returns +0.0 where it takes a
        zero from ``a`` (it merges the two selections by testing for zero), so a -0.0 wanted is taken
        from the false side. ``a_signed``/``b_signed``: whether that side can hold -0.0 at all."""
        if not a_signed:
            return self.op("Where", [cond, a, b], out=out)
        picked = self.op("Where", [cond, a, b])
        wanted = self.op("And", [cond, self.negative_zero(a, dtype)])
        if b_signed:
            wanted = self.op("Or", [wanted, self.op("And", [self.op("Not", [cond]), self.negative_zero(b, dtype)])])
        minus_zero = self.const(-np.zeros((), dtype), hint="minus_zero")
        return self.op("Where", [self.op("Not", [wanted]), picked, minus_zero], out=out)

    # -- chains in a kernel's order -------------------------------------------------------------------

    def sequential_sum(self, parts: list[str], start: str | None = None) -> str:
        """((start + p0) + p1) + ...: float additions in this order (start omitted: p0 + p1 + ...)."""
        acc = start
        for p in parts:
            acc = p if acc is None else self.op("Add", [acc, p])
        return acc

    def running_max(self, parts: list[str], start: str) -> str:
        """m = start; m = (m < p) ? p : m for each p in order: std::max's rule (NaN parts skipped)."""
        acc = start
        for p in parts:
            acc = self.op("Where", [self.op("Less", [acc, p]), p, acc])
        return acc

    def first_argmax(self, parts: list[str]) -> str:
        """The index (int64, parts' shape) of the first part holding the maximum: ``best = p0; if
        (p_j > best) {best = p_j; index = j}``, NaN never wins after the first."""
        best, index = parts[0], None
        zero = self.const(np.zeros((), np.int64), hint="zero")
        for j, p in enumerate(parts[1:], start=1):
            greater = self.op("Greater", [p, best])
            best = self.op("Where", [greater, p, best])
            index = self.op("Where", [greater, self.const(np.array(j, np.int64), hint="index"),
                                      zero if index is None else index])
        if index is None:  # one part: index 0 in its shape
            index = self.op("Expand", [zero, self.op("Shape", [parts[0]])])
        return index
