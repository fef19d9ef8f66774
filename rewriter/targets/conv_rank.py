"""``ConvInteger`` / ``rank_4`` (``rewrite_forms``; LiteRT's data): onnx2tf 2.6.9 writes a 1-D
ConvInteger (input of rank 3: what the "integer" form of a 1-D QLinearConv writes, piper_tashkeel's
quantized convolutions) as the custom op ONNX_CONVINTEGER, which LiteRT refuses ("Encountered
unresolved custom op"), and runs the 2-D one.  A 1-D ConvInteger whose weight is a constant of
the main graph becomes Unsqueeze (axis 2) -> ConvInteger over [1, k] kernels (the weight reshaped
to [M, C/group, 1, k]; pads, strides and dilations given 0 / 1 on the added axis) -> Squeeze: the
same int32 sums, element for element.  Any other ConvInteger is left as it is."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rewriter.graph import traversal
from rewriter.graph.constants import constant_value
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.graph.unused_values import remove_unused
from rewriter.targets.node_splice import splice, taken_names

__all__ = ["conv_integer_rank_4"]


def _axes_op(op: str, data: str, out: str, opset: int, axes_name: str, taken: set) -> onnx.NodeProto:
    """Unsqueeze / Squeeze of axis 2 (axes an input from opset 13, an attribute before)."""
    name = fresh_name(taken, f"{out}_{op.lower()}")
    if opset >= 13:
        return helper.make_node(op, [data, axes_name], [out], name=name)
    return helper.make_node(op, [data], [out], name=name, axes=[2])


def _as_2d(node: onnx.NodeProto, weight: np.ndarray, opset: int, graph: onnx.GraphProto, taken: set) -> list:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    base = node.name or node.output[0]
    w_name = fresh_name(taken, f"{node.input[1]}_2d")
    graph.initializer.append(numpy_helper.from_array(weight[:, :, None, :], w_name))
    axes = fresh_name(taken, f"{base}_axis_2")
    if opset >= 13:
        graph.initializer.append(numpy_helper.from_array(np.array([2], np.int64), axes))
    x4, y4 = fresh_name(taken, f"{node.input[0]}_2d"), fresh_name(taken, f"{node.output[0]}_2d")
    new = {"kernel_shape": [1, int(weight.shape[2])]}
    if "pads" in attrs:
        new["pads"] = [0, int(attrs["pads"][0]), 0, int(attrs["pads"][1])]
    for key in ("strides", "dilations"):
        if key in attrs:
            new[key] = [1, int(attrs[key][0])]
    for key in ("group", "auto_pad"):
        if key in attrs:
            new[key] = attrs[key]
    conv = helper.make_node("ConvInteger", [x4, w_name, *node.input[2:]], [y4], name=fresh_name(taken, f"{base}_2d"),
                            **new)
    return [_axes_op("Unsqueeze", node.input[0], x4, opset, axes, taken), conv,
            _axes_op("Squeeze", y4, node.output[0], opset, axes, taken)]


def conv_integer_rank_4(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each 1-D ConvInteger of the main graph as the module's docstring says;
    one note naming them."""
    scope = next(s for s in traversal.iter_scopes(model) if s.parent is None and not s.is_function)
    found = {}
    for i, node in enumerate(scope.body.node):
        if node.op_type != "ConvInteger" or not is_default_domain(node.domain) or len(node.input) < 2:
            continue
        w = constant_value(node.input[1], scope, numpy_helper.to_array)  # (an initializer that is no graph input)
        if w is not None and w.ndim == 3:
            found[i] = w
    if not found:
        return []
    taken = taken_names(model)
    opset = scope.opset or 10
    old = {scope.body.node[i].input[1] for i in found}
    done = splice(scope, found, lambda node, weight: _as_2d(node, weight, opset, model.graph, taken))
    remove_unused(model, only=old)  # the 1-D weights nothing else reads
    return [f"{len(done)} 1-D ConvInteger node(s) written as 2-D over a unit axis ({release} has no 1-D "
            f"ConvInteger): {first_few(repr(n) for n in done)}"]
