"""Static shapes for toolchains that need them: graph inputs get fixed dims, and every value
whose declared shape uses a fixed symbol gets its size (what onnxsim's
``--overwrite-input-shape`` and ONNX Runtime's ``make_dynamic_shape_fixed`` do).

A dim is dynamic when it has a symbol (``batch``), no value at all, or a negative value (the
``-1`` exporters write). ``--input-shape x:1,3,224,224`` fixes an input's dims (its symbols take
those sizes everywhere); ``--fix-dim batch=1`` fixes a symbol wherever it appears. A size
that contradicts a declared static dim, a symbol given two sizes, or a name the model does
not have is refused. Works on the ModelProto in place; tensor data is not touched (so models
with external data of any size are fine).
"""

from __future__ import annotations

import onnx

from rewriter.errors import RewriterError
from rewriter.graph import traversal

__all__ = ["fix_shapes", "fixed_copy", "is_dynamic", "symbol", "ANONYMOUS"]


def is_dynamic(d: onnx.TensorShapeProto.Dimension) -> bool:
    return d.WhichOneof("value") != "dim_value" or d.dim_value < 0


ANONYMOUS = frozenset({"", "?"})  # symbols that name no particular dim (Paddle exports write "?")


def symbol(d: onnx.TensorShapeProto.Dimension) -> str | None:
    """The dim's symbol when it names one (two dims with it are the same size)."""
    return d.dim_param if d.WhichOneof("value") == "dim_param" and d.dim_param not in ANONYMOUS else None


def _symbol_sizes(graph: onnx.GraphProto, input_shapes: dict, fixed: dict, flag: str) -> dict[str, int]:
    inputs = {vi.name: vi for vi in graph.input}
    initializers = {t.name for t in graph.initializer}
    unknown = sorted(n for n in input_shapes if n not in inputs or n in initializers)
    if unknown:
        names = ", ".join(sorted(n for n in inputs if n not in initializers)) or "none"
        raise RewriterError(f"{flag}: the model has no graph input {', '.join(map(repr, unknown))} "
                            f"(inputs: {names})")
    symbols = dict(fixed)
    for name, sizes in input_shapes.items():
        tensor = inputs[name].type.tensor_type
        if not tensor.HasField("shape"):
            continue
        dims = tensor.shape.dim
        if len(dims) != len(sizes):
            raise RewriterError(f"{flag} {name}: {len(sizes)} dim(s) given, the input has rank {len(dims)}")
        for i, (d, size) in enumerate(zip(dims, sizes)):
            if not is_dynamic(d) and d.dim_value != size:
                raise RewriterError(f"{flag} {name}: dim {i} is declared {d.dim_value}, not {size}")
            if symbol(d):
                given = symbols.setdefault(d.dim_param, size)
                if given != size:
                    raise RewriterError(f"{flag} {name}: dim {i} is '{d.dim_param}', which is {given} "
                                        f"elsewhere, not {size}")
    return symbols


def fix_shapes(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
               fixed: dict[str, int] | None = None, names: tuple[str, str] = ("--input-shape", "--fix-dim")) -> list[str]:
    """Fix the dims of ``model`` in place; returns what changed (one line each). ``names``: what the
    refusals call the two arguments (the command line's flags, or the API's argument names)."""
    input_shapes, fixed = dict(input_shapes or {}), dict(fixed or {})
    if not input_shapes and not fixed:
        return []
    graph = model.graph
    symbols = _symbol_sizes(graph, input_shapes, fixed, names[0])
    seen: set[str] = set()
    changed = 0
    for name, sizes in input_shapes.items():
        vi = next(v for v in graph.input if v.name == name)
        tensor = vi.type.tensor_type
        if not tensor.HasField("shape"):
            tensor.shape.SetInParent()
            for size in sizes:
                tensor.shape.dim.add().dim_value = size
            changed += 1
            continue
        for d, size in zip(tensor.shape.dim, sizes):
            if is_dynamic(d):
                if symbol(d):
                    seen.add(d.dim_param)
                d.dim_value = size
                changed += 1
    for scope in traversal.iter_scopes(model):
        body = scope.body
        values = body.value_info if scope.is_function else [*body.input, *body.output, *body.value_info]
        for vi in values:
            tp = vi.type
            if tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
                continue
            for d in tp.tensor_type.shape.dim:
                if symbol(d) and d.dim_param in symbols:
                    seen.add(d.dim_param)
                    d.dim_value = symbols[d.dim_param]
                    changed += 1
    unused = sorted(set(fixed) - seen)
    if unused:
        raise RewriterError(f"{names[1]}: no declared shape uses the symbol(s) {', '.join(map(repr, unused))}")
    lines = [f"input '{n}' fixed to [{', '.join(map(str, s))}]" for n, s in input_shapes.items()]
    lines += [f"symbol '{s}' = {v} wherever it appears" for s, v in sorted(symbols.items()) if s in seen]
    return lines + [f"{changed} dim(s) made static"]


def fixed_copy(model: onnx.ModelProto, input_shapes: dict | None, fixed: dict | None,
               names: tuple[str, str] = ("--input-shape", "--fix-dim")) -> tuple[onnx.ModelProto, list[str]]:
    """(a copy of ``model`` with the dims fixed, what changed) as :func:`fix_shapes`; ``model`` itself
    and no lines when nothing is asked."""
    if not input_shapes and not fixed:
        return model, []
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy, fix_shapes(copy, input_shapes, fixed, names)
