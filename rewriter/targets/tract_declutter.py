"""``Mul`` / ``int_products_in_float`` and ``Less`` / ``duplicates_merged``: two forms tract 0.23
cannot take in a large model, each measured on the quantized piper_tashkeel models converted for it.

- tract tags every one-element integer constant with its value as a symbolic dim, and takes an
  integer Mul by such a constant as a mask from which it propagates a region of interest
  (``PropagateRoi`` in its declutter: 71% of the time, perf), pass after pass: with the 87 such
  Muls that the QLinearAdd / QLinearMul lowerings write in int32 (the table index, (a - qmin) *
  256 + (b - qmin)), piper_tashkeel_qop's load passed 7 minutes and 16 GB. Such a Mul whose other
  input has a range read from the graph (a Cast of an 8- or 16-bit integer or a bool, a constant,
  and Add / Sub / Mul / Neg of those) with every product below 2^24 in magnitude is computed in
  float32 between Casts: the same integers, exactly. The load then takes 61 s (the float model's 68).
- tract merges identical nodes itself (``PushSplitDown``) and, when two identical Less nodes are
  listed in opposite orders by their two inputs' readers, deletes both, leaving "a Dummy op" that
  fails at run time ("eval() called on a Dummy op. This is a bug."): nine GRUs unrolled from one
  sequence-length tensor build the same step mask nine times. Identical nodes are merged here first
  (rewriter's own common-subexpression pass, ``rewriter optimize``'s), so tract has none to merge.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from rewriter.graph import traversal
from rewriter.graph.model_index import value_types
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import splice_found
from rewriter.targets.restriction_lookups import constant_array

__all__ = ["EXACT_BELOW", "duplicates_merged", "int_products_in_float", "value_range"]

EXACT_BELOW = 2 ** 24  # every integer of smaller magnitude is a float32, and so is every such product
_INTS = {TensorProto.INT32: np.int32, TensorProto.INT64: np.int64}
_NARROW = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.UINT16: np.uint16,
           TensorProto.INT16: np.int16, TensorProto.BOOL: np.bool_}


def value_range(name: str, scope: traversal.Scope, elems: dict, depth: int = 0) -> tuple[int, int] | None:
    """(lowest, highest) that integer value ``name`` can hold, read from the graph, or None."""
    value = constant_array(name, scope)
    if value is not None:
        return (int(value.min()), int(value.max())) if value.size and value.dtype.kind in "iub" else None
    node = scope.producers().get(name)
    if node is None or depth > 16 or not is_default_domain(node.domain):
        return None
    if node.op_type == "Cast":
        kind = _NARROW.get(elems.get(node.input[0]))
        if kind is None:
            return None
        return (0, 1) if kind is np.bool_ else (int(np.iinfo(kind).min), int(np.iinfo(kind).max))
    inputs = [value_range(i, scope, elems, depth + 1) for i in node.input]
    if not inputs or any(r is None for r in inputs):
        return None
    if node.op_type == "Neg" and len(inputs) == 1:
        return -inputs[0][1], -inputs[0][0]
    if node.op_type in ("Add", "Sub", "Mul") and len(inputs) == 2:
        (a, b), (c, d) = inputs
        ends = {"Add": (a + c, b + d), "Sub": (a - d, b - c), "Mul": (a * c, a * d, b * c, b * d)}[node.op_type]
        return min(ends), max(ends)
    return None


def _plan(node: onnx.NodeProto, scope: traversal.Scope, elems: dict) -> tuple[int, int] | None:
    """(the constant's input index, the output's element type) of an integer Mul by a one-element
    constant whose products are all below 2^24 in magnitude, else None."""
    if node.op_type != "Mul" or not is_default_domain(node.domain) or len(node.input) != 2:
        return None
    elem = elems.get(node.output[0])
    if elem not in _INTS:
        return None
    for k in (0, 1):
        c = constant_array(node.input[k], scope)
        if c is None or c.size != 1 or c.dtype.kind not in "iu":
            continue
        other = value_range(node.input[1 - k], scope, elems)
        if other is not None and max(abs(other[0]), abs(other[1])) * max(abs(int(c.reshape(-1)[0])), 1) < EXACT_BELOW:
            return k, elem
    return None


def _write(node: onnx.NodeProto, plan: tuple[int, int], taken: set) -> list[onnx.NodeProto]:
    k, elem = plan
    base = node.name or node.output[0]
    floats, nodes = [], []
    for i, name in enumerate(node.input):
        out = fresh_name(taken, f"{base}_f{i}")
        nodes.append(helper.make_node("Cast", [name], [out], name=fresh_name(taken, out), to=TensorProto.FLOAT))
        floats.append(out)
    product = fresh_name(taken, f"{base}_float")
    nodes.append(helper.make_node("Mul", floats, [product], name=node.name))
    nodes.append(helper.make_node("Cast", [product], list(node.output), name=fresh_name(taken, f"{base}_int"), to=elem))
    return nodes


def int_products_in_float(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Rewrite in place each main-graph integer Mul of the form (module doc); one note."""
    types = value_types(model, inferred)
    elems = {n: t.tensor_type.elem_type for n, t in types.items() if t.HasField("tensor_type")}
    done = splice_found(model, lambda node, scope: _plan(node, scope, elems) if scope.body is model.graph else None,
                        _write)
    if not done:
        return []
    return [f"{len(done)} integer Mul node(s) by a one-element constant, every product below 2^24, computed in float32 "
            f"between Casts (the same integers; {release} propagates a region of interest from each such Mul and "
            f"a model with many does not finish loading): {first_few(repr(n) for n in done)}"]


def _duplicates(graph: onnx.GraphProto) -> int:
    seen, count = set(), 0
    for node in graph.node:
        if node.op_type == "Constant" or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                                             for a in node.attribute):
            continue
        key = (node.domain, node.op_type, tuple(node.input), tuple(a.SerializeToString() for a in node.attribute))
        count += key in seen
        seen.add(key)
    return count


def duplicates_merged(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Merge in place the model's identical nodes when its main graph has a Less and two identical
    nodes (rewriter optimize's common-subexpression pass: identical Less nodes may only appear once
    their inputs are merged); one note."""
    del inferred
    if not any(n.op_type == "Less" and is_default_domain(n.domain) for n in model.graph.node) or \
            not _duplicates(model.graph):
        return []
    from rewriter.optimize import bridge
    from rewriter.optimize.cse import CommonSubexpressionEliminationPass

    work, carry = bridge.to_ir(model)
    CommonSubexpressionEliminationPass()(work)
    merged_model = bridge.to_proto(work, carry)
    merged = len(model.graph.node) - len(merged_model.graph.node)
    if not merged:  # (the model is left as it was, not as the bridge writes it back)
        return []
    model.CopyFrom(merged_model)
    return [f"{merged} node(s) identical to another merged ({release} merges identical nodes itself and can leave "
            f"a Less it deleted in the graph)"]
