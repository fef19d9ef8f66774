"""``Where`` / ``constant_branch_broadcast`` (``rewrite_forms``; LiteRT's data): onnx2tf 2.6.9
computes ``Where(IsNaN(x), fill, x)`` as ``x`` itself, NaN and all, when the constant ``fill``
broadcasts against ``x`` (the Imputer's lowering: one value per feature, [F] against [N, F];
the probe's ``nan_in_untaken_branch`` form), and right when both branches have one shape.  Where
the output's shape is static (``--input-shape``) and the other branch has it, the constant branch
is written at that shape (``np.broadcast_to``, the same values): the Where's branches then have
one shape, and the ``nan_in_untaken_branch`` refusal (measured_verdicts.untaken_nan_blockers)
no longer applies.  Measured: a Shape -> Expand of the constant instead is computed wrongly too
(onnx2tf folds it back).  Main graph only (initializers); a constant of more than
:data:`LIMIT` elements at the full shape is left (and the Where stays refused by name)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.graph import traversal
from rewriter.graph.constants import constant_value
from rewriter.graph.model_index import value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.measured_verdicts import from_isnan
from rewriter.targets.node_splice import taken_names

__all__ = ["LIMIT", "constant_branch_broadcast"]

LIMIT = 1 << 22  # elements of a constant branch written at the output's shape (16 MiB of float32)


def _static(name: str, types: dict) -> tuple | None:
    t = types.get(name)
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    static = all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims)  # (Paddle's exports declare -1)
    return tuple(d.dim_value for d in dims) if static else None


def constant_branch_broadcast(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each Where the module's docstring names; one note naming them."""
    types = value_types(model, inferred)
    taken = taken_names(model)
    scope = next(s for s in traversal.iter_scopes(model) if s.parent is None and not s.is_function)
    done = []
    for node in scope.body.node:
        if node.op_type != "Where" or not is_default_domain(node.domain) or len(node.input) < 3:
            continue
        out = _static(node.output[0], types)
        if out is None or not from_isnan(node.input[0], scope, set()):
            continue
        for i in (1, 2):
            value = constant_value(node.input[i], scope, numpy_helper.to_array)
            if value is None or value.shape == out or _static(node.input[3 - i], types) != out:
                continue
            if int(np.prod(out)) > LIMIT or np.broadcast_shapes(value.shape, out) != out:
                continue
            name = fresh_name(taken, f"{node.input[i]}_at_{'x'.join(map(str, out))}")
            model.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(np.broadcast_to(value, out)), name))
            node.input[i] = name
            done.append(node.name or node.output[0])
    if not done:
        return []
    return [f"{len(done)} Where node(s) of an IsNaN with a constant branch that broadcast: the constant written at "
            f"the output's static shape ({release} returns the NaN of the other branch otherwise): "
            f"{first_few(repr(n) for n in done)}"]
