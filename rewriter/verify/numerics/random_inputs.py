"""Random inputs for the numerical check: one array per graph input, of its declared type and
shape (a symbolic or negative dim takes ``SYMBOL_SIZE`` unless a pinned shape gives its symbol a
size), floats in ±[0.5, 1.5], integers small, from a fixed seed."""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.errors import RewriterError
from rewriter.graph import traversal
from rewriter.graph.static_shapes import ANONYMOUS
from rewriter.graph.schemas import is_default_domain

__all__ = ["random_inputs", "random_feeds", "axes_from_inputs", "SYMBOL_SIZE"]

SYMBOL_SIZE = 2
_FLOATS = frozenset({onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT,
                     onnx.TensorProto.DOUBLE})


def _np_dtype(elem: int):
    return onnx.helper.tensor_dtype_to_np_dtype(elem)


def random_inputs(model: onnx.ModelProto, seed: int = 0,
                  input_shapes: dict[str, list[int]] | None = None) -> dict[str, np.ndarray]:
    """Random feeds (numpy arrays, 0-d for rank-0 inputs) for every graph input that is not an
    initializer. ``input_shapes`` pins an input's shape (name -> dims); the symbols its declared
    shape uses take those sizes for every other input too."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    pinned = dict(input_shapes or {})
    names = {vi.name for vi in model.graph.input if vi.name not in inits}
    unknown = sorted(set(pinned) - names)
    if unknown:
        raise RewriterError(f"--input-shape: the model has no graph input {', '.join(map(repr, unknown))} "
                            f"(inputs: {', '.join(sorted(names)) or 'none'})")
    symbols: dict[str, int] = {}
    for vi in model.graph.input:  # pinned shapes first: their symbols bind every other input
        if vi.name in pinned:
            dims = vi.type.tensor_type.shape.dim
            if vi.type.tensor_type.HasField("shape") and len(dims) != len(pinned[vi.name]):
                raise RewriterError(f"--input-shape {vi.name}: {len(pinned[vi.name])} dim(s) given, "
                                    f"the input has rank {len(dims)}")
            for d, size in zip(dims, pinned[vi.name]):
                if _static(d) and d.dim_value != size:
                    raise RewriterError(f"--input-shape {vi.name}: dim {size} contradicts the declared "
                                        f"{d.dim_value}")
                if d.WhichOneof("value") == "dim_param" and d.dim_param not in ANONYMOUS:
                    symbols.setdefault(d.dim_param, size)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tp = vi.type
        if tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.elem_type:
            raise RewriterError(f"graph input '{vi.name}': cannot generate random values "
                                f"for a non-tensor or untyped input")
        elem = tp.tensor_type.elem_type
        if vi.name in pinned:
            shape = list(pinned[vi.name])
        else:
            shape = []
            for d in tp.tensor_type.shape.dim:
                if _static(d):
                    shape.append(d.dim_value)
                elif d.WhichOneof("value") == "dim_param" and d.dim_param not in ANONYMOUS:
                    shape.append(symbols.setdefault(d.dim_param, SYMBOL_SIZE))
                else:
                    shape.append(SYMBOL_SIZE)
        feeds[vi.name] = np.asarray(_random_array(rng, elem, tuple(shape), vi.name))
    return feeds


def _static(d) -> bool:
    """A declared size; a negative one (exporters write -1) is a dynamic dim."""
    return d.WhichOneof("value") == "dim_value" and d.dim_value >= 0


def random_feeds(model: onnx.ModelProto, *, input_shapes=None, input_values=None, seed: int = 0) -> dict:
    """:func:`random_inputs`, with the ``input_values`` (--input-value: a list, or one number for
    a scalar) given instead where named; RewriterError naming an input the model has not."""
    feeds = random_inputs(model, seed, input_shapes or {})
    for name, values in (input_values or {}).items():
        if name not in feeds:
            raise RewriterError(f"--input-value: the model has no graph input {name!r} "
                                f"(inputs: {', '.join(sorted(feeds)) or 'none'})")
        given = np.asarray(values, dtype=feeds[name].dtype)
        feeds[name] = given.reshape(feeds[name].shape) if given.size == feeds[name].size else given
    return feeds


def axes_from_inputs(model: onnx.ModelProto) -> list[str]:
    """'input' -> 'node' descriptions of graph inputs that give a ReduceProd its axes."""
    inputs = {vi.name for vi in model.graph.input} - {t.name for t in model.graph.initializer}
    found = []
    for scope in traversal.iter_scopes(model):
        if scope.is_function or (scope.opset or 0) < 18:
            continue
        for node in scope.body.node:
            if (node.op_type == "ReduceProd" and is_default_domain(node.domain) and len(node.input) > 1
                    and node.input[1] in inputs
                    and traversal.definition(node.input[1], scope)[0] == "input"):
                found.append(f"'{node.input[1]}' gives {traversal.node_label(node, scope)} its axes")
    return found


def _random_array(rng, elem: int, shape: tuple, name: str) -> np.ndarray:
    if elem == onnx.TensorProto.STRING:
        return rng.choice(np.array(["a", "b", "c"], dtype=object), size=shape)
    if elem == onnx.TensorProto.BOOL:
        return rng.random(shape) < 0.5
    try:
        dtype = np.dtype(_np_dtype(elem))
    except (KeyError, TypeError, ValueError):
        raise RewriterError(f"graph input '{name}': cannot generate random values of type "
                            f"{onnx.TensorProto.DataType.Name(elem)}") from None
    if elem in _FLOATS:
        values = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
        return values.astype(dtype)
    if np.issubdtype(dtype, np.unsignedinteger):
        return rng.integers(0, 4, shape).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-3, 4, shape).astype(dtype)
    raise RewriterError(f"graph input '{name}': cannot generate random values of type "
                        f"{onnx.TensorProto.DataType.Name(elem)}")
