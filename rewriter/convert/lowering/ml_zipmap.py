"""``ai.onnx.ml`` ZipMap, which builds a sequence of maps (one per row: class label -> probability)
that no standard op builds. Where its maps are a main-graph output and nothing else reads them,
the tensor they are made from stands for them: the output keeps its name and becomes that float
tensor ``[N, C]``, one column per class in the order of the node's class labels (the order ONNX
Runtime's kernel pairs them: ``zipmap.cc``), and the labels are kept in the output's doc_string
and in the model's ``metadata_props`` under ``rewriter.zipmap.<output name>`` (a JSON list).
The conversion warns that the output's type changed. A ZipMap nothing reads goes; one whose maps
another node reads, or that is the output of a subgraph or a function, is refused by name."""

from __future__ import annotations

import json

from onnx import helper

from rewriter.convert.lowering.emit import F32, NewOutputType
from rewriter.convert.lowering.registry import lowering
from rewriter.graph import traversal

__all__ = ["METADATA_PREFIX", "zipmap_labels"]

METADATA_PREFIX = "rewriter.zipmap."  # + the output's name: its class labels, a JSON list


def zipmap_labels(model) -> dict[str, list]:
    """{graph output name: its class labels, in column order} of the outputs a ZipMap lowering made
    tensors (read from ``model.metadata_props``)."""
    return {p.key[len(METADATA_PREFIX):]: json.loads(p.value) for p in model.metadata_props
            if p.key.startswith(METADATA_PREFIX)}


def _why_not_a_tensor(ctx, name: str) -> str | None:
    scope = ctx.scope
    if scope is None or scope.is_function or scope.parent is not None:
        return "in a subgraph or a function, whose output type the graph around it fixes"
    if any(name in n.input for n in traversal.all_nodes(scope.body)):
        return "another node reads them"
    return None


def _batch_dim(ctx, dim):
    """The rows' dim when known: a number, or a name a graph input declares (not one inference made up)."""
    if isinstance(dim, str):
        declared = {d.dim_param for v in ctx.scope.body.input for d in v.type.tensor_type.shape.dim}
        return dim if dim in declared else None
    return dim


@lowering("ZipMap", exactness="exact: the probabilities' tensor itself, one column per class label in the "
                              "node's order (the output's type changes from a sequence of maps)")
def zip_map(ctx) -> None:
    """The maps, a main-graph output, become the tensor they were made of (a rank-1 input: one row)."""
    if not ctx.used(0):
        return
    ctx.known("classlabels_int64s", "classlabels_strings")
    name = ctx.node.output[0]
    why = _why_not_a_tensor(ctx, name)
    if why is not None:
        ctx.block(f"its output is a sequence of maps, which no standard ONNX op builds ({why}); convert the "
                  "model without ZipMap (skl2onnx: options={'zipmap': False})")
    ints, strs = ctx.ints("classlabels_int64s"), ctx.strings("classlabels_strings")
    if bool(len(ints)) == bool(strs):
        ctx.block("it needs exactly one of classlabels_int64s and classlabels_strings (onnxruntime refuses it)")
    labels = strs or [int(v) for v in ints]
    ctx.input_elem({F32: "float"})
    x = ctx.input(0)
    if x.rank not in (1, 2):
        ctx.block(f"input rank {'unknown' if x.rank is None else x.rank}: onnxruntime zips rank 1 or 2")
    if x.dim(-1) is not None and x.dim(-1) != len(labels):
        ctx.block(f"{x.dim(-1)} columns for {len(labels)} class labels (onnxruntime refuses the input)")
    e = ctx.emit
    if x.rank == 1:
        e.unsqueeze(ctx.node.input[0], [0], out=name)
        rows = 1
    else:
        e.identity(ctx.node.input[0], name)
        rows = _batch_dim(ctx, x.shape[0])
    key = METADATA_PREFIX + name
    shown = json.dumps(labels)
    what = f"probabilities, one column per class in the order {shown}"
    e.writer.retyped.append(NewOutputType(
        name, helper.make_tensor_type_proto(F32, [rows, len(labels)]),
        f"{what} (a ZipMap's sequence of maps before rewriter lowered it; the labels are in metadata_props "
        f"{key!r})", (key, shown),
        f"{name}: sequence of maps -> tensor float [{rows if rows is not None else 'N'}, {len(labels)}] of {what} "
        f"(the labels also in metadata_props {key!r})"))
