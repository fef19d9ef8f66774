"""A model's lenient ONNX shape inference, run when first asked for and at most once.

The input checks (ReduceProd ranks) and the converter (element types for type-only steps,
ranks for some adapters) share one inference of the input; many conversions need none at all
(going up, most steps keep every node whatever its types), so nobody pays for it up front.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx

from rewriter.graph.evaluate import evaluate_node
from rewriter.graph.schemas import is_default_domain

__all__ = ["LazyInference", "inferred_model", "infer_with_static_shapes"]

logger = logging.getLogger(__name__)


class LazyInference:
    """:func:`infer_with_static_shapes` of the model, computed on the first call; the call
    returns None when inference fails."""

    def __init__(self, model: onnx.ModelProto):
        self._model = model
        self._done = False
        self._value: onnx.ModelProto | None = None

    @property
    def done(self) -> bool:
        return self._done

    def __call__(self) -> onnx.ModelProto | None:
        if not self._done:
            try:
                self._value = infer_with_static_shapes(self._model)
            except Exception as e:  # inference trouble costs information, it is reported elsewhere
                logger.info("shape inference failed: %s", e)
                self._value = None
            self._done = True
        return self._value


def inferred_model(inferred, model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The inferred model from ``inferred``: a ModelProto, a :class:`LazyInference` (or any
    zero-argument callable), or None (then ``model`` is inferred here); None when that fails."""
    if inferred is None:
        inferred = LazyInference(model)
    return inferred() if callable(inferred) else inferred


# Ops whose integer results static shapes and constants decide (exporters compute Reshape
# targets with them: Concat(Slice(Shape(x)), [-1])).
_DECIDABLE_OPS = frozenset({"Shape", "Size", "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Cast",
                            "Add", "Sub", "Mul", "Div", "Mod", "Identity", "Range", "ReduceProd", "Equal", "Where", "Max",
                            "Min"})
_ROUNDS = 3


def infer_with_static_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX's lenient shape inference with data propagation, helped where it stops: when some
    main-graph value is left without a shape, the integer shape computations that static dims and
    constants decide are evaluated (onnx.reference, node by node) and inference runs again on a
    copy where they are initializers, up to three rounds. The result describes ``model``'s values
    (the copy keeps every name); the model itself is not changed. Raises what inference raises."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    for _ in range(_ROUNDS):
        if not _shapeless(inferred):
            break
        decided = _decided(model, inferred)
        if not decided:
            break
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        graph = copy.graph
        outputs = {v.name for v in graph.output}
        kept = [n for n in graph.node if not (n.output and all(o in decided and o not in outputs for o in n.output))]
        del graph.node[:]
        graph.node.extend(kept)
        graph.initializer.extend(onnx.numpy_helper.from_array(v, name) for name, v in decided.items()
                                 if name not in outputs)
        try:
            better = onnx.shape_inference.infer_shapes(copy, data_prop=True)
        except Exception as e:  # the first inference stands
            logger.info("shape inference with static shape values failed: %s", e)
            break
        if len(_shapeless(better)) >= len(_shapeless(inferred)):
            break
        inferred = _typed(better, {n: v for n, v in decided.items() if n not in outputs})
    return inferred


def _typed(inferred: onnx.ModelProto, decided: dict) -> onnx.ModelProto:
    """``inferred`` with the values made initializers described by their arrays: a value_info
    the model declares for one without a shape (onnxruntime-genai's builder gives its scalars an
    element type only) stays as declared in the copy, which inference does not revise."""
    kept = [v for v in inferred.graph.value_info if v.name not in decided]
    del inferred.graph.value_info[:]
    inferred.graph.value_info.extend(kept)
    inferred.graph.value_info.extend(
        onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
        for name, v in decided.items())
    return inferred


# Ops whose output shape comes from the values of an input (what static shape values help).
_SHAPE_TAKERS = frozenset({"Reshape", "Expand", "ConstantOfShape", "Tile", "Slice", "Range", "Pad", "Unsqueeze",
                           "Squeeze", "Resize", "Upsample", "TopK", "OneHot", "Split"})


def _shapeless(inferred: onnx.ModelProto) -> list[str]:
    """Outputs of main-graph nodes that take their shape from an input's values (Reshape, Expand,
    ...) and that the inferred model gives no shape, or, when every graph input's dims are static
    (``--input-shape``), a dim that is not static (only those: checking every value costs as much
    as an inference on big graphs)."""
    graph = inferred.graph
    wanted = [o for n in graph.node if n.op_type in _SHAPE_TAKERS for o in n.output if o]
    if not wanted:
        return []
    wanted_set = set(wanted)
    static = all(_static_dims(v) for v in graph.input)
    known = {v.name for values in (graph.value_info, graph.output) for v in values
             if v.name in wanted_set and v.type.tensor_type.HasField("shape") and (not static or _static_dims(v))}
    return [o for o in wanted if o not in known]


def _static_dims(value: onnx.ValueInfoProto) -> bool:
    tensor = value.type.tensor_type
    return tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)


def _decided(model: onnx.ModelProto, inferred: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Integer values of main-graph node outputs that static dims and constants decide."""
    opset = next((o.version for o in model.opset_import if is_default_domain(o.domain)), None)
    if opset is None:
        return {}
    types = {v.name: v.type for v in (*inferred.graph.input, *inferred.graph.value_info)}
    inputs = {v.name for v in model.graph.input}
    values: dict[str, np.ndarray] = {}
    for t in model.graph.initializer:
        if t.name not in inputs and t.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and \
                t.data_location != onnx.TensorProto.EXTERNAL and len(t.dims) <= 1:
            values[t.name] = onnx.numpy_helper.to_array(t)
    decided: dict[str, np.ndarray] = {}
    for node in model.graph.node:
        if not is_default_domain(node.domain) or len(node.output) != 1:
            continue
        value = None
        try:
            if node.op_type == "Constant":
                attr = node.attribute[0] if len(node.attribute) == 1 else None
                if attr is not None and attr.name == "value":
                    value = onnx.numpy_helper.to_array(attr.t)
                elif attr is not None and attr.name in ("value_ints", "value_int"):
                    value = np.asarray(onnx.helper.get_attribute_value(attr), dtype=np.int64)
            elif node.op_type in ("Shape", "Size") and node.input:
                t = types.get(node.input[0])
                if t is not None and t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
                    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]
                    if None not in dims:
                        value = np.asarray(evaluate_node(node, [np.zeros(dims, dtype=np.uint8)], opset))
            elif node.op_type in _DECIDABLE_OPS and all(i in values for i in node.input if i):
                value = np.asarray(evaluate_node(node, [values.get(i) for i in node.input], opset))
        except Exception:  # noqa: BLE001 - a node the reference cannot evaluate decides nothing
            value = None
        if value is not None and value.dtype.kind in "iub" and value.size <= 1024:
            values[node.output[0]] = value
            if node.op_type != "Constant":
                decided[node.output[0]] = value
    return decided
