"""How the constant folder evaluates the nodes rewriter evaluates itself (see
:mod:`rewriter.optimize.constant_folding` for which ones): ReduceProd by the exact kernel,
integer arithmetic with exact overflow checks, GatherElements by NumPy, and everything else on
floating-point data by ONNX Runtime's own CPU kernel. Each raises :class:`NotFolded` with the
reason when a node must stay as it is."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

from rewriter.optimize.onnxscript_folder import reference_evaluator

__all__ = ["NotFolded", "reduce_prod", "integer", "runtime", "gather_elements", "overflows", "int_attr",
           "node_attributes"]


def reduce_prod(node: ir.Node, inputs, version: int, int_overflow: str):
    """ReduceProd by rewriter's fold (:func:`rewriter.fold.reduce_prod_value`: the exact kernel under
    the overflow policy); a node rewriter's exact fold already decided (``fold.SETTLED``) stays."""
    from rewriter import fold

    if fold.SETTLED in node.meta:
        raise NotFolded(node.meta[fold.SETTLED])
    if version >= 18:
        axes = inputs[1] if len(inputs) > 1 else None
        axes = None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    else:
        attr = node.attributes.get("axes")
        axes = None if attr is None else list(attr.as_ints())
    try:
        return fold.reduce_prod_value(inputs[0], axes, bool(int_attr(node, "keepdims", 1)),
                                      bool(int_attr(node, "noop_with_empty_axes", 0)), int_overflow)
    except fold.NotFoldable as e:
        raise NotFolded(str(e)) from None

def integer(node: ir.Node, inputs, version: int, int_overflow: str):
    """Integer arithmetic by onnx.reference, refused on division by zero or (unless wrapping) overflow."""
    op = node.op_type
    if op in ("Div", "Mod") and inputs[1] is not None and np.any(inputs[1] == 0):
        raise NotFolded(f"integer {op} by zero")
    result = reference_evaluator.evaluate(node.domain, op, version, *inputs,
                                                 **node_attributes(node))
    if result is None or isinstance(result, (tuple, list)):
        return None
    result = np.asarray(result)
    if int_overflow != "wrap" and result.dtype.kind in "iu" and overflows(op, node, inputs, result):
        raise NotFolded(f"{result.dtype} {op} overflows (pass --int-overflow wrap to fold the "
                         "wrapped value)")
    return result

def runtime(node: ir.Node, inputs, version: int, sessions: dict):
    """The node run alone by ONNX Runtime's CPU kernel (``sessions`` caches one per distinct node)."""
    import onnxruntime as ort

    names = [f"i{k}" if v is not None else "" for k, v in enumerate(node.inputs)]
    proto = ir.serde.serialize_node(node)
    del proto.input[:]
    proto.input.extend(names)
    del proto.output[:]
    proto.output.append("o")
    proto.name = "n"
    graph = onnx.helper.make_graph(
        [proto], "fold",
        [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in zip(names, inputs) if n],
        [onnx.helper.make_tensor_value_info("o", int(node.outputs[0].dtype or 0), None)])
    if node.outputs[0].dtype is None:
        raise NotFolded("output type unknown")
    opset = version
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = min(onnx.IR_VERSION, 10)
    key = model.SerializeToString()
    session = sessions.get(key)
    try:
        if session is None:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            options.intra_op_num_threads = 1
            options.log_severity_level = 3
            session = ort.InferenceSession(key, options, providers=["CPUExecutionProvider"])
            sessions[key] = session
        (result,) = session.run(None, {n: a for n, a in zip(names, inputs) if n})
    except Exception as e:  # ORT lacks the kernel for this type/opset, or refuses the node
        raise NotFolded(f"ONNX Runtime cannot evaluate it alone: {' '.join(str(e).split())[:200]}") \
            from None
    return result


def gather_elements(node: ir.Node, inputs):
    """GatherElements by NumPy's take_along_axis (onnx.reference's fails on some broadcastable
    shapes); out-of-range indices are left to the runtime."""
    data, indices = inputs
    axis = int_attr(node, "axis", 0)
    if data.ndim != indices.ndim or not -data.ndim <= axis < data.ndim:
        raise NotFolded("GatherElements: ranks differ or axis out of range")
    axis %= data.ndim
    n = data.shape[axis]
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise NotFolded("GatherElements: an index is out of range")
    if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
        raise NotFolded("GatherElements: indices bigger than the data off the axis")
    index = np.where(indices < 0, indices + n, indices).astype(np.int64)
    ranges = tuple(slice(0, d) if k != axis else slice(None) for k, d in enumerate(indices.shape))
    return np.take_along_axis(data[ranges], index, axis=axis)


class NotFolded(Exception):
    """A node that is left as it is; the message says why."""


def int_attr(node: ir.Node, name: str, default: int) -> int:
    attr = node.attributes.get(name)
    return default if attr is None else attr.as_int()


def node_attributes(node: ir.Node) -> dict:
    def convert(attr):
        if attr.type == ir.AttributeType.TENSOR:
            return ir.serde.serialize_tensor(attr.value)
        return attr.value

    return {name: convert(attr) for name, attr in node.attributes.items()}


def overflows(op: str, node: ir.Node, inputs, result: np.ndarray) -> bool:
    """Whether the exact integer result of ``op`` differs from ``result`` (the wrapped one)."""
    info = np.iinfo(result.dtype)
    exact = [None if a is None else a.astype(object) for a in inputs]
    try:
        if op == "Add":
            value = exact[0] + exact[1]
        elif op == "Sub":
            value = exact[0] - exact[1]
        elif op == "Mul":
            value = exact[0] * exact[1]
        elif op == "Neg":
            value = -exact[0]
        elif op == "Abs":
            value = np.abs(exact[0])
        elif op == "Sum":
            value = sum(exact[1:], exact[0])
        elif op == "Pow":
            value = exact[0] ** exact[1]
        elif op == "Div":  # only INT_MIN / -1 leaves the range
            return bool(info.min < 0 and np.any((inputs[0] == info.min) & (inputs[1] == -1)))
        elif op in ("Mod", "Range", "CastLike", "Cast"):
            if op in ("Cast", "CastLike"):
                src = inputs[0]
                return bool(src.size and src.dtype.kind in "iub" and
                            (src.astype(object).min() < info.min or src.astype(object).max() > info.max))
            return False
        else:  # reductions, MatMul, CumSum: bound the result by the number of terms
            terms = max(1, max((a.size for a in inputs if a is not None), default=1))
            big = max(int(np.abs(a.astype(object)).max()) if a is not None and a.size else 0
                      for a in inputs[:2])
            bound = terms * big * (big if op in ("MatMul", "ReduceSumSquare") else 1)
            return bound > info.max
    except (TypeError, ValueError):
        return True
    value = np.asarray(value, dtype=object)
    return bool(value.size and (value.min() < info.min or value.max() > info.max))
