"""Einsum (opset 12, no function body) decomposed into Transpose/Reshape/MatMul/Mul/ReduceSum
(and Gather for diagonals) for targets that lack it: older opsets and runtimes without Einsum.

The classic lowering, per the equation (``einsum_equation.py``) and the nodes of
``einsum_build.py``: each operand's repeated labels become diagonals, labels only it has and
the output lacks are summed, then the operands are multiplied pairwise from the left, each
product summing the labels no later operand and not the output has, and the result is
transposed to the output's order.
"""

from __future__ import annotations

import onnx

from rewriter.convert import registry, type_only
from rewriter.convert.decompositions import decomposition
from rewriter.convert.decompositions.einsum_build import Term, TermBuilder
from rewriter.convert.decompositions.einsum_equation import implied_ranks, parse_equation, shown

__all__ = ["einsum_to_11"]

_WRITTEN_AT = 11


def _dims(ctx, name: str) -> list | None:
    """Per axis of ``name``: its static size, its dim_param, or None; None when the rank is unknown."""
    t = ctx.value_type(name)
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]


def _type_allowed(op: str, opset: int, elem: int) -> bool:
    since = registry.schema_version_at(op, opset)
    allowed = type_only.allowed_types(op, since, "input", 0) if since is not None else None
    return allowed is not None and "tensor(" + onnx.TensorProto.DataType.Name(elem).lower() + ")" in allowed


def _check_sizes(ctx, equation, dims) -> None:
    """A repeated label has one static size within its operand; the static sizes of a label that
    are not 1 agree across operands."""
    sizes: dict[str, set] = {}
    for k, (labels, ds) in enumerate(zip(equation.inputs, dims)):
        for label in set(labels):
            mine = {d for x, d in zip(labels, ds) if x == label}
            if labels.count(label) > 1 and (len(mine) != 1 or not isinstance(next(iter(mine)), int)):
                ctx.block(f"the diagonal of {shown(label)} (repeated in term {k}) needs one static size "
                          f"there, not {sorted(map(str, mine))}")
            sizes.setdefault(label, set()).update(d for d in mine if isinstance(d, int) and d != 1)
    for label, found in sizes.items():
        if len(found) > 1:
            ctx.block(f"the sizes {sorted(found)} of {shown(label)} do not broadcast")


def _bound_equation(ctx, node: onnx.NodeProto):
    """The node's equation parsed for its inputs' ranks, and their dims (None where unknown);
    blocks when a rank the equation needs is unknown, or the equation or the sizes do not hold."""
    attr = next((a for a in node.attribute if a.name == "equation"), None)
    if attr is None:
        ctx.block("the equation attribute is missing")
    equation = attr.s.decode()
    dims = []
    implied = implied_ranks(equation)
    for k, name in enumerate(node.input):
        found = _dims(ctx, name)
        if found is None and k < len(implied) and implied[k] is not None:
            found = [None] * implied[k]  # a term without an ellipsis has one label per axis
        if found is None:
            ctx.block(f"the rank of input '{name}' is unknown and its term has an ellipsis: the equation's "
                      f"labels cannot be bound to axes")
        dims.append(found)
    try:
        eq = parse_equation(equation, [len(d) for d in dims])
    except ValueError as e:
        ctx.block(str(e))
    _check_sizes(ctx, eq, dims)
    return eq, dims


@decomposition("Einsum", _WRITTEN_AT, reorders_sums=True)
def einsum_to_11(node: onnx.NodeProto, ctx) -> None:
    """Einsum as Transpose, Reshape, MatMul, Mul, ReduceSum, Squeeze, Unsqueeze and Gather nodes of
    opset 11.

    Exact when (else refused with the reason):

    - every input has a known rank, or its term has no ellipsis (then the term's letters are its
      axes: Einsum refuses an input of another rank), and the equation is valid for those ranks
      (as NumPy's ``einsum`` reads it);
    - a label repeated within one operand has one static size there (the diagonal is a Gather of
      static indices); the static sizes of a label other than 1 agree;
    - the element type is allowed by every op the equation needs at opset 11 and at the target:
      Mul for a product, ReduceSum for a sum (no 8- or 16-bit integers then); a contraction is a
      MatMul where the type allows it (integers from opset 9), else Mul then ReduceSum.

    Sizes: a contracted label of static size 1 in one operand is squeezed out of it and the other
    operand summed over it first; other labels broadcast in Mul and MatMul as in Einsum. A contracted label whose sizes are
    not known to be equal (the same static size or dim_param) is MatMul's merged inner axis only
    when it is the only such label, so that a size-1 broadcast of it at run time fails with
    MatMul's shape error rather than computing something else; others such stay batch axes,
    summed after. A Reshape that needs two or more symbolic sizes computes its shape at run time
    (a symbolic size that is 0 at run time then reads as Reshape's 'copy'; zero-size static dims
    that a Reshape would have to write are refused).

    Numerics: integers are exact (wrapping as Einsum's products and sums do); float sums run in
    MatMul's and ReduceSum's order rather than Einsum's, so results agree within rounding. A label
    that one operand alone has is summed before the product (``a * sum(b)``, not ``sum(a * b)``),
    as numpy's and ONNX Runtime's Einsum do: with an inf they give the same inf where the
    written-out sum of products would be NaN.
    """
    eq, dims = _bound_equation(ctx, node)
    elem = ctx.elem_type(node.input[0]) if node.input else None
    if not elem:
        ctx.block(f"the element type of input '{node.input[0]}' is unknown")
    opsets = sorted({_WRITTEN_AT, min(ctx.final_opset or _WRITTEN_AT, _WRITTEN_AT)})
    matmul = all(_type_allowed("MatMul", opset, elem) for opset in opsets)
    build = TermBuilder(ctx, elem, matmul)
    terms = [Term(name, list(labels), list(ds)) for name, labels, ds in zip(node.input, eq.inputs, dims)]
    output = list(eq.output)
    try:
        for i, t in enumerate(terms):
            for label in dict.fromkeys(x for x in t.labels if t.labels.count(x) > 1):
                t = build.diagonal(t, label)
            terms[i] = t
        result = terms[0]
        if len(terms) == 1:
            result = build.reduce(result, [x for x in result.labels if x not in output])
        for k in range(1, len(terms)):
            later = set(output).union(*(u.labels for u in terms[k + 1:]))
            result = build.contract(result, terms[k], later, output if k == len(terms) - 1 else None)
        result = build.transpose(result, output)
    except ValueError as e:
        ctx.block(str(e))
    if not ctx.before:  # the output is an input as it is ('ij->ij')
        ctx.insert_before("Identity", [result.name], [node.output[0]])
    else:  # the last node inserted computes the result
        ctx.before[-1].output[0] = node.output[0]
    for n in ctx.before:  # each op taken must allow its data's type at opset 11 and at the target
        elem_in = ctx.elem_type(n.input[0])
        for opset in opsets:
            if not _type_allowed(n.op_type, opset, elem_in):
                ctx.block(f"the decomposition needs {n.op_type}, which does not allow "
                          f"{onnx.TensorProto.DataType.Name(elem_in).lower()} at opset {opset}")
    ctx.remove()
