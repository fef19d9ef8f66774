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

from rewriter.precision.graphs import FLOAT, Graphs, NodeKey

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


def _upstream_of_quantizers(g: Graphs, plans: dict) -> set[NodeKey]:
    """The float nodes whose values reach a quantizing op through float values (any op, any
    distance), walking back from each quantizer to integer values (a DequantizeLinear's input, an
    integer product), constants and graph inputs: rounded to half
    anywhere on the way, a value lands in another integer step (a dynamically quantized CNN is
    0.16 off its float32 self from its float nodes in half, whose file is no smaller for it)."""
    found: set[NodeKey] = set()
    frontier = [x for site in g.sites for n in site.graph.node if _is(n, _QUANTIZE) for x in n.input if x]
    seen: set[str] = set()
    while frontier:
        x = frontier.pop()
        if x in seen or g.elem(x) != FLOAT:
            continue
        seen.add(x)
        p = g.producer.get(x)
        if p is None or g.key(p) not in plans:  # (a DequantizeLinear's own inputs are integers: the walk ends there)
            continue
        found.add(g.key(p))
        frontier.extend(i for i in p.input if i)
    return found


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


def quantized_regions(graphs: Graphs, plans: dict) -> set[NodeKey]:
    """The nodes planned in half that a quantized region keeps float32 (ids): a node reading a
    DequantizeLinear of a value that is not a constant, a node whose float values reach a
    quantizing op, the dequantization of integer sums, the quantizers themselves and the
    DequantizeLinear of activations (those of weights read by nodes left float32 are islands:
    :mod:`rewriter.precision.islands`)."""
    g = graphs

    def half(node) -> bool:
        p = plans.get(g.key(node))
        return p is not None and p.half

    keep: set[NodeKey] = set()
    upstream = _upstream_of_quantizers(g, plans)
    for site in g.sites:
        for node in site.graph.node:
            if not half(node):
                continue
            if _is(node, _QUANTIZE) or (_is(node, _DEQUANTIZE) and node.input and not g.is_constant(node.input[0])):
                keep.add(g.key(node))  # a quantizer's input and an activation's dequantization: as they were
                continue
            if _is(node, _DEQUANTIZE):
                continue
            for x in node.input:
                d = g.producer.get(x) if x else None
                if d is not None and _is(d, _DEQUANTIZE) and d.input and not g.is_constant(d.input[0]):
                    keep.add(g.key(node))
            if g.key(node) in upstream or _accumulator(g, node):
                keep.add(g.key(node))
    return keep
