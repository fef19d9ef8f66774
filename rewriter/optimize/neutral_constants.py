"""Drop arithmetic with a neutral constant: ``x * 1``, ``x / 1``, ``x + 0``, ``0 + x``, ``x - 0``,
``x and True``, ``x or False``.

onnxscript's no-op rules cover scalar constants; exporters also write whole neutral tensors
(an untrained LayerNorm's ones and zeros, a ``1.0`` per channel). A node goes when its
constant operand is all ones (Mul, Div) or all zeros (Add, Sub on the right), of the other
operand's type (And with all true, Or with all false, on booleans: the causal masks of
dynamo exports start from ``new_ones & ...``), and broadcasting it cannot grow the other
operand (each of its dims is 1 or equal to a static dim of the other operand at the same
place from the right).
Shapes come from the values (ONNX shape inference, or the optimize pipeline's folder, which
infers node by node): an operand of unknown rank is left alone. ``x + 0`` turns ``-0.0`` into
``+0.0``; the two compare equal. Constants that are graph inputs (overridable) stay; a result
that is a graph output goes only when the value it passes on is made by a node of the same
graph and read by nothing else, which then takes the output's name (its name is the
interface: scikit-learn pipelines' ``Mul(probabilities, 1.0)`` before the output). The Mul by
gamma and the Add of beta after a written-out LayerNorm (``Div(Sub(x, mean), Sqrt(...))``) stay
when both are 1-D: ONNX Runtime's LayerNormalization fusion needs them (and fuses no other shape);
so does the 1-D Mul after a written-out RMS norm (``x / sqrt(mean(x^2) + eps)``, T5's and Llama's
legacy exports) for its SimplifiedLayerNormalization fusion.
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.graph.schemas import is_default_domain

__all__ = ["RemoveNeutralArithmeticPass"]

_NEUTRAL = {"Mul": (1, (0, 1)), "Div": (1, (1,)), "Add": (0, (0, 1)), "Sub": (0, (1,)),
            "And": (True, (0, 1)), "Or": (False, (0, 1))}
_MAX_ELEMENTS = 1 << 16  # neutral tensors are small (per channel); bigger ones are not read


def _constant(value: ir.Value | None):
    if value is None or value.is_graph_input() or value.const_value is None:
        return None
    if value.const_value.size > _MAX_ELEMENTS:
        return None
    return value.const_value.numpy()


def _keeps_shape(x: ir.Value, constant: np.ndarray, out: ir.Value) -> bool:
    """Broadcasting ``constant`` against ``x`` leaves x's shape and type as they are (a scalar
    constant never grows ``x``, whatever its shape)."""
    if x.dtype is None or (out.dtype is not None and x.dtype != out.dtype) or constant.dtype != x.dtype.numpy():
        return False
    if constant.ndim == 0:
        return True
    if x.shape is None or constant.ndim > len(x.shape):
        return False
    dims = list(x.shape.dims)[len(x.shape) - constant.ndim:]
    return all(c == 1 or (isinstance(d, int) and d == c) for c, d in zip(constant.shape, dims))


def _produced_by(value: ir.Value | None, op: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op and is_default_domain(node.domain) else None


def _normalized(value: ir.Value | None) -> bool:
    """``value`` is ``(x - mean) / sqrt(var + eps)``: a LayerNorm written out, as exporters do,
    with an ``x`` that no Transpose makes (ONNX Runtime's transpose optimizer moves such a
    Transpose past the LayerNorm, which then reduces a non-last axis and is never fused: the
    channels-last LayerNorms of a ConvNeXt)."""
    div = _produced_by(value, "Div")
    if div is None or len(div.inputs) != 2 or _produced_by(div.inputs[1], "Sqrt") is None:
        return False
    sub = _produced_by(div.inputs[0], "Sub")
    return sub is not None and len(sub.inputs) == 2 and _produced_by(sub.inputs[0], "Transpose") is None


def _rms_normalized(value: ir.Value | None) -> bool:
    """``value`` is ``x / sqrt(mean(x^2) + eps)``, written as ``Div(x, Sqrt(...))`` or
    ``Mul(x, Div(1, Sqrt(...)))`` (torch's legacy export of T5's and Llama's RMS norm), where
    ONNX Runtime's SimplifiedLayerNormalization fusion looks for a Mul by a 1-D scale after it
    (it does not fuse the ``Reciprocal`` form the dynamo exporter writes)."""
    def root_mean_square_of(x, sqrt_value) -> bool:
        if _produced_by(x, "Sub") is not None:
            return False  # a LayerNorm's centered value: what _normalized says is what ORT fuses
        sqrt = _produced_by(sqrt_value, "Sqrt")
        add = _produced_by(sqrt.inputs[0], "Add") if sqrt is not None and sqrt.inputs else None
        if add is None:
            return False
        for v in add.inputs:
            mean = _produced_by(v, "ReduceMean")
            power = _produced_by(mean.inputs[0], "Pow") if mean is not None and mean.inputs else None
            if power is not None and power.inputs and power.inputs[0] is x:
                return True
        return False

    div = _produced_by(value, "Div")
    if div is not None and len(div.inputs) == 2:
        return root_mean_square_of(div.inputs[0], div.inputs[1])
    mul = _produced_by(value, "Mul")
    if mul is None or len(mul.inputs) != 2:
        return False
    for x, r in (mul.inputs, mul.inputs[::-1]):
        inverse = _produced_by(r, "Div")
        if inverse is not None and len(inverse.inputs) == 2 and root_mean_square_of(x, inverse.inputs[1]):
            return True
    return False


def _one_dim(value: ir.Value | None) -> bool:
    return value is not None and value.const_value is not None and len(value.const_value.shape) == 1


def _layer_norm_tail(op: str, other: ir.Value | None, constant: ir.Value | None) -> bool:
    """A Mul by gamma after a written-out LayerNorm, or the Add of beta after that Mul, where
    ONNX Runtime's LayerNormalization fusion would take them: it looks for both, even when
    gamma is ones and beta zeros (an untrained export), and takes only a 1-D gamma and beta
    (a channels-first LayerNorm's ``[C, 1, 1]`` ones fuse into nothing, so they go)."""
    if not _one_dim(constant):
        return False
    if op == "Mul":
        return _normalized(other) or _rms_normalized(other)
    if op == "Add":
        mul = _produced_by(other, "Mul")
        return mul is not None and len(mul.inputs) == 2 and any(
            _normalized(v) and _one_dim(w) for v, w in (mul.inputs, mul.inputs[::-1]))
    return False


class RemoveNeutralArithmeticPass(NodeRewritePass):
    """Remove Mul/Div by ones and Add/Sub of zeros that change nothing (see the module doc)."""

    OPS = frozenset(_NEUTRAL)
    DONE = "removed %d neutral arithmetic node(s)"

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        out = node.outputs[0]
        if len(node.inputs) != 2:
            return
        neutral, positions = _NEUTRAL[node.op_type]
        for pos in positions:
            array = _constant(node.inputs[pos])
            other = node.inputs[1 - pos]
            if _layer_norm_tail(node.op_type, other, node.inputs[pos]):
                continue  # ONNX Runtime fuses Div -> Mul(gamma) -> Add(beta) into LayerNormalization
            if array is None or other is None or not _keeps_shape(other, array, out):
                continue
            if array.dtype.kind not in "fiub" or (array.dtype.kind == "b") != (node.op_type in ("And", "Or")) \
                    or not np.all(array == neutral):
                continue
            if out in scope.outputs:
                if not _can_take_name(scope, other):
                    continue
                _take_output(scope.graph, out, other)
            else:
                out.replace_all_uses_with(other)
            scope.graph.remove(node, safe=True)
            self.count += 1
            return


def _can_take_name(scope: GraphScope, value: ir.Value) -> bool:
    """``value`` may become the graph output the removed node made, under that output's name:
    a node of this graph makes it, nothing else reads it, and it is no output itself."""
    producer = value.producer()
    return producer is not None and producer.graph is scope.graph and len(value.uses()) == 1 \
        and value not in scope.outputs


def _take_output(graph, out: ir.Value, value: ir.Value) -> None:
    """``value`` in place of the graph output ``out``, with its name, type and shape (the
    interface stays as declared), and in place of ``out`` for every node that reads it (T5's
    last layer norm: its result is the encoder's output and the decoder's input)."""
    for i, o in enumerate(graph.outputs):
        if o is out:
            graph.outputs[i] = value
    out.replace_all_uses_with(value)
    name = out.name
    out.name = None
    value.name = name
    value.type = out.type or value.type
    value.shape = out.shape if out.shape is not None else value.shape
