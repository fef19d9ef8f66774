"""``Add(Conv(x, W), b)`` with a constant per-channel ``b`` becomes ``Conv(x, W, b)`` (also
ConvTranspose; ``Add(b, Conv(...))`` likewise), as Paddle and TensorFlow exports write a Conv
without bias followed by an Add; ``Mul(Conv(x, W, B), g)`` with a constant per-channel ``g``
becomes ``Conv(x, W * g, B * g)`` (Conv only; W and B constants), as ConvNeXt's layer scale
after its last pointwise Conv.

Conditions: the Conv has no bias input; its output is read by the Add alone and is not a graph
output; ``b`` is a constant (not an overridable graph input) of the Conv's element type whose
shape, aligned to the Conv output from the right, is 1 everywhere but the channel dim (dim 1),
where it is the channel count or 1 (``[1, C, 1, 1]``, ``[C, 1, 1]``, ``[1]``, a scalar), and
it broadcasts to nothing bigger than the Conv output (its rank is at most the output's). The
channel count is W's dim 0 (Conv) or dim 1 times ``group`` (ConvTranspose). The bias then holds
``b`` flattened (or repeated for a single value). ONNX Runtime adds a Conv's bias to each
output value once, as the Add did: the same sums up to where the bias enters the accumulation
(differences of float rounding, ~1e-7 relative, as for a BatchNormalization folded into the
weights). The scaled weights round once per weight (W * g in W's type), as a
BatchNormalization folded into them does.
"""

from __future__ import annotations


import numpy as np
import onnx_ir as ir

from rewriter.optimize.node_pass import GraphScope, NodeRewritePass
from rewriter.optimize.values import add_constant, constant_array
from rewriter.graph.schemas import is_default_domain

__all__ = ["FoldChannelAffineIntoConvPass"]

_CONVS = frozenset({"Conv", "ConvTranspose"})


def _channels(conv: ir.Node) -> int | None:
    w = conv.inputs[1] if len(conv.inputs) > 1 else None
    if w is None or w.shape is None or len(w.shape) < 2 or not all(isinstance(d, int) for d in w.shape.dims[:2]):
        return None
    if conv.op_type == "Conv":
        return w.shape.dims[0]
    group = conv.attributes.get("group")
    if group is not None and group.is_ref():
        return None
    return w.shape.dims[1] * (group.as_int() if group is not None else 1)


def _bias(conv: ir.Node, constant: np.ndarray) -> np.ndarray | None:
    """``constant`` as the Conv's 1-D bias, or None when it is not a per-channel constant."""
    channels = _channels(conv)
    w = conv.inputs[1]
    if channels is None or w.dtype is None or constant.dtype != w.dtype.numpy():
        return None
    rank = len(w.shape)  # the Conv output's rank is W's
    if rank < 3 or constant.ndim > rank:
        return None
    dims = [1] * (rank - constant.ndim) + list(constant.shape)
    if any(d != 1 for i, d in enumerate(dims) if i != 1) or dims[1] not in (1, channels):
        return None
    return np.broadcast_to(constant.reshape(-1), (channels,)).astype(constant.dtype)


class FoldChannelAffineIntoConvPass(NodeRewritePass):
    """Fold a per-channel constant Add (into the bias of a bias-less Conv/ConvTranspose) or Mul
    (into a Conv's weights and bias) after it (see the module doc); ``self.count`` counts them."""

    OPS = frozenset({"Add", "Mul"})
    DONE = 'folded %d Add/Mul node(s) into the Conv before'

    def visit(self, scope: GraphScope, node: ir.Node) -> None:
        if len(node.inputs) == 2:
            self._fold(scope.graph, node, scope.outputs)

    def _fold(self, graph, node: ir.Node, outputs) -> None:
        for pos in (0, 1):
            out, other = node.inputs[pos], node.inputs[1 - pos]
            conv = out.producer() if out is not None else None
            if (conv is None or conv.op_type not in _CONVS or not is_default_domain(conv.domain)
                    or conv.graph is not node.graph or len(conv.outputs) != 1 or out in outputs
                    or len(out.uses()) != 1):
                continue
            has_bias = len(conv.inputs) > 2 and conv.inputs[2] is not None
            constant = constant_array(other)
            per_channel = _bias(conv, constant) if constant is not None else None
            if per_channel is None:
                continue
            if node.op_type == "Add":
                if has_bias:
                    continue
                self._set_input(graph, conv, 2, per_channel, "bias")
            else:
                weights = constant_array(conv.inputs[1], max_size=1 << 26)
                bias = constant_array(conv.inputs[2]) if has_bias else None
                if conv.op_type != "Conv" or weights is None or (has_bias and bias is None):
                    continue
                scale = per_channel.reshape((-1,) + (1,) * (weights.ndim - 1))
                self._set_input(graph, conv, 1, (weights * scale).astype(weights.dtype), "weights")
                if has_bias:
                    self._set_input(graph, conv, 2, (bias * per_channel).astype(bias.dtype), "bias")
            result = node.outputs[0]
            # the Conv now produces the node's value: its output name (and its readers) stay
            result.replace_all_uses_with(out, replace_graph_outputs=True)
            name = result.name
            graph.remove(node, safe=True)
            out.name = name
            self.count += 1
            return

    @staticmethod
    def _set_input(graph, conv: ir.Node, index: int, array: np.ndarray, what: str) -> None:
        value = add_constant(graph, conv, array, f"{conv.name or 'conv'}_{what}")
        if len(conv.inputs) <= index:
            conv.resize_inputs(index + 1)
        conv.replace_input_with(index, value)
