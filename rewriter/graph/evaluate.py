"""One node evaluated on given input values with onnx.reference (folding, shape arithmetic)."""

from __future__ import annotations

import onnx

__all__ = ["evaluate_node"]


def evaluate_node(node: onnx.NodeProto, inputs: list, opset: int):
    """The first output of ``node`` (default domain, valid at ``opset``) on ``inputs`` (one array
    per input, None for an absent one), as onnx.reference computes it; raises what it raises."""
    import onnx.reference

    names = [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)]
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.ClearField("name")
    del copy.input[:]
    copy.input.extend(names)
    del copy.output[1:]
    copy.output[0] = "out"
    graph = onnx.helper.make_graph(
        [copy], "evaluate",
        [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in zip(names, inputs) if n],
        [onnx.helper.make_empty_tensor_value_info("out")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    (out,) = onnx.reference.ReferenceEvaluator(model).run(None, {n: v for n, v in zip(names, inputs) if n})
    return out
