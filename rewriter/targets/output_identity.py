"""``Identity`` / ``producer_writes_output``: onnx2tf 2.6.9 (LiteRT's converter) drops an Identity
whose output is a graph output by giving the Identity's input tensor the output's name, and leaves
every other node that reads that input reading a tensor nothing writes: LiteRT then refuses the
model at run ("Input tensor N lacks data"; an Add read by an Identity to a graph output and by a
Neg is enough, static shapes or not).  The lowerings write their results through such Identity
nodes (a tree ensemble's scores, read by the label's argmax too).  Here the node that computes the
Identity's input writes the graph output itself and its readers read it under that name: the same
values, one node fewer.  Left as they are: an Identity in a subgraph, one whose input is a graph
input, an initializer or a graph output itself, or is read inside a subgraph (renaming it there
would need the scopes' shadowing rules)."""

from __future__ import annotations

import onnx

from rewriter.graph import traversal
from rewriter.graph.names import first_few
from rewriter.graph.schemas import is_default_domain

__all__ = ["producer_writes_output"]


def _read_in_subgraphs(model: onnx.ModelProto) -> set[str]:
    names: set[str] = set()
    for scope in traversal.iter_scopes(model):
        if scope.body is not model.graph:
            for node in scope.body.node:
                names.update(node.input)
    return names


def _bypassable(node: onnx.NodeProto, outputs: set, fixed: set) -> bool:
    return (node.op_type == "Identity" and is_default_domain(node.domain) and node.output[0] in outputs
            and node.input[0] not in fixed)


def _rename(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.output[:] = [new if o == old else o for o in node.output]
        node.input[:] = [new if i == old else i for i in node.input]
    keep = [v for v in graph.value_info if v.name != old]
    del graph.value_info[:]
    graph.value_info.extend(keep)


def producer_writes_output(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
    """Remove, in place, every main-graph Identity whose output is a graph output and whose input
    a node of the main graph writes (and no subgraph reads, and is no graph output): that node
    writes the output instead (a chain of such Identity nodes goes, one after the other)."""
    graph = model.graph
    outputs = {v.name for v in graph.output}
    fixed = outputs | {v.name for v in graph.input} | {t.name for t in graph.initializer} | _read_in_subgraphs(model)
    done = []
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(graph.node):
            if _bypassable(node, outputs, fixed):
                old, new = node.input[0], node.output[0]
                del graph.node[i]
                _rename(graph, old, new)
                done.append(node.name or new)
                changed = True
                break
    if not done:
        return []
    return [f"{len(done)} Identity node(s) writing a graph output removed, the node before writing the output "
            f"(onnx2tf drops such an Identity and leaves the other readers of its input without data, which "
            f"{release} refuses): {first_few(repr(n) for n in done)}"]
