"""Scan across opset 9: Scan-8's batch axis.

Scan-8 takes ``sequence_lens`` (optional) then initial states and scan inputs that all carry
a leading batch axis (scan inputs are ``[batch, sequence, ...]``); the body sees one batch
element at a time (no batch axis) and the batch elements are independent. Scan-9 has no
batch axis; it has ``scan_input_axes``/``scan_input_directions`` and the output equivalents.

Up (8 -> 9), when every batch element scans the whole sequence (no ``sequence_lens``, or a
constant one equal to the sequence length everywhere) and the batch size is static:

- batch 1: Squeeze-1 (axes [0]) off every state and scan input, the same node as Scan-9 with
  the same body (``directions`` -> ``scan_input_directions``), Unsqueeze-1 (axes [0]) back
  onto every output (the outputs keep their names).
- batch N > 1 (up to :data:`MAX_UNROLL`): the batch is unrolled inside the body. The node
  stays where it is, becomes Scan-9 with ``scan_input_axes``/``scan_output_axes`` 1 (the
  sequence axis of the batched tensors), so the body now gets and returns batched ``[N, ...]``
  tensors; the body takes element ``n`` of each input with Gather-1 (a scalar index), runs
  one copy of its original nodes per element (element 0 keeps the original value names,
  the others get fresh ones) and stacks each output back with Unsqueeze-1 + Concat-4. The
  body stays the graph object the conversion walks after this node, so its nodes, old and
  new (valid at the model's opset), are then converted to the target like any others.
  Refused when the body holds subgraphs (their copies would escape the conversion).

Down (9 -> 8) is refused.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rewriter.convert.adapters.feature_support import attr_value, record_type
from rewriter.graph.attributes import attribute, remove_attribute, set_attribute
from rewriter.convert.registry import register
from rewriter.graph import traversal

__all__ = ["MAX_UNROLL"]

MAX_UNROLL = 64  # the largest batch unrolled into the body (one copy of the body per element)


@register("Scan", 8, 9, kind="meaning change")
def scan_8_9(node, ctx) -> None:
    body_attr = attribute(node, "body")
    if body_attr is None or body_attr.type != onnx.AttributeProto.GRAPH:
        ctx.block("Scan-8 without a body graph")
    body = body_attr.g
    k = attr_value(node, ctx, "num_scan_inputs")
    if k is None or k <= 0:
        ctx.block("Scan-8 needs num_scan_inputs > 0")
    directions = attr_value(node, ctx, "directions", None)
    if not node.input:
        ctx.block("Scan-8 without inputs")
    inputs = list(node.input[1:])
    m = len(inputs) - k  # loop state variables
    if m < 0 or len(body.input) != m + k or len(body.output) < m or len(node.output) != len(body.output):
        ctx.block(f"the node's {len(inputs)} state and scan inputs, num_scan_inputs={k} and its body's "
                  f"{len(body.input)} inputs and {len(body.output)} outputs do not agree")
    if directions is not None and len(directions) != k:
        ctx.block(f"directions has {len(directions)} entries for {k} scan inputs")
    if any(not name for name in inputs):
        ctx.block("a state or scan input is missing")
    batch = _batch_size(node, ctx, inputs, m)
    _check_sequence_lens(node, ctx, inputs[m:], batch)
    if batch != 1:
        if batch > MAX_UNROLL:
            ctx.block(f"Scan-9 has no batch axis and the batch of {batch} would be unrolled into {batch} "
                      f"copies of the body; rewriter unrolls at most {MAX_UNROLL}")
        if any(a.type in traversal.GRAPH_KINDS
               for n in body.node for a in n.attribute):
            ctx.block(f"Scan-9 has no batch axis: the batch of {batch} would be unrolled into copies of the "
                      f"body, and the body holds subgraphs (If/Loop/Scan), whose copies the conversion would not reach")

    # ---- from here on nothing refuses: the node is rewritten
    if node.input[0]:
        ctx.maybe_unused(node.input[0])
    del node.input[0]  # sequence_lens (absent or the full length everywhere)
    remove_attribute(node, "directions")
    if directions is not None and any(directions):
        set_attribute(node, "scan_input_directions", [int(d) for d in directions])
    if batch == 1:
        _squeeze_batch(node, ctx)
    else:
        _unroll_batch(node, ctx, body, batch, m, k)


@register("Scan", 9, 8, kind="meaning change")
def scan_9_8(node, ctx) -> None:
    ctx.block("Scan-8 scans along a batch axis and has no per-input scan axes or directions; "
              "rewriter does not convert Scan below opset 9")


# ------------------------------------------------------------------ checks


def _batch_size(node, ctx, inputs: list[str], m: int) -> int:
    """The static batch size every state and scan input agrees on, else block."""
    sizes = {}
    for i, name in enumerate(inputs):
        shape = ctx.shape(name)
        need = 1 if i < m else 2
        if shape is None or len(shape) < need or shape[0] is None:
            what = "state" if i < m else "scan input"
            ctx.block(f"Scan-9 has no batch axis and the batch size (dim 0 of {what} '{name}', shape "
                      f"{shape}) is not known statically, so the batch cannot be taken apart")
        sizes[name] = shape[0]
    if len(set(sizes.values())) != 1:
        ctx.block(f"the state and scan inputs disagree on the batch size: "
                  f"{', '.join(f'{n}: {s}' for n, s in sizes.items())}")
    batch = next(iter(sizes.values()))
    if batch < 1:
        ctx.block(f"a batch of {batch}: nothing to scan")
    return batch


def _check_sequence_lens(node, ctx, scan_inputs: list[str], batch: int) -> None:
    """sequence_lens must be absent, or a constant equal to the full sequence length everywhere."""
    name = node.input[0] if node.input else ""
    if not name:
        return
    lens = ctx.constant(name)
    lengths = {ctx.shape(s)[1] for s in scan_inputs}
    if lens is not None and len(lengths) == 1 and None not in lengths:
        (length,) = lengths
        lens = np.asarray(lens).reshape(-1)
        if lens.size == batch and bool(np.all(lens == length)):
            return
    ctx.block(f"sequence_lens '{name}' gives each batch element its own sequence length, which Scan-9 "
              f"(one sequence length for every scan input) cannot express")


# ------------------------------------------------------------------ batch 1


def _squeeze_batch(node, ctx) -> None:
    """Squeeze the batch axis off every input, Unsqueeze it back onto every output."""
    squeezed: dict[str, str] = {}
    for i, name in enumerate(node.input):
        if name not in squeezed:
            out = ctx.insert_before("Squeeze", [name], axes=[0]).output[0]
            shape = ctx.shape(name)
            record_type(ctx, out, ctx.elem_type(name), shape[1:])
            squeezed[name] = out
        ctx.redirect_input(i, squeezed[name])
    for i, name in enumerate(list(node.output)):
        if not name:
            continue
        inner = ctx.redirect_output(i)
        ctx.insert_after("Unsqueeze", [inner], [name], axes=[0])
        shape = ctx.shape(name)
        if shape is not None:
            record_type(ctx, inner, ctx.elem_type(name), shape[1:])
    ctx.record("Scan-8 batch of 1 squeezed off around Scan-9")


# ------------------------------------------------------------------ batch N > 1


def _unroll_batch(node, ctx, body: onnx.GraphProto, batch: int, m: int, k: int) -> None:
    """Scan-9 along axis 1 of the batched tensors; the body runs one copy of its nodes per
    batch element (see the module doc)."""
    n_out = len(body.output)
    set_attribute(node, "scan_input_axes", [1] * k)
    if n_out > m:
        set_attribute(node, "scan_output_axes", [1] * (n_out - m))
    types = _body_types(body, ctx)
    original = list(body.node)
    internal = {o for n in original for o in n.output if o}
    per_element = [dict() for _ in range(batch)]  # element -> body value name -> its name for the element

    new_nodes: list[onnx.NodeProto] = []
    index = []
    for b in range(batch):  # the scalar indices
        const = ctx.make_node("Constant", [], [ctx.fresh_name(f"scan_batch_index_{b}")],
                              value=numpy_helper.from_array(np.array(b, dtype=np.int64), "value"))
        record_type(ctx, const.output[0], onnx.TensorProto.INT64, [])
        new_nodes.append(const)
        index.append(const.output[0])
    for vi in body.input:  # batched inputs, element b of each taken with Gather
        name = vi.name
        batched = ctx.fresh_name(f"{name}_batch")
        per = _type_of(vi.type)
        vi.name = batched
        _prepend_dim(vi.type, batch)
        if vi.type.HasField("tensor_type"):
            ctx.set_type(batched, vi.type)
        for b in range(batch):
            out = name if b == 0 else ctx.fresh_name(f"{name}_b{b}")
            per_element[b][name] = out
            new_nodes.append(ctx.make_node("Gather", [batched, index[b]], [out], axis=0))
            if b and per is not None:
                ctx.set_type(out, per)
    for b in range(1, batch):  # fresh names of the values the copies make
        for name in internal:
            per_element[b][name] = ctx.fresh_name(f"{name}_b{b}")
            if name in types:
                ctx.set_type(per_element[b][name], types[name])
    for name in internal:
        per_element[0][name] = name
    copies: list[onnx.NodeProto] = []
    for b in range(1, batch):
        rename = per_element[b]
        for n in original:
            copy = ctx.make_node(n.op_type, [rename.get(i, i) if i else "" for i in n.input],
                                 [rename.get(o, o) if o else "" for o in n.output])
            copy.domain = n.domain
            copy.attribute.extend(n.attribute)
            if n.doc_string:
                copy.doc_string = n.doc_string
            copies.append(copy)
    stacks: list[onnx.NodeProto] = []
    for vo in body.output:  # element outputs stacked back on a batch axis
        name = vo.name
        per = _type_of(vo.type) or types.get(name)
        parts = []
        for b in range(batch):
            part = ctx.fresh_name(f"{name}_b{b}_unsqueezed")
            stacks.append(ctx.make_node("Unsqueeze", [per_element[b].get(name, name)], [part], axes=[0]))
            if per is not None and per.tensor_type.HasField("shape"):
                one = onnx.TypeProto()
                one.CopyFrom(per)
                _prepend_dim(one, 1)
                ctx.set_type(part, one)
            parts.append(part)
        stacked = ctx.fresh_name(f"{name}_batch")
        stacks.append(ctx.make_node("Concat", parts, [stacked], axis=0))
        vo.name = stacked
        if not vo.type.HasField("tensor_type") and per is not None:
            vo.type.CopyFrom(per)
        _prepend_dim(vo.type, batch)
        if vo.type.HasField("tensor_type"):
            ctx.set_type(stacked, vo.type)
    del body.node[:]
    body.node.extend([*new_nodes, *original, *copies, *stacks])
    ctx.record("Scan-8 batch unrolled in the body of Scan-9")


def _type_of(t: onnx.TypeProto) -> onnx.TypeProto | None:
    if not t.HasField("tensor_type") or not t.tensor_type.elem_type:
        return None
    copy = onnx.TypeProto()
    copy.CopyFrom(t)
    return copy


def _prepend_dim(t: onnx.TypeProto, size: int) -> None:
    """Give a tensor type with a known shape a leading dim of ``size``."""
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return
    dims = list(t.tensor_type.shape.dim)
    del t.tensor_type.shape.dim[:]
    t.tensor_type.shape.dim.add().dim_value = size
    for d in dims:
        t.tensor_type.shape.dim.add().CopyFrom(d)


def _body_types(body: onnx.GraphProto, ctx) -> dict[str, onnx.TypeProto]:
    """The types of the body's values (before the rewrite), from shape inference of the body
    on its own: what the copies' values are typed with (best effort: none on failure)."""
    found: dict[str, onnx.TypeProto] = {}
    for vi in [*body.input, *body.output, *body.value_info]:
        t = _type_of(vi.type)  # a copy: the body's inputs and outputs get a batch dim afterwards
        if t is not None:
            found[vi.name] = t
    defined = {v.name for v in body.input} | {t.name for t in body.initializer}
    defined |= {o for n in body.node for o in n.output}
    outer = sorted({i for n in body.node for i in n.input if i and i not in defined})
    graph = onnx.GraphProto()
    graph.CopyFrom(body)
    for name in outer:
        t = ctx.value_type(name)
        if t is None:
            return found
        graph.input.append(onnx.helper.make_value_info(name, t))
    if ctx.scope.opset is None:
        return found
    shell = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", ctx.scope.opset)])
    try:
        inferred = onnx.shape_inference.infer_shapes(shell)
    except Exception:  # noqa: BLE001  (the types only spare later steps a refusal)
        return found
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        t = _type_of(vi.type)
        if vi.name not in found and t is not None:
            found[vi.name] = t
    return found
