"""Quantized regions of a model, which the half-precision plan leaves float32.

In a statically quantized model (QDQ, or ONNX Runtime's QOperator format) the float32 nodes
between a DequantizeLinear of an activation and a QuantizeLinear are what the runtime fuses
into integer kernels (DequantizeLinear -> Conv -> QuantizeLinear becomes QLinearConv; TensorRT
does the same with its explicit quantization). Casts put between them break those patterns,
and a value rounded to half before it is quantized again lands in another integer step: the
result is no smaller and computes something else. Dynamic quantization (DynamicQuantizeLinear,
DynamicQuantizeMatMul) quantizes float32 activations with a scale taken from their range: the
node making such an activation stays float32 for the same reason.

Weight-only quantization (a DequantizeLinear of a constant read by a node whose activations
are float) is not a quantized region: those nodes may run in half.
"""

from __future__ import annotations

import onnx

from rewriter.precision.graphs import FLOAT, Graphs

__all__ = ["QUANTIZED", "quantized_regions"]

QUANTIZED = ("quantized: reads a dequantized activation or makes one that is quantized again (the runtime fuses "
             "DequantizeLinear, the op and QuantizeLinear into an integer kernel; half precision would put Casts "
             "between them and round values before they are quantized)")

_DOMAINS = ("", "ai.onnx", "com.microsoft")
_DEQUANTIZE = frozenset({"DequantizeLinear"})
# ops quantizing a float activation they read (input 0), with a given or a measured scale
_QUANTIZE = frozenset({"QuantizeLinear", "DynamicQuantizeLinear", "DynamicQuantizeMatMul", "DynamicQuantizeLSTM",
                       "QAttention"})


def _is(node: onnx.NodeProto, ops: frozenset) -> bool:
    return node.op_type in ops and node.domain in _DOMAINS


# ops that move values without computing new ones: a value goes through them unchanged
_MOVES = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Split", "Slice",
                    "Concat", "Gather", "Expand"})


def _quantized_later(g: Graphs, node: onnx.NodeProto, limit: int = 8) -> bool:
    """Whether a float output of ``node`` reaches a quantizing op, directly or through ops that
    only move values."""
    frontier = [node]
    for _ in range(limit):
        nxt = []
        for n in frontier:
            for out in n.output:
                if g.elem(out) != FLOAT:
                    continue
                for r, _ in g.readers.get(out, ()):
                    if _is(r, _QUANTIZE):  # the activation, or a scale (rounded, it moves every step)
                        return True
                    if r.op_type in _MOVES and r.domain in _DOMAINS:
                        nxt.append(r)
        if not nxt:
            return False
        frontier = nxt
    return False


_INTEGER_PRODUCTS = frozenset({"MatMulInteger", "ConvInteger"})


def _accumulator(g: Graphs, node: onnx.NodeProto) -> bool:
    """A Cast to float of an integer product's int32 sums (MatMulInteger, ConvInteger: up to
    127 * 127 * K, beyond float16's range for K of a few), or the Mul applying the scales to it:
    the dequantization of dynamic quantization."""
    if node.op_type == "Mul":
        return any(x and (c := g.producer.get(x)) is not None and c.op_type == "Cast" and _accumulator(g, c)
                   for x in node.input)
    if node.op_type != "Cast" or not node.input:
        return False
    p = g.producer.get(node.input[0])
    return p is not None and p.op_type in _INTEGER_PRODUCTS and p.domain in _DOMAINS


def quantized_regions(graphs: Graphs, plans: dict) -> set[int]:
    """The nodes planned in half that a quantized region keeps float32 (ids): a node reading a
    DequantizeLinear of a value that is not a constant, a node whose float output a quantizing
    op reads, and the DequantizeLinear / QuantizeLinear nodes next to nodes left float32."""
    g = graphs

    def half(node) -> bool:
        p = plans.get(id(node))
        return p is not None and p.half

    keep: set[int] = set()
    for site in g.sites:
        for node in site.graph.node:
            if not half(node) or _is(node, _DEQUANTIZE) or _is(node, _QUANTIZE):
                continue
            for x in node.input:
                d = g.producer.get(x) if x else None
                if d is not None and _is(d, _DEQUANTIZE) and d.input and not g.is_constant(d.input[0]):
                    keep.add(id(node))
            if _quantized_later(g, node) or _accumulator(g, node):
                keep.add(id(node))

    def stays(node) -> bool:
        return id(node) in keep or not half(node)

    for site in g.sites:
        for node in site.graph.node:
            if not half(node):
                continue
            if _is(node, _DEQUANTIZE):
                activation = bool(node.input) and not g.is_constant(node.input[0])
                readers = [r for out in node.output for r, _ in g.readers.get(out, ())]
                if activation or any(stays(r) for r in readers):
                    keep.add(id(node))
            elif _is(node, _QUANTIZE):
                p = g.producer.get(node.input[0]) if node.input and node.input[0] else None
                if p is None or stays(p):
                    keep.add(id(node))
    return keep
