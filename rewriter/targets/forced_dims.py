"""``Concat`` / ``forced_dims_fixed`` (``rewrite_forms``; tract 0.23's data): a
main-graph Concat whose inputs have, on an axis other than its own, a symbol of a graph input's
dims in one and a value in another can only run when the symbol is that value (every node of the
main graph runs; ONNX Runtime refuses any other size).  onnxruntime-genai's model builder names the
head size of its past keys "kv_cache_dim" and concatenates them with the new keys of head size 16:
tract refuses to unify the two ("Impossible to unify Sym(kv_cache_dim) with Val(16)"); with the
symbol fixed, llama_tiny_fp32 runs in it.  (TVM 0.27 runs the one-node form so too, but the Llamas
then fail at load, unnamed: it keeps the named refusal.)  Here each such symbol is fixed to its value wherever the model declares
it, as ``--fix-dim SYMBOL=VALUE`` would: no input the model runs on is refused by the result.  A
symbol met by two different values (no input runs) is left.
"""

from __future__ import annotations

import onnx

from rewriter.graph.model_index import value_types
from rewriter.graph.schemas import is_default_domain
from rewriter.graph.static_shapes import fix_shapes, symbol

__all__ = ["forced_dims", "forced_dims_fixed"]


def _dims(types: dict, name: str):
    t = types.get(name)
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return list(t.tensor_type.shape.dim)


def forced_dims(model: onnx.ModelProto, inferred=None) -> dict[str, tuple[int, str]]:
    """symbol -> (value, the Concat's label) for each symbol of the graph inputs' dims that a
    main-graph Concat meets with a value off its axis (one value only)."""
    declared = {d.dim_param for v in model.graph.input if v.type.HasField("tensor_type")
                for d in v.type.tensor_type.shape.dim if symbol(d)}
    types = value_types(model, inferred)
    found: dict[str, set] = {}
    where: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type != "Concat" or not is_default_domain(node.domain):
            continue
        shapes = [d for d in (_dims(types, i) for i in node.input if i) if d is not None]
        if len(shapes) < 2 or len({len(d) for d in shapes}) != 1 or not shapes[0]:
            continue
        rank = len(shapes[0])
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0) % rank
        for k in (k for k in range(rank) if k != axis):  # (along the axis the lengths may differ)
            values = {d[k].dim_value for d in shapes if d[k].HasField("dim_value")}
            for d in shapes:
                if values and symbol(d[k]) in declared:
                    found.setdefault(d[k].dim_param, set()).update(values)
                    where.setdefault(d[k].dim_param, node.name or node.output[0])
    return {s: (next(iter(v)), where[s]) for s, v in sorted(found.items()) if len(v) == 1}


def forced_dims_fixed(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Fix in place each symbol :func:`forced_dims` finds to its value; one note naming them."""
    forced = forced_dims(model, inferred)
    if not forced:
        return []
    fix_shapes(model, fixed={s: v for s, (v, _) in forced.items()})
    shown = ", ".join(f"{s}={v} (Concat '{at}')" for s, (v, at) in forced.items())
    return [f"dims the model can only run with fixed, as --fix-dim would ({release} refuses them symbolic "
            f"where a Concat meets them with a value): {shown}"]
