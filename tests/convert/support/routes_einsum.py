"""Routes of the expressibility oracle (see ``routes.py``): Einsum (opset 12, no function body)
below opset 12, derived from the Einsum operator docs and ``onnx.defs`` alone.

Einsum's value is, per output element, a sum of products of input elements picked by the
labels of the equation. With every input's rank known, each label is bound to axes, and the
classic lowering computes exactly that with older ops: diagonals (a label repeated within one
term) are element copies (Reshape + Gather of static indices), products are broadcasting Mul,
sums are ReduceSum, the order of axes is Transpose (MatMul is only a faster form of Mul then
ReduceSum). So a node is expressible at ``target`` when:

- ``7 <= target < 12`` (Mul broadcasts NumPy-style from opset 7; from 12 Einsum itself
  exists, and this route does not cover a type Einsum-12 lacks);
- every input's rank is known, or its term has no ellipsis (then it has one axis per letter, or
  Einsum itself fails), and the equation is valid for those ranks (the letters of a term
  fit its operand, an ellipsis covers the rest, every ellipsis covers as many dims, the output's
  letters are distinct and occur on the left, the output has an ellipsis when the ellipses
  cover any dims);
- a label repeated within a term has one static size there (conservative: the Gather of a
  diagonal of a symbolic size needs its indices computed at run time), and the static sizes of
  a label other than 1 agree;
- the element type is known and allowed at ``target`` by Transpose (the data movement: also
  what Reshape, Gather, Identity allow), by Mul when there are two or more inputs, and by
  ReduceSum when a label of the inputs is not in the output.
"""

from __future__ import annotations

import string

import onnx
import onnx.defs

ROUTES: dict = {}


def _allows(op: str, opset: int, type_str: str) -> bool:
    schema = onnx.defs.get_schema(op, opset, "")
    first = schema.inputs[0].type_str
    allowed = next((set(c.allowed_type_strs) for c in schema.type_constraints if c.type_param_str == first), {first})
    return type_str in allowed


def _labels(equation: str, ranks: list[int]):
    """(labels per input, output labels) with ellipsis dims as ('.', j) counted from the right;
    or a reason string."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    if "->" in rhs:
        return "two '->'"
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        return "term count differs from the input count"
    inputs, widths, letters = [], [], []
    for term, rank in zip(terms, ranks):
        head, dots, tail = term.partition("...")
        if "." in head + tail or any(c not in string.ascii_letters for c in head + tail):
            return f"bad term {term!r}"
        width = rank - len(head) - len(tail)
        if width < 0 or (width and not dots):
            return f"term {term!r} does not fit rank {rank}"
        widths.append(width)
        letters += list(head + tail)
        inputs.append(list(head) + [(".", j) for j in range(width, 0, -1)] + list(tail))
    if len({w for w, term in zip(widths, terms) if "..." in term}) > 1:
        return "ellipses of different widths (the docs: every ellipsis covers the same number of dims)"
    width = max(widths, default=0)
    if not arrow:
        output = [(".", j) for j in range(width, 0, -1)] + sorted(c for c in set(letters) if letters.count(c) == 1)
        return inputs, output
    head, dots, tail = rhs.partition("...")
    if "." in head + tail or len(set(head + tail)) != len(head + tail) or not set(head + tail) <= set(letters):
        return f"bad output term {rhs!r}"
    if width and not dots:
        return "the output has no ellipsis for the dims the ellipses cover"
    return inputs, list(head) + [(".", j) for j in range(width if dots else 0, 0, -1)] + list(tail)


def _einsum(node, source, target, types, constants):
    if not 7 <= target < 12:
        return "the Einsum route covers targets 7 to 11"
    equation = next((a.s.decode() for a in node.attribute if a.name == "equation"), None)
    if equation is None:
        return "no equation"
    terms = equation.replace(" ", "").partition("->")[0].split(",")
    shapes = []
    for k, name in enumerate(node.input):
        t = types(name) if name else None
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            if k < len(terms) and "..." not in terms[k]:  # the docs: one letter per axis of that input
                shapes.append([None] * len(terms[k]))
                continue
            return f"the rank of '{name}' is unknown"
        shapes.append([d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim])
    parsed = _labels(equation, [len(s) for s in shapes])
    if isinstance(parsed, str):
        return parsed
    inputs, output = parsed
    sizes: dict = {}
    for labels, shape in zip(inputs, shapes):
        for label in set(labels):
            mine = {d for x, d in zip(labels, shape) if x == label}
            if labels.count(label) > 1 and (len(mine) != 1 or None in mine):
                return f"the diagonal of {label!r} has no single static size"
            sizes.setdefault(label, set()).update(d for d in mine if d is not None and d != 1)
    if any(len(v) > 1 for v in sizes.values()):
        return "label sizes do not broadcast"
    t = types(node.input[0])
    if t is None or not t.tensor_type.elem_type:
        return "unknown element type"
    type_str = "tensor(" + onnx.TensorProto.DataType.Name(t.tensor_type.elem_type).lower() + ")"
    needed = ["Transpose"] + (["Mul"] if len(inputs) > 1 else [])
    needed += ["ReduceSum"] if {x for labels in inputs for x in labels} - set(output) else []
    for op in needed:
        if not _allows(op, target, type_str):
            return f"{op}-{target} does not allow {type_str}"
    return None


ROUTES["Einsum"] = _einsum
