"""A QDQ group's float ConvTranspose written as ONNX Runtime computes it (form ``sequential_fma_in_double``
of the key ``ConvTranspose`` in a release's ``quantized_forms``: tract 0.23).

ONNX Runtime's graph optimizer leaves a DequantizeLinear -> ConvTranspose -> QuantizeLinear group
unfused (ppocr_v4_det_qdq's two upsamplings), so its QuantizeLinear rounds the float ConvTranspose
that MLAS computes: per output element, one SGEMM dot product over the input channels, a fused
multiply-add per channel in channel order from zero (measured: every one of ppocr_v4_det_qdq's
107,520 ConvTranspose outputs bit for bit). A runtime that sums otherwise gives other codes after the
QuantizeLinear (tract 0.23: the node is refused by name, ``quant_table.REDUCTIONS``). Here, where no
two kernel offsets meet (strides equal to the kernel, no pads, no dilation, one group, no bias, a 2D
ConvTranspose whose input's spatial dims are known) and there are at most 128 input channels (one
MLAS K block), each kernel offset's dot product is that chain: acc = float32(double(acc) + double(x_c)
* double(w_c)), the product exact in double and the sum rounded once to double, then to float32 (an
FMA's result but where the two roundings meet a float32 midpoint), and the offsets' maps are
interleaved as the ConvTranspose places them. Any other ConvTranspose is left as it is."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from rewriter.convert.lowering.contrib_types import dims_of
from rewriter.convert.lowering.emit import Emitter, ScopeWriter
from rewriter.graph.attributes import attribute_values
from rewriter.graph.model_index import value_types
from rewriter.graph.schemas import is_default_domain
from rewriter.graph.traversal import definition
from rewriter.targets.node_splice import splice_found

__all__ = ["FORM", "MAX_CHANNELS", "sequential_conv_transposes"]

FORM = "sequential_fma_in_double"
MAX_CHANNELS = 128  # one K block of MLAS's SGEMM: past it, partial sums are added
_F32, _F64 = TensorProto.FLOAT, TensorProto.DOUBLE


def _plan(node: onnx.NodeProto, scope, types: dict):
    """(input channels, output channels, kernel, spatial dims) of a ConvTranspose this writes, else None."""
    if node.op_type != "ConvTranspose" or not is_default_domain(node.domain) or len(node.input) != 2:
        return None
    if any(getattr(definition(i, scope)[1], "op_type", None) != "DequantizeLinear" for i in node.input):
        return None
    x, w = dims_of(types.get(node.input[0]))[1], dims_of(types.get(node.input[1]))[1]
    if x is None or w is None or len(x) != 4 or len(w) != 4 or not all(isinstance(d, int) for d in x[1:] + w):
        return None  # (the batch may be symbolic: the Reshapes copy it)
    attrs = attribute_values(node, decode=True)
    kernel = list(attrs.get("kernel_shape", w[2:]))
    if (attrs.get("group", 1) != 1 or list(attrs.get("strides", [1, 1])) != kernel or any(attrs.get("pads", []))
            or any(d != 1 for d in attrs.get("dilations", [])) or "output_padding" in attrs or "output_shape" in attrs
            or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID")):
        return None
    if kernel != w[2:] or w[0] != x[1] or w[0] > MAX_CHANNELS:
        return None
    return w[0], w[1], kernel, x[2:]


def _write(node: onnx.NodeProto, plan, taken: set) -> list[onnx.NodeProto]:
    channels, outs, (kh, kw), (h, wd) = plan
    e = Emitter(ScopeWriter(taken, True, 13), node.name or node.output[0])  # (in_function: Constant nodes)
    ones = e.ints([1] * channels)  # (Split's sizes as an input: opset 13 on)
    wide = e.cast(node.input[0], _F64)
    xs = e.op("Split", [wide, ones], n_out=channels, axis=1) if channels > 1 else [wide]
    rows = e.op("Reshape", [e.cast(node.input[1], _F64), e.ints([channels, outs * kh * kw, 1, 1])])
    ws = e.op("Split", [rows, ones], n_out=channels, axis=0) if channels > 1 else [rows]
    acc = None  # [N, outs * kh * kw, h, wd]: every kernel offset's map, channel by channel
    for x, w in zip(xs, ws):
        product = e.op("Mul", [x, w])
        acc = e.cast(product if acc is None else e.op("Add", [e.cast(acc, _F64), product]), _F32)
    grid = e.op("Reshape", [acc, e.ints([0, outs, kh, kw, h, wd])])
    placed = e.op("Transpose", [grid], perm=[0, 1, 4, 2, 5, 3])
    e.op("Reshape", [placed, e.ints([0, outs, h * kh, wd * kw])], out=node.output[0])
    return e.nodes


def sequential_conv_transposes(model: onnx.ModelProto) -> int:
    """Rewrite in place the main graph's QDQ-group ConvTransposes of the geometry above; their count."""
    from rewriter.graph.inferred import LazyInference

    types = value_types(model, LazyInference(model)())

    def plan(node, scope):
        return _plan(node, scope, types) if scope.body is model.graph and (scope.opset or 0) >= 13 else None

    return len(splice_found(model, plan, _write))
